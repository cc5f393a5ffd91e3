"""The resource registry: which group/version/resource the sandbox serves, and how.

Built-in types are declared here; custom resources are added when a
CustomResourceDefinition is created (see :meth:`Registry.register_crd`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# CONNECT subresources of pods and the kind of their options
CONNECT_KINDS = {
    "exec": "PodExecOptions",
    "attach": "PodAttachOptions",
    "portforward": "PodPortForwardOptions",
}

_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]

# generic field selectors every resource supports
_META_FIELDS = frozenset({"metadata.name", "metadata.namespace"})


@dataclass(frozen=True)
class ResourceDef:
    """One served resource (e.g. ``pods`` in core/v1)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()  # "status", "binding", "resize" ...
    fields: frozenset[str] = _META_FIELDS  # supported field-selector labels
    custom: bool = False  # a custom resource (no strategic merge patch)
    schema: dict[str, Any] | None = None  # openAPIV3Schema of a custom resource
    categories: tuple[str, ...] = ()
    return_deleted: bool = False  # DELETE answers with the object instead of a Status
    columns: tuple[dict[str, Any], ...] = ()  # additionalPrinterColumns of a CRD
    verbs: tuple[str, ...] = ()  # served verbs when not all of them (the create-only reviews)

    @property
    def key(self) -> tuple[str, str]:
        """Storage key: objects are shared between the versions of one group/resource."""
        return (self.group, self.plural)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def discovery(self) -> list[dict[str, Any]]:
        """APIResource entries of this resource and its subresources."""
        main: dict[str, Any] = {
            "name": self.plural,
            "singularName": self.singular or self.kind.lower(),
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(self.verbs) or _VERBS,
        }
        if self.short_names:
            main["shortNames"] = list(self.short_names)
        if self.categories:
            main["categories"] = list(self.categories)
        out = [main]
        for sub in self.subresources:
            if sub in ("status", "resize"):
                out.append(
                    {
                        "name": f"{self.plural}/{sub}",
                        "singularName": "",
                        "namespaced": self.namespaced,
                        "kind": self.kind,
                        "verbs": ["get", "patch", "update"],
                    }
                )
            elif sub in CONNECT_KINDS:
                out.append(
                    {
                        "name": f"{self.plural}/{sub}",
                        "singularName": "",
                        "namespaced": self.namespaced,
                        "kind": CONNECT_KINDS[sub],
                        "verbs": ["create", "get"],
                    }
                )
            elif sub == "token":
                out.append(
                    {
                        "name": f"{self.plural}/token",
                        "singularName": "",
                        "namespaced": self.namespaced,
                        "group": "authentication.k8s.io",
                        "version": "v1",
                        "kind": "TokenRequest",
                        "verbs": ["create"],
                    }
                )
            elif sub == "binding":
                out.append(
                    {
                        "name": f"{self.plural}/binding",
                        "singularName": "",
                        "namespaced": self.namespaced,
                        "kind": "Binding",
                        "verbs": ["create"],
                    }
                )
        return out


_POD_FIELDS = _META_FIELDS | {
    "spec.nodeName",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.restartPolicy",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
}
_EVENT_FIELDS = _META_FIELDS | {
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
}

_RBAC = "rbac.authorization.k8s.io"
_AUTHZ = "authorization.k8s.io"

