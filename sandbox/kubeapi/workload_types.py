"""The built-in Workload API (``scheduling.k8s.io/v1alpha2``, feature gate
``GenericWorkload``) as kube-apiserver 1.36 serves it: the validation of Workload and
PodGroup the bridge and its tests touch (docs/sandbox-kube-api.md).

- Workload: ``spec.podGroupTemplates`` required, at most 8, names unique DNS labels,
  each with exactly one scheduling policy (``basic`` or ``gang``, ``gang.minCount`` at
  least 1); ``spec.podGroupTemplates`` and ``spec.controllerRef`` immutable. A Workload
  has no status (no ``/status`` subresource): a ``status`` in a body is dropped.
- PodGroup: exactly one scheduling policy; ``spec.podGroupTemplateRef.workload`` (when
  set) names ``workloadName`` and ``podGroupTemplateName``; the whole spec immutable
  (each of its fields is, in 1.36); ``status`` only through ``/status`` (dropped on
  create). The server does not check that the named Workload or template exists.

Kubernetes types: staging/src/k8s.io/api/scheduling/v1alpha2/types.go.

**Kubernetes 1.37** (``--kube-version 1.37``: ``v1beta1`` and ``v1alpha3``, one stored
object per resource; from KEP-6012 "CompositePodGroup API" and KEP-4671/5832 in
kubernetes/enhancements, as no 1.37 API server or types are stored here):

- Workload: exactly one of ``spec.podGroupTemplates`` and
  ``spec.compositePodGroupTemplates`` (a tree: a composite template holds
  ``compositePodGroupTemplates`` and ``podGroupTemplates``); at most 8 templates in each
  list, template names unique DNS labels across the whole tree, the tree at most 4 levels
  deep (its PodGroup templates counted); each PodGroup template with one policy as in
  1.36, each composite one with ``basic`` or ``gang.minGroupCount`` (at least 1);
  ``disruptionMode`` exactly one of ``single``/``all``, and an ``all`` composite holds
  only ``all`` children. Both lists and ``controllerRef`` immutable.
- PodGroup: ``spec.workloadRef.{workloadName,templateName}`` (``podGroupTemplateRef`` is
  gone: dropped, as a real server drops an unknown field); ``parentCompositePodGroupName``
  (a DNS subdomain) only with a ``workloadRef``; ``schedulingConstraints.topology`` at
  most one entry; the spec immutable.
- CompositePodGroup: ``spec.workloadRef`` required; ``schedulingPolicy`` ``basic`` or
  ``gang.minGroupCount`` (at least 1, immutable as the whole spec is);
  ``parentCompositePodGroupName``, ``schedulingConstraints.topology`` (at most one),
  ``disruptionMode`` (one of ``single``/``all``, default ``single``),
  ``priorityClassName``, ``priority`` (at most 1000000000); status through ``/status``.
  That the runtime tree is at most 4 deep, acyclic and of one Workload is the
  scheduler's check (KEP-6012), not the server's.
"""

from __future__ import annotations

from typing import Any

from sandbox.kubeapi.errors import ApiError, check_dns_label, check_max_items, invalid
from sandbox.kubeapi.store import Obj

GROUP = "scheduling.k8s.io"
WORKLOAD_KEY = (GROUP, "workloads")
PODGROUP_KEY = (GROUP, "podgroups")
COMPOSITE_KEY = (GROUP, "compositepodgroups")
KEYS = (WORKLOAD_KEY, PODGROUP_KEY, COMPOSITE_KEY)
TEMPLATES_MAX = 8  # WorkloadMaxPodGroupTemplates
TREE_DEPTH_MAX = 4  # KEP-6012: a Workload's template tree, PodGroup templates counted
TOPOLOGY_MAX = 1  # schedulingConstraints.topology
PRIORITY_MAX = 1_000_000_000  # HighestUserDefinablePriority


def _bad(kind: str, obj: Obj, field: str, reason: str) -> ApiError:
    return invalid(kind, str(obj["metadata"].get("name", "")), field, reason, GROUP)


def _name(kind: str, obj: Obj, field: str, value: Any) -> None:
    check_dns_label(kind, obj, field, value, GROUP)


