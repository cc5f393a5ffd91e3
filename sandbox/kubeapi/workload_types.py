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
"""

from __future__ import annotations

from typing import Any

from sandbox.kubeapi.errors import ApiError, check_dns_label, check_max_items, invalid
from sandbox.kubeapi.store import Obj

GROUP = "scheduling.k8s.io"
WORKLOAD_KEY = (GROUP, "workloads")
PODGROUP_KEY = (GROUP, "podgroups")
KEYS = (WORKLOAD_KEY, PODGROUP_KEY)
TEMPLATES_MAX = 8  # WorkloadMaxPodGroupTemplates


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
        if not isinstance(t, dict):
            raise _bad("Workload", obj, where, "Invalid value: must be an object")
        _name("Workload", obj, f"{where}.name", t.get("name"))
        if t["name"] in seen:
            raise _bad("Workload", obj, where, f'Duplicate value: {{"name":"{t["name"]}"}}')
        seen.add(t["name"])
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


def admit_create(key: tuple[str, str], obj: Obj) -> None:
    """Validation of a new Workload or PodGroup; status is not set on create."""
    obj.pop("status", None)
    if key == WORKLOAD_KEY:
        _validate_workload(obj)
    else:
        _validate_podgroup(obj)


def check_update(key: tuple[str, str], old: Obj, new: Obj, subresource: str) -> None:
    """The immutable fields; a Workload has no status to keep."""
    if subresource == "status":
        return
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if key == WORKLOAD_KEY:
        new.pop("status", None)
        _validate_workload(new)
        for f in ("podGroupTemplates", "controllerRef"):
            if old_spec.get(f) != new_spec.get(f):
                raise _bad("Workload", new, f"spec.{f}", "Invalid value: field is immutable")
        return
    _validate_podgroup(new)
    for f in sorted(old_spec.keys() | new_spec.keys()):
        if old_spec.get(f) != new_spec.get(f):
            raise _bad("PodGroup", new, f"spec.{f}", "Invalid value: field is immutable")
