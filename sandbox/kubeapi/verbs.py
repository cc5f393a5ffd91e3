"""Verb semantics on top of the store: create, get, list, update, patch, delete, bind.

This layer speaks dicts and raises :class:`ApiError`; HTTP lives in ``handlers``. The
fake kubelet and the test hooks call it directly.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import uuid
from datetime import datetime, timedelta
from typing import Any

from bridge.clock import Clock
from bridge.fastjson import clone
from sandbox.kubeapi import admission_plugins, dra_types, workload_types
from sandbox.kubeapi.errors import (
    ApiError,
    already_exists,
    bad_request,
    conflict,
    expired,
    invalid,
    not_found,
)
from sandbox.kubeapi.patch import json_patch, merge_patch, strategic_merge
from sandbox.kubeapi.pruning import prune_object
from sandbox.kubeapi.registry import Registry, ResourceDef
from sandbox.kubeapi.selectors import (
    fields_match,
    labels_match,
    parse_field_selector,
    parse_label_selector,
)
from sandbox.kubeapi.store import Obj, Store
from sandbox.kubeapi.webhook_config import validate_configuration

CRD_KEY = ("apiextensions.k8s.io", "customresourcedefinitions")
NS_KEY = ("", "namespaces")
SA_KEY = ("", "serviceaccounts")
POD_KEY = ("", "pods")
NODE_KEY = ("", "nodes")

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"

_WEBHOOK_KEYS = (
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
)

# resources whose metadata.generation a real server maintains
_GENERATION_KEYS = {POD_KEY, ("batch", "jobs"), CRD_KEY}

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


ORPHAN_FINALIZER = "orphan"
FOREGROUND_FINALIZER = "foregroundDeletion"


def gc_finalizer(rd: ResourceDef, opts: dict[str, Any]) -> str | None:
    """The finalizer a delete adds for the garbage collector: ``orphan`` (propagationPolicy
    Orphan, orphanDependents=true, and batch/v1 Jobs' default) or ``foregroundDeletion``."""
    policy = opts.get("propagationPolicy")
    if policy is None and opts.get("orphanDependents") is not None:
        policy = "Orphan" if opts["orphanDependents"] else "Background"
    if policy is None and rd.key == ("batch", "jobs") and rd.version == "v1":
        policy = "Orphan"
    return {"Orphan": ORPHAN_FINALIZER, "Foreground": FOREGROUND_FINALIZER}.get(str(policy))


def fmt_time(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def success_status(details: dict[str, Any] | None = None, code: int = 200) -> Obj:
    body: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    if details is not None:
        body["details"] = details
    if code != 200:
        body["code"] = code
    return body


def _strip_rv(obj: Obj) -> Obj:
    o = clone(obj)
    o.get("metadata", {}).pop("resourceVersion", None)
    o.get("metadata", {}).pop("managedFields", None)
    return o


def _body_of(obj: Obj) -> Obj:
    """Everything but metadata and status: what metadata.generation tracks."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


class ObjectApi:
    """The semantics of kube-apiserver on an in-memory store."""

    def __init__(
        self,
        store: Store,
        registry: Registry,
        clock: Clock,
        *,
        serviceaccount_delay: float = 0.05,
    ) -> None:
        self.store = store
        self.registry = registry
        self.clock = clock
        self.serviceaccount_delay = serviceaccount_delay
        # nodes created while this is true get no not-ready taint (the node helper sets it)
        self._ready_nodes: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    # --- helpers -----------------------------------------------------------------------

    def now(self) -> str:
        return fmt_time(self.clock.now())

    def resolve(self, group: str, version: str, plural: str) -> ResourceDef:
        rd = self.registry.get(group, version, plural)
        if rd is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return rd

    def cancel_background(self) -> None:
        """Cancel the modelled controllers' pending work (server shutdown)."""
        for task in list(self._tasks):
            task.cancel()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def present(self, rd: ResourceDef, obj: Obj) -> Obj:
        """Present a stored object in the requested version."""
        obj["apiVersion"] = rd.api_version
        obj["kind"] = rd.kind
        return obj

    def _require_ns(self, rd: ResourceDef, namespace: str) -> None:
        if rd.namespaced and self.store.get(NS_KEY, "", namespace) is None:
            raise not_found("namespaces", namespace)

    # --- read --------------------------------------------------------------------------

    def get(self, rd: ResourceDef, namespace: str, name: str) -> Obj:
        obj = self.store.get(rd.key, namespace if rd.namespaced else "", name)
        if obj is None:
            raise not_found(rd.plural, name, rd.group)
        return self.present(rd, obj)

    def list(
        self,
        rd: ResourceDef,
        namespace: str,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = 0,
        continue_token: str | None = None,
    ) -> Obj:
        lsel = parse_label_selector(label_selector)
        fsel = parse_field_selector(field_selector, rd.fields)
        # Like kube-apiserver: a list with a selector has no remainingItemCount (its storage
        # would have to test every object left), so a page stops at its first object more.
        selected_all = not label_selector and not field_selector
        rv = self.store.resource_version
        start: list[str] | None = None
        if continue_token:
            try:
                tok = json.loads(base64.urlsafe_b64decode(continue_token.encode()))
                start = [str(tok["start"][0]), str(tok["start"][1])]
                tok_rv = int(tok["rv"])
            except (ValueError, KeyError, TypeError, IndexError) as e:
                raise bad_request("continue key is not valid") from e
            if tok_rv < self.store.compacted:
                raise expired(
                    "The provided continue parameter is too old to display a consistent "
                    "list result. You can start a new list without the continue parameter."
                )
            rv = tok_rv
        items, rest = self.store.page(
            rd.key,
            namespace if rd.namespaced else None,
            lambda o: labels_match(lsel, o) and fields_match(fsel, o),
            after=(start[0], start[1]) if start is not None else None,
            limit=limit,
            count_rest=selected_all,
        )
        meta: Obj = {"resourceVersion": str(rv)}
        if rest:
            last = items[-1]["metadata"]
            tok = {"rv": rv, "start": [last.get("namespace", ""), last["name"]]}
            meta["continue"] = base64.urlsafe_b64encode(json.dumps(tok).encode()).decode()
            if selected_all:
                meta["remainingItemCount"] = rest
        for o in items:
            if rd.custom:  # custom resource lists carry kind/apiVersion per item
                self.present(rd, o)
            else:
                o.pop("apiVersion", None)
                o.pop("kind", None)
        return {
            "kind": f"{rd.kind}List",
            "apiVersion": rd.api_version,
            "metadata": meta,
            "items": items,
        }

    # --- create ------------------------------------------------------------------------

    def create(
        self,
        rd: ResourceDef,
        namespace: str,
        body: Any,
        *,
        dry_run: bool = False,
        keep_identity: bool = False,
    ) -> Obj:
        """``keep_identity``: keep the body's uid and creationTimestamp (an admitted object
        whose validating webhooks saw them)."""
        if not isinstance(body, dict):
            raise bad_request("the body of the request was in an unknown format")
        obj: Obj = clone(body)
        md = obj.setdefault("metadata", {})
        if not isinstance(md, dict):
            raise bad_request("metadata must be an object")
        self._check_kind(rd, obj)
        if rd.namespaced:
            if md.get("namespace") and md["namespace"] != namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace "
                    "sent on the request"
                )
            md["namespace"] = namespace
            self._require_ns(rd, namespace)
            nsobj = self.store.get(NS_KEY, "", namespace)
            if nsobj and nsobj["metadata"].get("deletionTimestamp"):
                raise ApiError(
                    403,
                    "Forbidden",
                    f'{rd.plural} "{md.get("name") or md.get("generateName", "")}" is forbidden:'
                    f" unable to create new content in namespace {namespace} because it is"
                    " being terminated",
                )
        else:
            md.pop("namespace", None)
        if not md.get("name"):
            if md.get("generateName"):
                md["name"] = md["generateName"] + uuid.uuid4().hex[:5]
            else:
                raise invalid(
                    rd.kind, "", "metadata.name", "Required value: name or generateName is required"
                )
        name = md["name"]
        pattern = _DNS_LABEL if rd.key == NS_KEY else _DNS_SUBDOMAIN
        if rd.group == "rbac.authorization.k8s.io":  # any path segment name ("system:x")
            if name in (".", "..") or "/" in name or "%" in name:
                raise invalid(
                    rd.kind, name, "metadata.name",
                    f'Invalid value: "{name}": may not contain \'/\' or \'%\'',
                )  # fmt: skip
        elif not pattern.match(name) or len(name) > 253:
            raise invalid(
                rd.kind,
                name,
                "metadata.name",
                f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of '
                "lower case alphanumeric characters, '-' or '.'",
            )
        if self.store.get(rd.key, namespace if rd.namespaced else "", name) is not None:
            raise already_exists(rd.plural, name, rd.group)
        for f in (
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "managedFields",
            "selfLink",
        ):
            md.pop(f, None)
        if not (keep_identity and md.get("uid")):
            md["uid"] = str(uuid.uuid4())
        if not (keep_identity and md.get("creationTimestamp")):
            md["creationTimestamp"] = self.now()
        if rd.custom or rd.key in _GENERATION_KEYS:
            md["generation"] = 1
        self._admit_create(rd, obj)
        if dry_run:
            obj["metadata"]["resourceVersion"] = str(self.store.resource_version)
            return self.present(rd, obj)
        stored = self.store.put(rd.key, obj, created=True)
        self._after_create(rd, stored)
        return self.present(rd, stored)

    def _check_kind(self, rd: ResourceDef, obj: Obj) -> None:
        kind, api_version = obj.get("kind"), obj.get("apiVersion")
        if kind and kind != rd.kind:
            raise bad_request(
                f"the API version in the data ({api_version}) does not match the expected "
                f"API version ({rd.api_version}) or kind {kind} is not {rd.kind}"
            )
        if api_version and rd.group and api_version.split("/")[0] != rd.group:
            raise bad_request(
                f"the API version in the data ({api_version}) does not match "
                f"the expected API version ({rd.api_version})"
            )

    def _admit_create(self, rd: ResourceDef, obj: Obj) -> None:
        if rd.key == POD_KEY:
            admission_plugins.validate_pod(obj)
            dra_types.validate_pod_claims(obj)
            admission_plugins.default_pod(obj)
            sa = obj["spec"]["serviceAccountName"]
            ns = obj["metadata"]["namespace"]
            if self.store.get(SA_KEY, ns, sa) is None:
                raise ApiError(
                    403,
                    "Forbidden",
                    f'pods "{obj["metadata"]["name"]}" is forbidden: error looking up service '
                    f'account {ns}/{sa}: serviceaccount "{sa}" not found',
                )
        elif rd.key == ("", "nodes"):
            admission_plugins.default_node(obj, ready=obj["metadata"]["name"] in self._ready_nodes)
        elif rd.key == NS_KEY:
            obj.setdefault("spec", {})["finalizers"] = ["kubernetes"]
            obj["status"] = {"phase": "Active"}
            obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj[
                "metadata"
            ]["name"]
        elif rd.key == ("batch", "jobs"):
            admission_plugins.default_job(obj)
        elif rd.key == ("", "secrets"):
            admission_plugins.default_secret(obj)
        elif rd.key == ("", "services"):
            n = self.store.count(rd.key) + 1
            admission_plugins.default_service(obj, f"10.96.{(n // 250) % 250}.{n % 250 + 1}")
        elif rd.key == ("coordination.k8s.io", "leases"):
            admission_plugins.validate_lease(obj)
        elif rd.key in _WEBHOOK_KEYS:
            validate_configuration(obj, mutating=rd.key == _WEBHOOK_KEYS[0])
        elif rd.key == CRD_KEY:
            self._validate_crd(obj)
            obj.pop("status", None)
        elif rd.group == dra_types.GROUP:
            dra_types.admit_create(rd.key, obj, self.now())
        elif rd.key in workload_types.KEYS:
            workload_types.admit_create(rd.key, obj, self.registry.kube_version)
        elif rd.custom:
            if "status" in rd.subresources:
                obj.pop("status", None)  # a status subresource: status is not set on create
            pruned = prune_object(obj, rd.schema)
            obj.clear()
            obj.update(pruned)

    def _after_create(self, rd: ResourceDef, obj: Obj) -> None:
        if rd.key == NS_KEY:
            name = obj["metadata"]["name"]
            self._spawn(self._create_default_sa(name))
        elif rd.key == CRD_KEY:
            self._establish(obj)

    async def _create_default_sa(self, namespace: str) -> None:
        """kube-controller-manager's serviceaccount controller, shortly after."""
        await asyncio.sleep(self.serviceaccount_delay)
        self.ensure_default_sa(namespace)

    def ensure_default_sa(self, namespace: str) -> None:
        if self.store.get(NS_KEY, "", namespace) is None:
            return
        if self.store.get(SA_KEY, namespace, "default") is None:
            sa_def = self.resolve("", "v1", "serviceaccounts")
            self.create(sa_def, namespace, {"metadata": {"name": "default"}})

    # --- CRDs --------------------------------------------------------------------------

    def _validate_crd(self, crd: Obj) -> None:
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        name = crd["metadata"]["name"]
        if not spec.get("group") or not names.get("plural") or not names.get("kind"):
            raise invalid(
                "CustomResourceDefinition",
                name,
                "spec",
                "group, names.plural and names.kind are required",
                "apiextensions.k8s.io",
            )
        if name != f"{names['plural']}.{spec['group']}":
            raise invalid(
                "CustomResourceDefinition",
                name,
                "metadata.name",
                f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group',
                "apiextensions.k8s.io",
            )
        if not spec.get("versions"):
            raise invalid(
                "CustomResourceDefinition",
                name,
                "spec.versions",
                "Required value",
                "apiextensions.k8s.io",
            )

    def _establish(self, crd: Obj) -> None:
        """Register the CRD's resources and mark it Established (a real server takes ~1 s)."""
        for d in Registry.defs_from_crd(crd):
            self.registry.add(d)
        spec = crd["spec"]
        now = self.now()
        crd = clone(crd)
        crd["status"] = {
            "acceptedNames": spec["names"],
            "storedVersions": [v["name"] for v in spec["versions"] if v.get("storage")],
            "conditions": [
                {
                    "type": "NamesAccepted",
                    "status": "True",
                    "reason": "NoConflicts",
                    "message": "no conflicts found",
                    "lastTransitionTime": now,
                },
                {
                    "type": "Established",
                    "status": "True",
                    "reason": "InitialNamesAccepted",
                    "message": "the initial names have been accepted",
                    "lastTransitionTime": now,
                },
            ],
        }
        self.store.put(CRD_KEY, crd, created=False)

    def install_crd(self, crd: Obj) -> Obj:
        """Create a CRD from a manifest (dict); returns the stored CRD."""
        rd = self.resolve(CRD_KEY[0], "v1", CRD_KEY[1])
        self.create(rd, "", crd)
        return self.get(rd, "", crd["metadata"]["name"])

    def _crd_deleted(self, crd: Obj) -> None:
        spec = crd.get("spec") or {}
        group, plural = spec.get("group", ""), (spec.get("names") or {}).get("plural", "")
        self.store.drop_resource((group, plural))
        self.registry.remove_group_resource(group, plural)

    # --- update / patch ----------------------------------------------------------------

    def update(
        self,
        rd: ResourceDef,
        namespace: str,
        name: str,
        body: Any,
        *,
        subresource: str = "",
        dry_run: bool = False,
    ) -> Obj:
        if not isinstance(body, dict):
            raise bad_request("the body of the request was in an unknown format")
        ns = namespace if rd.namespaced else ""
        old = self.store.get(rd.key, ns, name)
        if old is None:
            raise not_found(rd.plural, name, rd.group)
        md = body.get("metadata") or {}
        if md.get("name") and md["name"] != name:
            raise bad_request("the name of the object does not match the name on the URL")
        self._check_kind(rd, body)
        rv = md.get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise conflict(
                rd.plural,
                name,
                "the object has been modified; please apply your changes to the latest "
                "version and try again",
                rd.group,
            )
        if not rv and rd.custom:
            raise invalid(
                rd.kind,
                name,
                "metadata.resourceVersion",
                "Invalid value: 0x0: must be specified for an update",
                rd.group,
            )
        return self._write(rd, old, clone(body), subresource, dry_run=dry_run)

    def patch(
        self,
        rd: ResourceDef,
        namespace: str,
        name: str,
        content_type: str,
        patch: Any,
        *,
        subresource: str = "",
        dry_run: bool = False,
    ) -> Obj:
        ns = namespace if rd.namespaced else ""
        old = self.store.get(rd.key, ns, name)
        if old is None:
            raise not_found(rd.plural, name, rd.group)
        base = self.present(rd, clone(old))
        ctype = content_type.split(";")[0].strip()
        if ctype == MERGE:
            if not isinstance(patch, dict):
                raise bad_request("merge patch: the body must be a JSON object")
            new = merge_patch(base, patch)
        elif ctype == JSON_PATCH:
            new = json_patch(base, patch)
        elif ctype == STRATEGIC and not rd.custom:
            if not isinstance(patch, dict):
                raise bad_request("strategic merge patch: the body must be a JSON object")
            new = strategic_merge(base, patch)
        else:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types "
                f"include: {JSON_PATCH}, {MERGE}" + ("" if rd.custom else f", {STRATEGIC}"),
            )
        if not isinstance(new, dict):
            raise bad_request("the patched object is not a JSON object")
        rv = (new.get("metadata") or {}).get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise conflict(
                rd.plural,
                name,
                "the object has been modified; please apply your changes to the latest "
                "version and try again",
                rd.group,
            )
        return self._write(rd, old, new, subresource, dry_run=dry_run)

    def _write(
        self, rd: ResourceDef, old: Obj, new: Obj, subresource: str, *, dry_run: bool = False
    ) -> Obj:
        """Common tail of update and patch: status/main split, immutables, no-op, finalize."""
        has_status = "status" in rd.subresources
        if rd.key == POD_KEY and subresource == "resize":
            new = admission_plugins.pod_resize(old, new)
        elif subresource == "status":
            merged = clone(old)
            if "status" in new:
                merged["status"] = new["status"]
            else:
                merged.pop("status", None)
            new = merged
        else:
            if has_status:
                if "status" in old:
                    new["status"] = clone(old["status"])
                else:
                    new.pop("status", None)
            if rd.key == POD_KEY:
                admission_plugins.check_pod_update(old, new)
        nmd = new.setdefault("metadata", {})
        omd = old["metadata"]
        for f in (
            "uid",
            "creationTimestamp",
            "name",
            "namespace",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ):
            if f in omd:
                nmd[f] = omd[f]
            else:
                nmd.pop(f, None)
        if omd.get("deletionTimestamp"):
            added = set(nmd.get("finalizers") or []) - set(omd.get("finalizers") or [])
            if added:
                raise invalid(
                    rd.kind,
                    omd["name"],
                    "metadata.finalizers",
                    "Forbidden: no new finalizers can be added if the object is being deleted",
                    rd.group,
                )
        if rd.key == ("coordination.k8s.io", "leases"):
            admission_plugins.validate_lease(new)
        if rd.group == dra_types.GROUP:
            dra_types.check_update(rd.key, old, new, subresource, self.now())
        if rd.key in workload_types.KEYS:
            workload_types.check_update(rd.key, old, new, subresource, self.registry.kube_version)
        if rd.key == POD_KEY and subresource == "status":
            dra_types.validate_pod_status(new)
        if rd.key in _WEBHOOK_KEYS:
            validate_configuration(new, mutating=rd.key == _WEBHOOK_KEYS[0])
        if rd.custom:
            new = prune_object(new, rd.schema)
        new.pop("apiVersion", None)
        new.pop("kind", None)
        cmp_old = {k: v for k, v in old.items() if k not in ("apiVersion", "kind")}
        if subresource != "status" and "generation" in omd and _body_of(cmp_old) != _body_of(new):
            nmd["generation"] = int(omd["generation"]) + 1  # spec (non-metadata) changed
        if _strip_rv(cmp_old) == _strip_rv(new):
            return self.present(rd, old)  # no-op: the resourceVersion stays
        if dry_run:
            return self.present(rd, new)
        stored = self.store.put(rd.key, new, created=False)
        stored = self._maybe_finalize(rd, stored)
        if rd.key == CRD_KEY:
            for d in Registry.defs_from_crd(stored):
                self.registry.add(d)
        return self.present(rd, stored)

    def _maybe_finalize(self, rd: ResourceDef, obj: Obj) -> Obj:
        """Remove an object whose deletion waited only on finalizers (or a pod on its grace)."""
        md = obj["metadata"]
        if not md.get("deletionTimestamp") or md.get("finalizers") or rd.key == NS_KEY:
            return obj  # a namespace waits for its spec.finalizers (the namespace controller)
        if rd.key == POD_KEY and md.get("deletionGracePeriodSeconds", 0) > 0:
            return obj  # the kubelet (or a delete with gracePeriodSeconds=0) finishes it
        gone = self.store.remove(rd.key, md.get("namespace", ""), md["name"])
        if rd.key == CRD_KEY and gone is not None:
            self._crd_deleted(gone)
        return gone if gone is not None else obj

    # --- delete ------------------------------------------------------------------------

    def delete(
        self,
        rd: ResourceDef,
        namespace: str,
        name: str,
        options: dict[str, Any] | None = None,
        *,
        dry_run: bool = False,
    ) -> Obj:
        opts = options or {}
        ns = namespace if rd.namespaced else ""
        obj = self.store.get(rd.key, ns, name)
        if obj is None:
            raise not_found(rd.plural, name, rd.group)
        md = obj["metadata"]
        pre = opts.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != md["uid"]:
            raise conflict(
                rd.plural,
                name,
                f"Precondition failed: UID in precondition: "
                f"{pre['uid']}, UID in object meta: {md['uid']}",
                rd.group,
            )
        if pre.get("resourceVersion") and pre["resourceVersion"] != md["resourceVersion"]:
            raise conflict(
                rd.plural,
                name,
                "Precondition failed: ResourceVersion in "
                f"precondition: {pre['resourceVersion']}, ResourceVersion in object "
                f"meta: {md['resourceVersion']}",
                rd.group,
            )
        if dry_run:
            return self.present(rd, obj)
        gc = gc_finalizer(rd, opts)
        if gc and rd.key != NS_KEY and gc not in (md.get("finalizers") or []):
            md["finalizers"] = [*(md.get("finalizers") or []), gc]
        if rd.key == POD_KEY:
            return self._delete_pod(rd, obj, opts)
        if rd.key == NS_KEY:
            return self._delete_namespace(rd, obj)
        if md.get("finalizers"):
            if not md.get("deletionTimestamp"):
                md["deletionTimestamp"] = self.now()
                md["deletionGracePeriodSeconds"] = 0
                obj = self.store.put(rd.key, obj, created=False)
            return self.present(rd, obj)
        gone = self.store.remove(rd.key, ns, name)
        assert gone is not None
        if rd.key == CRD_KEY:
            self._crd_deleted(gone)
        if rd.return_deleted:
            return self.present(rd, gone)
        return success_status(
            {"name": name, "group": rd.group, "kind": rd.plural, "uid": md["uid"]}
        )

    def _delete_pod(self, rd: ResourceDef, pod: Obj, opts: dict[str, Any]) -> Obj:
        md = pod["metadata"]
        grace = opts.get("gracePeriodSeconds")
        if grace is None:
            grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
        grace = max(int(grace), 0)
        phase = (pod.get("status") or {}).get("phase")
        if not (pod.get("spec") or {}).get("nodeName") or phase in ("Succeeded", "Failed"):
            grace = 0
        current = md.get("deletionGracePeriodSeconds")
        if md.get("deletionTimestamp") and current is not None and grace >= current:
            return self.present(rd, pod)  # already terminating with a shorter or equal grace
        md["deletionTimestamp"] = fmt_time(self.clock.now() + timedelta(seconds=grace))
        md["deletionGracePeriodSeconds"] = grace
        pod = self.store.put(rd.key, pod, created=False)
        return self.present(rd, self._maybe_finalize(rd, pod))

    def _delete_namespace(self, rd: ResourceDef, ns_obj: Obj) -> Obj:
        md = ns_obj["metadata"]
        if not md.get("deletionTimestamp"):
            md["deletionTimestamp"] = self.now()
            md["deletionGracePeriodSeconds"] = 0
            ns_obj.setdefault("status", {})["phase"] = "Terminating"
            ns_obj = self.store.put(rd.key, ns_obj, created=False)  # the controller goes on
        return self.present(rd, ns_obj)

    # --- binding -----------------------------------------------------------------------

    def bind(self, namespace: str, name: str, binding: Any) -> Obj:
        if not isinstance(binding, dict):
            raise bad_request("the body of the request was in an unknown format")
        rd = self.resolve("", "v1", "pods")
        pod = self.store.get(POD_KEY, namespace, name)
        if pod is None:
            raise not_found("pods", name)
        md = pod["metadata"]
        bmd = binding.get("metadata") or {}
        target = binding.get("target") or {}
        if not target.get("name"):
            raise invalid("Binding", name, "target.name", "Required value")
        if bmd.get("uid") and bmd["uid"] != md["uid"]:
            raise conflict(
                "pods/binding",
                name,
                f"Precondition failed: UID in precondition: "
                f"{bmd['uid']}, UID in object meta: {md['uid']}",
            )
        if md.get("deletionTimestamp"):
            raise conflict(
                "pods/binding", name, f"pod {name} is being deleted, cannot be assigned to a host"
            )
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            raise conflict("pods/binding", name, f'pod {name} is already assigned to node "{node}"')
        pod["spec"]["nodeName"] = target["name"]
        if bmd.get("annotations"):
            md.setdefault("annotations", {}).update(bmd["annotations"])
        conds = [
            c
            for c in pod.setdefault("status", {}).get("conditions") or []
            if c.get("type") != "PodScheduled"
        ]
        conds.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": self.now(),
            }
        )
        pod["status"]["conditions"] = conds
        self.store.put(rd.key, pod, created=False)
        return success_status(code=201)

    # --- nodes -------------------------------------------------------------------------

    def set_node_ready(self, name: str, ready: bool = True) -> Obj:
        """Model kubelet heartbeats + the node-lifecycle controller. ``ready``: Ready=True, no
        not-ready/unreachable taints. Not ready (heartbeats stopped): Ready=Unknown and the
        ``node.kubernetes.io/unreachable`` NoSchedule + NoExecute taints. Creates the node
        if it does not exist."""
        rd = self.resolve("", "v1", "nodes")
        if ready:
            self._ready_nodes.add(name)
        else:
            self._ready_nodes.discard(name)
        node = self.store.get(rd.key, "", name)
        if node is None:
            node = self.create(
                rd, "", {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}}
            )
        now = self.now()
        admission_plugins.node_heartbeat(node, ready=ready, now=now)
        status = node.setdefault("status", {})
        conds = [c for c in status.get("conditions") or [] if c.get("type") != "Ready"]
        conds.append(
            {
                "type": "Ready",
                "status": "True" if ready else "Unknown",
                "reason": "KubeletReady" if ready else "NodeStatusUnknown",
                "message": "kubelet is posting ready status"
                if ready
                else "Kubelet stopped posting node status.",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }
        )
        status["conditions"] = conds
        status.setdefault("capacity", {"cpu": "8", "memory": "32Gi", "pods": "110"})
        status.setdefault("allocatable", {"cpu": "8", "memory": "32Gi", "pods": "110"})
        status.setdefault(
            "nodeInfo",
            {
                "architecture": "amd64",
                "bootID": "",
                "containerRuntimeVersion": "sandbox://1.0",
                "kernelVersion": "6.1.0",
                "kubeProxyVersion": "",
                "kubeletVersion": "v1.36.2",
                "machineID": "",
                "operatingSystem": "linux",
                "osImage": "sandbox",
                "systemUUID": "",
            },
        )
        status.setdefault(
            "addresses",
            [
                {"type": "Hostname", "address": name},
                {"type": "InternalIP", "address": "192.168.0.1"},
            ],
        )
        node.pop("apiVersion", None)
        node.pop("kind", None)
        stored = self.store.put(rd.key, node, created=False)
        return self.present(rd, stored)