def _policy(kind: str, obj: Obj, path: str, policy: Any) -> None:
    """Exactly one of ``basic`` and ``gang``; a gang's ``minCount`` at least 1."""
    if not isinstance(policy, dict):
        raise _bad(kind, obj, path, "Required value")
    chosen = [k for k in ("basic", "gang") if policy.get(k) is not None]
    if len(chosen) != 1:
        reason = 'Invalid value: "": must specify exactly one of: `basic`, `gang`'
        raise _bad(kind, obj, path, reason)
    gang = policy.get("gang")
    if gang is not None:
        n = gang.get("minCount") if isinstance(gang, dict) else None
        if n is None:
            raise _bad(kind, obj, f"{path}.gang.minCount", "Required value")
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise _bad(
                kind,
                obj,
                f"{path}.gang.minCount",
                f"Invalid value: {n}: must be greater than or equal to 1",
            )


def _template_name(obj: Obj, where: str, t: Any, seen: set[str]) -> None:
    """A Workload's template at ``where`` is an object named by a DNS label not in
    ``seen`` (which gains it)."""
    if not isinstance(t, dict):
        raise _bad("Workload", obj, where, "Invalid value: must be an object")
    _name("Workload", obj, f"{where}.name", t.get("name"))
    if t["name"] in seen:
        raise _bad("Workload", obj, where, f'Duplicate value: {{"name":"{t["name"]}"}}')
    seen.add(t["name"])