BUILTINS: tuple[ResourceDef, ...] = (
    ResourceDef(
        "",
        "v1",
        "pods",
        "Pod",
        True,
        short_names=("po",),
        subresources=("status", "binding", "exec", "attach", "portforward", "resize"),
        fields=_POD_FIELDS,
        categories=("all",),
        return_deleted=True,
    ),
    ResourceDef(
        "",
        "v1",
        "nodes",
        "Node",
        False,
        short_names=("no",),
        subresources=("status",),
        fields=_META_FIELDS | {"spec.unschedulable"},
        return_deleted=True,
    ),
    ResourceDef(
        "",
        "v1",
        "namespaces",
        "Namespace",
        False,
        short_names=("ns",),
        subresources=("status",),
        fields=_META_FIELDS | {"status.phase"},
        return_deleted=True,
    ),
    ResourceDef("", "v1", "events", "Event", True, short_names=("ev",), fields=_EVENT_FIELDS),
    ResourceDef(
        "events.k8s.io",
        "v1",
        "events",
        "Event",
        True,
        short_names=("ev",),
        fields=_META_FIELDS
        | {
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "reason",
            "reportingController",
            "type",
        },
    ),
    ResourceDef(
        "",
        "v1",
        "serviceaccounts",
        "ServiceAccount",
        True,
        short_names=("sa",),
        subresources=("token",),
    ),
    ResourceDef("", "v1", "configmaps", "ConfigMap", True, short_names=("cm",)),
    ResourceDef(
        "",
        "v1",
        "services",
        "Service",
        True,
        short_names=("svc",),
        subresources=("status",),
        categories=("all",),
    ),
    ResourceDef("", "v1", "endpoints", "Endpoints", True, short_names=("ep",)),
    ResourceDef(
        "discovery.k8s.io",
        "v1",
        "endpointslices",
        "EndpointSlice",
        True,
        fields=_META_FIELDS | {"addressType"},
    ),
    ResourceDef("", "v1", "secrets", "Secret", True, fields=_META_FIELDS | {"type"}),
    ResourceDef("coordination.k8s.io", "v1", "leases", "Lease", True),
    ResourceDef(
        "batch",
        "v1",
        "jobs",
        "Job",
        True,
        subresources=("status",),
        fields=_META_FIELDS | {"status.successful"},
        categories=("all",),
        return_deleted=True,
    ),
    # resource.k8s.io/v1 (Dynamic Resource Allocation, GA in 1.34)
    ResourceDef("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False),
    ResourceDef(
        "resource.k8s.io",
        "v1",
        "resourceslices",
        "ResourceSlice",
        False,
        fields=_META_FIELDS | {"spec.nodeName", "spec.driver"},
    ),
    ResourceDef(
        "resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True, subresources=("status",)
    ),
    ResourceDef("resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True),
    ResourceDef(_RBAC, "v1", "roles", "Role", True),
    ResourceDef(_RBAC, "v1", "clusterroles", "ClusterRole", False),
    ResourceDef(_RBAC, "v1", "rolebindings", "RoleBinding", True),
    ResourceDef(_RBAC, "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    # the create-only reviews (answered by ``rbac.review``, never stored)
    ResourceDef(
        _AUTHZ,
        "v1",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        False,
        verbs=("create",),
    ),
    ResourceDef(
        _AUTHZ, "v1", "subjectaccessreviews", "SubjectAccessReview", False, verbs=("create",)
    ),
    ResourceDef(
        _AUTHZ,
        "v1",
        "localsubjectaccessreviews",
        "LocalSubjectAccessReview",
        True,
        verbs=("create",),
    ),
    ResourceDef(
        _AUTHZ,
        "v1",
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
        False,
        verbs=("create",),
    ),
    ResourceDef(
        "authentication.k8s.io",
        "v1",
        "selfsubjectreviews",
        "SelfSubjectReview",
        False,
        verbs=("create",),
    ),
    ResourceDef(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        False,
        categories=("api-extensions",),
    ),
    ResourceDef(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        False,
        categories=("api-extensions",),
    ),
    ResourceDef(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        short_names=("crd", "crds"),
        subresources=("status",),
        categories=("api-extensions",),
        return_deleted=True,
    ),
)


_SCHED = "scheduling.k8s.io"
_DRA = "resource.k8s.io"

# What each Kubernetes version serves beyond BUILTINS (``--kube-version``; preferred
# version of a group first).
# 1.36: the built-in Workload API with the GenericWorkload gate, at scheduling.k8s.io/
# v1alpha2. A Workload has no status; a PodGroup's is written through /status
# (sandbox.kubeapi.workload_types).
# 1.37: v1alpha2 removed; Workload and PodGroup at v1beta1 and v1alpha3, CompositePodGroup
# (KEP-6012) at v1alpha3 only (one stored object per resource: no conversion); DRA device
# taints GA, with DeviceTaintRule at resource.k8s.io/v1 (KEP-5055).
BY_KUBE_VERSION: dict[str, tuple[ResourceDef, ...]] = {
    "1.36": (
        ResourceDef(_SCHED, "v1alpha2", "workloads", "Workload", True),
        ResourceDef(_SCHED, "v1alpha2", "podgroups", "PodGroup", True, subresources=("status",)),
    ),
    "1.37": (
        ResourceDef(_SCHED, "v1beta1", "workloads", "Workload", True),
        ResourceDef(_SCHED, "v1beta1", "podgroups", "PodGroup", True, subresources=("status",)),
        ResourceDef(_SCHED, "v1alpha3", "workloads", "Workload", True),
        ResourceDef(_SCHED, "v1alpha3", "podgroups", "PodGroup", True, subresources=("status",)),
        ResourceDef(
            _SCHED,
            "v1alpha3",
            "compositepodgroups",
            "CompositePodGroup",
            True,
            subresources=("status",),
        ),
        ResourceDef(
            _DRA, "v1", "devicetaintrules", "DeviceTaintRule", False, subresources=("status",)
        ),
    ),
}
KUBE_VERSIONS = tuple(BY_KUBE_VERSION)
DEFAULT_KUBE_VERSION = "1.36"


class Registry:
    """Served resources by (group, version, plural); CRDs add and remove entries.
    ``kube_version``: which Kubernetes release's built-in set (:data:`BY_KUBE_VERSION`)."""

    def __init__(self, kube_version: str = DEFAULT_KUBE_VERSION) -> None:
        if kube_version not in BY_KUBE_VERSION:
            known = ", ".join(KUBE_VERSIONS)
            raise ValueError(f"kube_version {kube_version!r}: the sandbox serves {known}")
        self.kube_version = kube_version
        self._defs: dict[tuple[str, str, str], ResourceDef] = {}
        for d in (*BUILTINS, *BY_KUBE_VERSION[kube_version]):
            self.add(d)

    def add(self, d: ResourceDef) -> None:
        self._defs[(d.group, d.version, d.plural)] = d

    def remove_group_resource(self, group: str, plural: str) -> None:
        for k in [k for k in self._defs if k[0] == group and k[2] == plural]:
            del self._defs[k]

    def get(self, group: str, version: str, plural: str) -> ResourceDef | None:
        return self._defs.get((group, version, plural))

    def all(self) -> list[ResourceDef]:
        return list(self._defs.values())

    def group_versions(self) -> dict[str, list[str]]:
        """group -> served versions (preferred first)."""
        out: dict[str, list[str]] = {}
        for g, v, _ in self._defs:
            vs = out.setdefault(g, [])
            if v not in vs:
                vs.append(v)
        return out

    def by_kind(self, api_version: str, kind: str) -> ResourceDef | None:
        for d in self._defs.values():
            if d.api_version == api_version and d.kind == kind:
                return d
        return None

    @staticmethod
    def defs_from_crd(crd: dict[str, Any]) -> list[ResourceDef]:
        """The ResourceDefs a CRD declares (one per served version)."""
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        out: list[ResourceDef] = []
        for ver in spec.get("versions") or []:
            if not ver.get("served", True):
                continue
            subs = ("status",) if "status" in (ver.get("subresources") or {}) else ()
            out.append(
                ResourceDef(
                    group=spec.get("group", ""),
                    version=ver["name"],
                    plural=names.get("plural", ""),
                    kind=names.get("kind", ""),
                    namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                    singular=names.get("singular", ""),
                    short_names=tuple(names.get("shortNames") or ()),
                    categories=tuple(names.get("categories") or ()),
                    subresources=subs,
                    custom=True,
                    schema=(ver.get("schema") or {}).get("openAPIV3Schema"),
                    return_deleted=True,
                    columns=tuple(ver.get("additionalPrinterColumns") or ()),
                )
            )
        return out
