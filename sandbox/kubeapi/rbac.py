"""Authorization as kube-apiserver does it with ``--authorization-mode=RBAC``.

- Request attributes come from the path, method and query the way kube's RequestInfoFactory
  derives them (:func:`request_attributes`): ``list``/``watch`` for a GET without a name (a
  ``metadata.name=`` field selector names the object), ``deletecollection``, subresources,
  ``/api/v1/namespaces/<ns>`` being in namespace ``<ns>``, non-resource paths (``/version``,
  ``/apis/<group>/<version>``) with the lowercased HTTP method as their verb.
- ``system:masters`` is always allowed (kube's privileged-group authorizer, before RBAC).
- RBAC (:class:`Authorizer`): every ClusterRoleBinding, then the RoleBindings of the
  request's namespace, whose subjects match (User, Group, ServiceAccount with the binding's
  namespace as default) and whose role's rules allow the request: verbs, apiGroups,
  resources (``*``, ``pods/status``, ``*/status``), resourceNames, nonResourceURLs (``*``
  and trailing ``*`` prefixes). A binding to a missing role is reported in the reason
  (``RBAC: clusterrole.rbac.authorization.k8s.io "x" not found``), like kube.
- A denial is a 403 ``Forbidden`` Status with kube's message and details (:func:`forbidden`).
- The bootstrap policy the components and kubectl need (:func:`bootstrap_policy`):
  ``cluster-admin`` (bound to ``system:masters``), ``system:discovery``,
  ``system:basic-user`` and ``system:public-info-viewer``.
- The reviews (:func:`review`): SelfSubjectAccessReview, SubjectAccessReview,
  LocalSubjectAccessReview, SelfSubjectRulesReview (``kubectl auth can-i [--list]``) and
  SelfSubjectReview (``kubectl auth whoami``).
- Kubernetes 1.36's DRAResourceClaimGranularStatusAuthorization (:func:`check_claim_status`):
  changing a ResourceClaim's ``status.allocation`` or ``status.reservedFor`` needs the
  request's verb on ``resourceclaims/binding`` (cluster scope); changing ``status.devices``
  needs ``arbitrary-node:<verb>`` on ``resourceclaims/driver`` named by the driver. Refused:
  422 Invalid with a ``Forbidden`` cause.

Not modelled: escalation prevention on writes of roles and bindings (the ``escalate`` and
``bind`` verbs), ClusterRole aggregation (no aggregation controller: ``aggregationRule`` is
stored but never fills ``rules``), the Node authorizer (the sandbox's kubelet writes
in-process) and the bootstrap roles beyond the four above.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from sandbox.kubeapi.errors import ApiError, bad_request, invalid_fields
from sandbox.kubeapi.identity import UserInfo
from sandbox.kubeapi.store import Obj, Store

RBAC_GROUP = "rbac.authorization.k8s.io"
AUTHZ_GROUP = "authorization.k8s.io"
AUTHN_GROUP = "authentication.k8s.io"
MASTERS = "system:masters"
SA_PREFIX = "system:serviceaccount:"
_ROLE_KEY = (RBAC_GROUP, "roles")
_CLUSTER_ROLE_KEY = (RBAC_GROUP, "clusterroles")
_BINDING_KEY = (RBAC_GROUP, "rolebindings")
_CLUSTER_BINDING_KEY = (RBAC_GROUP, "clusterrolebindings")
_METHOD_VERBS = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update"}
_METHOD_VERBS |= {"PATCH": "patch", "DELETE": "delete"}
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
# the create-only review resources answered here, (group, plural) -> kind
REVIEWS = {
    (AUTHZ_GROUP, "selfsubjectaccessreviews"): "SelfSubjectAccessReview",
    (AUTHZ_GROUP, "subjectaccessreviews"): "SubjectAccessReview",
    (AUTHZ_GROUP, "localsubjectaccessreviews"): "LocalSubjectAccessReview",
    (AUTHZ_GROUP, "selfsubjectrulesreviews"): "SelfSubjectRulesReview",
    (AUTHN_GROUP, "selfsubjectreviews"): "SelfSubjectReview",
}


@dataclass(frozen=True)
class Attributes:
    """What a request asks to do (kube's ``authorizer.Attributes``)."""

    user: UserInfo
    verb: str
    resource_request: bool = True
    namespace: str = ""
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    path: str = ""

    @property
    def combined_resource(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""


def _name_from_field_selector(selector: str | None) -> str:
    """The object a list or watch names with ``metadata.name=<n>`` (or ``==``)."""
    for term in (selector or "").split(","):
        for op in ("==", "="):
            key, sep, value = term.partition(op)
            if sep and key.strip() == "metadata.name" and "!" not in key:
                value = value.strip()
                return value if value and "/" not in value and value not in (".", "..") else ""
    return ""


def request_attributes(
    user: UserInfo, method: str, path: str, query: Mapping[str, str]
) -> Attributes:
    """The attributes kube's RequestInfoFactory derives from a request."""
    parts = [p for p in path.split("/") if p]
    grouped = parts[:1] == ["apis"]
    if not (parts[:1] == ["api"] or grouped) or len(parts) < (4 if grouped else 3):
        return Attributes(user, method.lower(), False, path=path)
    group = parts[1] if grouped else ""
    rest = parts[2:] if grouped else parts[1:]
    version, rest = rest[0], rest[1:]
    verb = _METHOD_VERBS.get(method, method.lower())
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if not name and verb == "get":
        watching = (query.get("watch") or "").lower() in ("true", "1")
        verb = "watch" if watching else "list"
        name = _name_from_field_selector(query.get("fieldSelector"))
    if not name and verb == "delete":
        verb = "deletecollection"
    return Attributes(user, verb, True, namespace, group, version, resource, sub, name, path)


# --- rules ----------------------------------------------------------------------------


def rule_allows(a: Attributes, rule: Mapping[str, Any]) -> bool:
    """kube's ``RuleAllows``."""
    verbs = rule.get("verbs") or []
    if "*" not in verbs and a.verb not in verbs:
        return False
    if not a.resource_request:
        return any(
            u == "*" or u == a.path or (u.endswith("*") and a.path.startswith(u[:-1]))
            for u in rule.get("nonResourceURLs") or []
        )
    groups = rule.get("apiGroups") or []
    if "*" not in groups and a.api_group not in groups:
        return False
    if not _resource_matches(rule.get("resources") or [], a.combined_resource, a.subresource):
        return False
    names = rule.get("resourceNames") or []
    return not names or a.name in names


def _resource_matches(resources: list[str], combined: str, sub: str) -> bool:
    for r in resources:
        if r in ("*", combined):
            return True
        if sub and r == f"*/{sub}":
            return True
    return False


def _applies(user: UserInfo, subject: Mapping[str, Any], namespace: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return user.username == name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        sa_ns = subject.get("namespace") or namespace
        return bool(sa_ns) and user.username == f"{SA_PREFIX}{sa_ns}:{name}"
    return False


def _describe_subject(subject: Mapping[str, Any], binding_ns: str) -> str:
    if subject.get("kind") == "ServiceAccount":
        ns = subject.get("namespace") or binding_ns
        return f'ServiceAccount "{subject.get("name")}/{ns}"'
    return f'{subject.get("kind")} "{subject.get("name")}"'


# a visited rule: where it comes from ("ClusterRoleBinding ..."), the rule, or an error
Visit = tuple[str, Mapping[str, Any] | None, str]


class Authorizer:
    """``system:masters``, then RBAC over the Role/ClusterRole/(Cluster)RoleBinding objects
    in the store."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def _role_rules(self, ref: Mapping[str, Any], namespace: str) -> tuple[list[Any], str]:
        kind, name = ref.get("kind"), str(ref.get("name") or "")
        if kind == "ClusterRole":
            role = self._store.peek(_CLUSTER_ROLE_KEY, "", name)
            missing = f'clusterrole.{RBAC_GROUP} "{name}" not found'
        elif kind == "Role" and namespace:
            role = self._store.peek(_ROLE_KEY, namespace, name)
            missing = f'role.{RBAC_GROUP} "{name}" not found'
        else:
            return [], f"unsupported role reference kind: {kind!r}"
        if role is None:
            return [], missing
        return list(role.get("rules") or []), ""

    def visit(self, user: UserInfo, namespace: str) -> Iterator[Visit]:
        """The rules that apply to ``user`` in ``namespace`` (kube's ``VisitRulesFor``)."""
        for b in self._store.list(_CLUSTER_BINDING_KEY):
            yield from self._binding_rules(user, b, "")
        if namespace:
            for b in self._store.list(_BINDING_KEY, namespace):
                yield from self._binding_rules(user, b, namespace)

    def _binding_rules(self, user: UserInfo, b: Obj, namespace: str) -> Iterator[Visit]:
        for subject in b.get("subjects") or []:
            if not _applies(user, subject, namespace):
                continue
            ref = b.get("roleRef") or {}
            rules, err = self._role_rules(ref, namespace)
            if err:
                yield "", None, err
                return
            bname = b["metadata"]["name"]
            what = (
                f'RoleBinding "{bname}/{namespace}"'
                if namespace
                else f'ClusterRoleBinding "{bname}"'
            )
            source = (
                f'{what} of {ref.get("kind")} "{ref.get("name")}" to '
                f"{_describe_subject(subject, namespace)}"
            )
            for rule in rules:
                yield source, rule, ""
            return

    def authorize(self, a: Attributes) -> Decision:
        if MASTERS in a.user.groups:
            return Decision(True)
        errors: list[str] = []
        for source, rule, err in self.visit(a.user, a.namespace):
            if rule is not None and rule_allows(a, rule):
                return Decision(True, f"RBAC: allowed by {source}")
            if err:
                errors.append(err)
        if not errors:
            return Decision(False)
        listed = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
        return Decision(False, f"RBAC: {listed}")

    def require(self, a: Attributes) -> None:
        """Raise :func:`forbidden` unless ``a`` is allowed."""
        decision = self.authorize(a)
        if not decision.allowed:
            raise forbidden(a, decision.reason)


def forbidden_message(a: Attributes) -> str:
    """kube's ``forbiddenMessage``."""
    who = f'User "{a.user.username}"'
    if not a.resource_request:
        return f'{who} cannot {a.verb} path "{a.path}"'
    what = f'{who} cannot {a.verb} resource "{a.combined_resource}" in API group "{a.api_group}"'
    if a.namespace:
        return f'{what} in the namespace "{a.namespace}"'
    return f"{what} at the cluster scope"


def forbidden(a: Attributes, reason: str = "") -> ApiError:
    """The 403 Status kube-apiserver answers (``NewForbidden`` of the request's
    group/resource and name)."""
    msg = forbidden_message(a)
    if reason:
        msg = f"{msg}: {reason}"
    if not a.resource_request:
        return ApiError(403, "Forbidden", f"forbidden: {msg}", details={})
    gr = f"{a.resource}.{a.api_group}" if a.api_group else a.resource
    details: dict[str, Any] = {}
    if a.name:
        details["name"] = a.name
    if a.api_group:
        details["group"] = a.api_group
    details["kind"] = a.resource
    head = f'{gr} "{a.name}"' if a.name else gr
    return ApiError(403, "Forbidden", f"{head} is forbidden: {msg}", details=details)


# --- the bootstrap policy ---------------------------------------------------------------

_BOOTSTRAP_META = {
    "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
    "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
}
_PUBLIC_INFO = ["/healthz", "/livez", "/readyz", "/version", "/version/"]


def _cluster_role(name: str, rules: list[Obj]) -> Obj:
    return {"metadata": {"name": name, **_BOOTSTRAP_META}, "rules": rules}


def _cluster_binding(name: str, groups: list[str]) -> Obj:
    return {
        "metadata": {"name": name, **_BOOTSTRAP_META},
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": g} for g in groups],
    }


def bootstrap_policy() -> tuple[list[Obj], list[Obj]]:
    """The ClusterRoles and ClusterRoleBindings kube-apiserver creates at start that the
    bridge, its chart and kubectl rely on."""
    roles = [
        _cluster_role(
            "cluster-admin",
            [
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ],
        ),
        _cluster_role(
            "system:discovery",
            [
                {
                    "nonResourceURLs": [
                        "/api",
                        "/api/*",
                        "/apis",
                        "/apis/*",
                        "/healthz",
                        "/livez",
                        "/openapi",
                        "/openapi/*",
                        "/readyz",
                        "/version",
                        "/version/",
                    ],
                    "verbs": ["get"],
                }
            ],
        ),
        _cluster_role(
            "system:basic-user",
            [
                {
                    "apiGroups": [AUTHZ_GROUP],
                    "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    "verbs": ["create"],
                },
                {
                    "apiGroups": [AUTHN_GROUP],
                    "resources": ["selfsubjectreviews"],
                    "verbs": ["create"],
                },
            ],
        ),
        _cluster_role(
            "system:public-info-viewer", [{"nonResourceURLs": _PUBLIC_INFO, "verbs": ["get"]}]
        ),
    ]
    bindings = [
        _cluster_binding("cluster-admin", [MASTERS]),
        _cluster_binding("system:discovery", ["system:authenticated"]),
        _cluster_binding("system:basic-user", ["system:authenticated"]),
        _cluster_binding(
            "system:public-info-viewer", ["system:authenticated", "system:unauthenticated"]
        ),
    ]
    return roles, bindings


# --- reviews ---------------------------------------------------------------------------


def _spec_attributes(user: UserInfo, spec: Mapping[str, Any]) -> Attributes:
    res = spec.get("resourceAttributes")
    non = spec.get("nonResourceAttributes")
    if isinstance(res, dict):
        return Attributes(
            user,
            str(res.get("verb") or ""),
            True,
            str(res.get("namespace") or ""),
            str(res.get("group") or ""),
            str(res.get("version") or ""),
            str(res.get("resource") or ""),
            str(res.get("subresource") or ""),
            str(res.get("name") or ""),
        )
    if isinstance(non, dict):
        return Attributes(user, str(non.get("verb") or ""), False, path=str(non.get("path") or ""))
    raise ApiError(
        422,
        "Invalid",
        'spec.resourceAttributes: Invalid value: "null": exactly one of '
        "nonResourceAttributes or resourceAttributes must be specified",
    )


def _rules_review(authz: Authorizer, user: UserInfo, namespace: str) -> Obj:
    resource_rules: list[Obj] = []
    non_resource: list[Obj] = []
    errors: list[str] = []
    for _, rule, err in authz.visit(user, namespace):
        if err:
            errors.append(err)
        if rule is None:
            continue
        if rule.get("nonResourceURLs"):
            non_resource.append(
                {"verbs": list(rule["verbs"]), "nonResourceURLs": list(rule["nonResourceURLs"])}
            )
        else:
            out = {k: list(rule[k]) for k in ("verbs", "apiGroups", "resources") if k in rule}
            if rule.get("resourceNames"):
                out["resourceNames"] = list(rule["resourceNames"])
            resource_rules.append(out)
    status: Obj = {
        "resourceRules": resource_rules,
        "nonResourceRules": non_resource,
        "incomplete": bool(errors),
    }
    if errors:
        status["evaluationError"] = ", ".join(errors)
    return status


def review(authz: Authorizer, kind: str, user: UserInfo, namespace: str, body: Any) -> Obj:
    """The answer to a create of one of :data:`REVIEWS` (never stored)."""
    if not isinstance(body, dict):
        raise bad_request(f"the body of a {kind} must be an object")
    spec = body.get("spec") or {}
    if not isinstance(spec, dict):
        raise bad_request(f"{kind}: spec must be an object")
    out: Obj = {
        "kind": kind,
        "apiVersion": f"{AUTHN_GROUP if kind == 'SelfSubjectReview' else AUTHZ_GROUP}/v1",
        "metadata": {"creationTimestamp": None},
    }
    if kind == "SelfSubjectReview":
        out["status"] = {"userInfo": user.as_dict()}
        return out
    if kind == "SelfSubjectRulesReview":
        out["spec"] = spec
        out["status"] = _rules_review(authz, user, str(spec.get("namespace") or ""))
        return out
    subject = user
    if kind in ("SubjectAccessReview", "LocalSubjectAccessReview"):
        name = spec.get("user") or ""
        groups = spec.get("groups") or []
        if not name and not groups:
            raise invalid_fields(
                kind, AUTHZ_GROUP, "",
                [("spec.user", "FieldValueInvalid",
                  'Invalid value: "": at least one of user or group must be specified')],
            )  # fmt: skip
        subject = UserInfo(str(name), tuple(str(g) for g in groups), str(spec.get("uid") or ""))
    attrs = _spec_attributes(subject, spec)
    if kind == "LocalSubjectAccessReview":
        if attrs.namespace != namespace:
            raise invalid_fields(
                kind, AUTHZ_GROUP, "",
                [("spec.resourceAttributes.namespace", "FieldValueInvalid",
                  f'Invalid value: "{attrs.namespace}": must match metadata.namespace')],
            )  # fmt: skip
        out["metadata"]["namespace"] = namespace
    decision = authz.authorize(attrs)
    out["spec"] = spec
    out["status"] = {"allowed": decision.allowed}
    if decision.reason:
        out["status"]["reason"] = decision.reason
    return out


# --- DRA: synthetic subresources of ResourceClaim status --------------------------------

CLAIM_KEY = ("resource.k8s.io", "resourceclaims")


def _devices_by_driver(status: Mapping[str, Any]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for d in status.get("devices") or []:
        if isinstance(d, dict):
            out.setdefault(str(d.get("driver") or ""), []).append(d)
    return out


def check_claim_status(authz: Authorizer, user: UserInfo, verb: str, old: Obj, new: Obj) -> None:
    """DRAResourceClaimGranularStatusAuthorization: 422 Invalid (Forbidden causes) when
    ``user`` changes the allocation, reservations or device status of a claim without the
    synthetic permissions."""
    before: Mapping[str, Any] = old.get("status") or {}
    after: Mapping[str, Any] = new.get("status") or {}
    causes: list[tuple[str, str, str]] = []
    binding_changed = [f for f in ("allocation", "reservedFor") if before.get(f) != after.get(f)]
    if binding_changed:
        a = Attributes(user, verb, True, "", "resource.k8s.io", "v1", "resourceclaims", "binding")
        decision = authz.authorize(a)
        if not decision.allowed:
            causes.append(
                (
                    f"status.{binding_changed[0]}",
                    "FieldValueForbidden",
                    "Forbidden: changing status.allocation or status.reservedFor requires "
                    f'resource="resourceclaims/binding", verb="{verb}" permission: '
                    f"{forbidden(a, decision.reason).message}",
                )
            )
    old_devices, new_devices = _devices_by_driver(before), _devices_by_driver(after)
    for driver in sorted(set(old_devices) | set(new_devices)):
        if old_devices.get(driver) == new_devices.get(driver):
            continue
        a = Attributes(
            user, f"arbitrary-node:{verb}", True, "", "resource.k8s.io", "v1",
            "resourceclaims", "driver", driver,
        )  # fmt: skip
        decision = authz.authorize(a)
        if not decision.allowed:
            causes.append(
                (
                    "status.devices",
                    "FieldValueForbidden",
                    f'Forbidden: changing status.devices of driver "{driver}" requires '
                    f'resource="resourceclaims/driver", verb="arbitrary-node:{verb}" '
                    f"permission: {forbidden(a, decision.reason).message}",
                )
            )
    if causes:
        raise invalid_fields("ResourceClaim", "resource.k8s.io", new["metadata"]["name"], causes)