def _validate_workload(obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise _bad("Workload", obj, "spec", "Required value")
    templates = spec.get("podGroupTemplates")
    if not templates:
        raise _bad("Workload", obj, "spec.podGroupTemplates", "Required value")
    if not isinstance(templates, list):
        raise _bad("Workload", obj, "spec.podGroupTemplates", "Invalid value: must be a list")
    check_max_items("Workload", obj, "spec.podGroupTemplates", templates, TEMPLATES_MAX, GROUP)
    seen: set[str] = set()
    for i, t in enumerate(templates):
        where = f"spec.podGroupTemplates[{i}]"
        _template_name(obj, where, t, seen)
        _policy("Workload", obj, f"{where}.schedulingPolicy", t.get("schedulingPolicy"))


def _validate_podgroup(obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise _bad("PodGroup", obj, "spec", "Required value")
    _policy("PodGroup", obj, "spec.schedulingPolicy", spec.get("schedulingPolicy"))
    ref = spec.get("podGroupTemplateRef")
    if ref is None:
        return
    workload = ref.get("workload") if isinstance(ref, dict) else None
    if not isinstance(workload, dict):
        raise _bad(
            "PodGroup",
            obj,
            "spec.podGroupTemplateRef",
            'Invalid value: "": must specify exactly one of: `workload`',
        )
    for f in ("workloadName", "podGroupTemplateName"):
        _name("PodGroup", obj, f"spec.podGroupTemplateRef.workload.{f}", workload.get(f))


_WORKLOAD_IMMUTABLE = ("podGroupTemplates", "compositePodGroupTemplates", "controllerRef")


def _validator(key: tuple[str, str], kube_version: str) -> tuple[str, Any]:
    if kube_version == "1.36":
        return (
            ("Workload", _validate_workload)
            if key == WORKLOAD_KEY
            else (
                "PodGroup",
                _validate_podgroup,
            )
        )
    return {
        WORKLOAD_KEY: ("Workload", _validate_workload_137),
        PODGROUP_KEY: ("PodGroup", _validate_podgroup_137),
        COMPOSITE_KEY: ("CompositePodGroup", _validate_composite),
    }[key]


def admit_create(key: tuple[str, str], obj: Obj, kube_version: str = "1.36") -> None:
    """Validation of a new Workload, PodGroup or CompositePodGroup as ``kube_version``
    does it; status is not set on create."""
    obj.pop("status", None)
    if kube_version != "1.36" and key == PODGROUP_KEY and isinstance(obj.get("spec"), dict):
        obj["spec"].pop("podGroupTemplateRef", None)  # not a 1.37 field
    _validator(key, kube_version)[1](obj)


def check_update(
    key: tuple[str, str], old: Obj, new: Obj, subresource: str, kube_version: str = "1.36"
) -> None:
    """The immutable fields; a Workload has no status to keep."""
    if subresource == "status":
        return
    kind, validate = _validator(key, kube_version)
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if key == WORKLOAD_KEY:
        new.pop("status", None)
        validate(new)
        for f in _WORKLOAD_IMMUTABLE:
            if old_spec.get(f) != new_spec.get(f):
                raise _bad(kind, new, f"spec.{f}", "Invalid value: field is immutable")
        return
    validate(new)
    for f in sorted(old_spec.keys() | new_spec.keys()):
        if old_spec.get(f) != new_spec.get(f):
            raise _bad(kind, new, f"spec.{f}", "Invalid value: field is immutable")


# --------------------------------------------------------------------------- 1.37
def _subdomain(kind: str, obj: Obj, field: str, value: Any, *, required: bool = True) -> None:
    if value is not None or required:
        check_dns_label(kind, obj, field, value, GROUP, subdomain=True)


def _one_of(kind: str, obj: Obj, path: str, value: Any, members: tuple[str, ...]) -> str:
    """Exactly one of ``members`` set in the union at ``path``; which one."""
    if not isinstance(value, dict):
        raise _bad(kind, obj, path, "Required value")
    chosen = [k for k in members if value.get(k) is not None]
    if len(chosen) != 1:
        listed = ", ".join(f"`{m}`" for m in members)
        raise _bad(kind, obj, path, f'Invalid value: "": must specify exactly one of: {listed}')
    return chosen[0]


def _group_policy(kind: str, obj: Obj, path: str, policy: Any) -> None:
    """A composite's policy: ``basic``, or ``gang`` with ``minGroupCount`` at least 1."""
    if _one_of(kind, obj, path, policy, ("basic", "gang")) != "gang":
        return
    gang = policy["gang"]
    n = gang.get("minGroupCount") if isinstance(gang, dict) else None
    where = f"{path}.gang.minGroupCount"
    if n is None:
        raise _bad(kind, obj, where, "Required value")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise _bad(kind, obj, where, f"Invalid value: {n}: must be greater than or equal to 1")


def _workload_ref(kind: str, obj: Obj, path: str, ref: Any) -> None:
    if not isinstance(ref, dict):
        raise _bad(kind, obj, path, "Required value")
    _subdomain(kind, obj, f"{path}.workloadName", ref.get("workloadName"))
    _name(kind, obj, f"{path}.templateName", ref.get("templateName"))


def _common_137(kind: str, obj: Obj, spec: Obj) -> None:
    """What PodGroup and CompositePodGroup share: the parent, the topology constraint,
    the priority."""
    _subdomain(
        kind,
        obj,
        "spec.parentCompositePodGroupName",
        spec.get("parentCompositePodGroupName"),
        required=False,
    )
    topology = (spec.get("schedulingConstraints") or {}).get("topology")
    if topology is not None:
        if not isinstance(topology, list):
            raise _bad(kind, obj, "spec.schedulingConstraints.topology", "Invalid value")
        check_max_items(
            kind, obj, "spec.schedulingConstraints.topology", topology, TOPOLOGY_MAX, GROUP
        )
        for i, t in enumerate(topology):
            if not isinstance(t, dict) or not t.get("key"):
                where = f"spec.schedulingConstraints.topology[{i}].key"
                raise _bad(kind, obj, where, "Required value")
    if spec.get("priorityClassName") is not None:
        _subdomain(kind, obj, "spec.priorityClassName", spec["priorityClassName"])
    priority = spec.get("priority")
    if priority is not None and (not isinstance(priority, int) or priority > PRIORITY_MAX):
        reason = f"Invalid value: {priority}: must be less than or equal to {PRIORITY_MAX}"
        raise _bad(kind, obj, "spec.priority", reason)


def _validate_podgroup_137(obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise _bad("PodGroup", obj, "spec", "Required value")
    _policy("PodGroup", obj, "spec.schedulingPolicy", spec.get("schedulingPolicy"))
    if spec.get("workloadRef") is not None:
        _workload_ref("PodGroup", obj, "spec.workloadRef", spec["workloadRef"])
    elif spec.get("parentCompositePodGroupName") is not None:
        # dependentRequired: a PodGroup in a hierarchy names its Workload
        raise _bad("PodGroup", obj, "spec.workloadRef", "Required value")
    _common_137("PodGroup", obj, spec)
    _pod_group_mode("PodGroup", obj, "spec.disruptionMode", spec.get("disruptionMode"))


def _pod_group_mode(kind: str, obj: Obj, path: str, mode: Any) -> bool | None:
    """A PodGroup's (template's) disruption mode, in 1.36's words (``Pod``/``PodGroup``)
    or KEP-6012's union (``single``/``all``): whether its pods go together (None: unset)."""
    if mode is None:
        return None
    if isinstance(mode, dict):
        return _one_of(kind, obj, path, mode, ("single", "all")) == "all"
    if mode not in ("Pod", "PodGroup"):
        reason = f'Unsupported value: "{mode}": supported values: "Pod", "PodGroup"'
        raise _bad(kind, obj, path, reason)
    return bool(mode == "PodGroup")


def _validate_composite(obj: Obj) -> None:
    kind = "CompositePodGroup"
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise _bad(kind, obj, "spec", "Required value")
    _workload_ref(kind, obj, "spec.workloadRef", spec.get("workloadRef"))
    _group_policy(kind, obj, "spec.schedulingPolicy", spec.get("schedulingPolicy"))
    _common_137(kind, obj, spec)
    mode = spec.setdefault("disruptionMode", {"single": {}})
    _one_of(kind, obj, "spec.disruptionMode", mode, ("single", "all"))


def _templates(
    obj: Obj, path: str, spec: Obj, names: set[str], depth: int, parent_all: bool
) -> None:
    """The template lists at ``path`` (a Workload's spec or a composite template),
    ``depth`` the level their templates are at."""
    kind = "Workload"
    for field, composite in (("compositePodGroupTemplates", True), ("podGroupTemplates", False)):
        templates = spec.get(field)
        if templates is None:
            continue
        where = f"{path}{field}"
        if not isinstance(templates, list):
            raise _bad(kind, obj, where, "Invalid value: must be a list")
        check_max_items(kind, obj, where, templates, TEMPLATES_MAX, GROUP)
        if templates and depth > TREE_DEPTH_MAX:
            reason = (
                f"Invalid value: the template tree must be at most {TREE_DEPTH_MAX} levels deep"
            )
            raise _bad(kind, obj, where, reason)
        for i, t in enumerate(templates):
            at = f"{where}[{i}]"
            _template_name(obj, at, t, names)
            if composite:
                _group_policy(kind, obj, f"{at}.schedulingPolicy", t.get("schedulingPolicy"))
                mode = t.get("disruptionMode") or {"single": {}}
                chosen = _one_of(kind, obj, f"{at}.disruptionMode", mode, ("single", "all"))
                if parent_all and chosen != "all":
                    reason = "Invalid value: a child of an `all` composite must be `all` too"
                    raise _bad(kind, obj, f"{at}.disruptionMode", reason)
                _templates(obj, f"{at}.", t, names, depth + 1, chosen == "all")
            else:
                _policy(kind, obj, f"{at}.schedulingPolicy", t.get("schedulingPolicy"))
                mode_at = f"{at}.disruptionMode"
                together = _pod_group_mode(kind, obj, mode_at, t.get("disruptionMode"))
                if parent_all and together is False:
                    reason = "Invalid value: a child of an `all` composite must be `all` too"
                    raise _bad(kind, obj, mode_at, reason)


def _validate_workload_137(obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise _bad("Workload", obj, "spec", "Required value")
    _one_of(
        "Workload",
        obj,
        "spec",
        {k: spec.get(k) or None for k in ("podGroupTemplates", "compositePodGroupTemplates")},
        ("podGroupTemplates", "compositePodGroupTemplates"),
    )
    _templates(obj, "spec.", spec, set(), 1, False)
