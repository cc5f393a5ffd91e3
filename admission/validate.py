"""The validating webhook, as a pure function: ``validate(request, ctx) -> AdmissionResponse``.

Pods (CREATE, UPDATE) that are managed, and workload objects (PodGroup, JobSet,
LeaderWorkerSet, batch Job) in managed namespaces:

* every ``slurmjob.slinky.slurm.net/*`` annotation must parse (the shared parser of
  :mod:`bridge.translate.annotations`, so admission and the scheduler agree exactly), and
  a Kueue ``podset-required/preferred-topology`` level must be in ``topology.levels``
  (when the config maps any); on
  UPDATE only when one of them changed, so an old object never blocks unrelated updates
  (a finalizer removal, say);
* only the bridge (``admission.bridgeUsernames``) writes the pod label
  ``scheduler.slinky.slurm.net/slurm-jobid`` and the annotation ``slinky.slurm.net/slurm-node``,
  on CREATE and UPDATE alike;
* once a pod is bound (``spec.nodeName`` set), its slurmjob annotations are immutable;
* a new pod may not ask for an ``nvidia.com/mig-*`` slice whose profile has no Slurm GRES
  in ``scheduler.gresMapping`` (the rule translation applies:
  :func:`bridge.translate.resources.unknown_device_problems`);
* the ``gres`` annotation, which replaces the GRES of the pod's Slurm job, never names
  less than the pod's resources need, and is refused beside ``spec.resourceClaims`` or a
  DeviceClass's extended resource (whose counts are not known here; the scheduler applies
  the full rule, :func:`bridge.translate.resources.gres_floor_problem`);
* a new pod may not carry ``spec.topologySpreadConstraints`` (Slurm cannot honour them),
  and a bound pod may not be resized in place (``pods/resize``: its Slurm job's allocation
  is fixed);
* an ownerReference's ``name`` and ``uid`` (they reach Slurm as the job name, comment and
  admin_comment) follow the text rules of :mod:`bridge.text`, as annotation text does;
* the namespace's Slurm identity policy (``namespacePolicies``, the same pure function the
  scheduler enforces before every submit: :mod:`bridge.translate.policy`): pod-chosen
  ``user-id``, ``group-id`` and ``priority`` are denied unless allowed, and ``account``,
  ``partition``, ``qos``, ``reservation`` must be among the allowed values. Each denial
  names the key, the value and the rule.

Every error is reported in ONE denial; each names its field and the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard

from admission.policy import AdmissionContext, mapping_at, pod_managed, scheduler_name_of
from admission.review import AdmissionRequest, AdmissionResponse, allow, deny, object_name
from bridge import wellknown
from bridge.errors import InvalidInput
from bridge.text import text_problem
from bridge.translate import kobj
from bridge.translate.annotations import KUEUE_TOPOLOGY_KEYS, parse_annotations_all
from bridge.translate.dra import EXTENDED_PREFIX
from bridge.translate.grouping import group_of
from bridge.translate.job import exclusive_node_bounds
from bridge.translate.policy import policy_errors
from bridge.translate.resources import (
    gres_floor_problem,
    pod_resources,
    unknown_device_problems,
)
from bridge.workloads import POD, REGISTRY, object_apis

# (API group, kind) of the workload objects whose slurmjob annotations are checked: the
# workload kinds' objects and the related objects they read (bridge.workloads).
GROUP_KINDS = frozenset((api.group, api.kind) for api in object_apis())

# Where each workload kind keeps its pod templates' specs (for a schedulerName that is ours).
_TEMPLATE_SPEC_PATHS: Mapping[str, tuple[str, ...]] = {
    k.api.kind: k.template_paths for k in REGISTRY if k.template_paths
}

_BRIDGE_ONLY = (
    ("metadata.labels", wellknown.LABEL_JOB_ID),
    ("metadata.annotations", wellknown.ANNOTATION_SLURM_NODE),
    ("metadata.annotations", wellknown.ANNOTATION_SPEC_HASH),
)


def _is_slurmjob_key(key: str) -> bool:
    return (
        key.startswith(wellknown.SLURMJOB_PREFIX)
        or key == wellknown.LEGACY_ANNOTATION_JOB_NAME
        or key in KUEUE_TOPOLOGY_KEYS
    )


def _slurmjob_subset(annotations: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in annotations.items() if _is_slurmjob_key(k)}


def _annotation_problems(
    new: Mapping[str, Any],
    old: Mapping[str, Any] | None,
    obj: str,
    ctx: AdmissionContext,
    ns: str,
    *,
    lone: bool = False,
) -> list[InvalidInput]:
    """Parse errors of the slurmjob annotations, then what the namespace's policy denies;
    on UPDATE only if any of them changed. ``lone``: the object is a pod that is a group
    of one (:func:`_lone_pod`), so the node bounds an exclusive job of it would have are
    checked too."""
    mine = _slurmjob_subset(new)
    if not mine or (old is not None and mine == _slurmjob_subset(old)):
        return []
    opts, errors = parse_annotations_all(mine, obj=obj, levels=ctx.config.topology.levels)
    errors += policy_errors(opts, ctx.namespace_policy(ns), obj=obj, partition=ctx.config.partition)
    bounds = {wellknown.slurmjob_annotation(k) for k in ("min-nodes", "max-nodes")}
    if lone and opts.exclusive is not False and not any(e.field in bounds for e in errors):
        try:
            exclusive_node_bounds(opts, size=1, count=1, where=obj)
        except InvalidInput as e:
            errors.append(e)
    return [
        InvalidInput(f"metadata.annotations[{e.field}]", e.reason, e.obj)
        if _is_slurmjob_key(e.field)
        else e
        for e in errors
    ]


def _gres_problems(
    pod: Mapping[str, Any],
    new_ann: Mapping[str, Any],
    old_ann: Mapping[str, Any] | None,
    ctx: AdmissionContext,
) -> list[InvalidInput]:
    """The ``gres`` annotation replaces the GRES of the pod's Slurm job, so it never
    names less than the pod's resources need (the rule translation applies:
    :func:`bridge.translate.resources.gres_floor_problem`). Here a claim's count is not
    known (no I/O): beside ``spec.resourceClaims`` or a DeviceClass's extended resource
    the annotation is refused. On UPDATE only when it changed."""
    key = wellknown.slurmjob_annotation("gres")
    raw = new_ann.get(key)
    if not isinstance(raw, str) or not raw or (old_ann is not None and old_ann.get(key) == raw):
        return []
    field = f"metadata.annotations[{key}]"
    dra = ["spec.resourceClaims"] if mapping_at(pod, "spec", []).get("resourceClaims") else []
    for kind in ("initContainers", "containers"):
        for i, c in enumerate(kobj.sequence(pod, "spec", kind)):
            for which in ("requests", "limits"):
                dra += [
                    f"spec.{kind}[{i}].resources.{which}[{r}]"
                    for r in kobj.mapping(c, "resources", which)
                    if r.startswith(EXTENDED_PREFIX)
                ]
    if dra:
        reason = (
            f"{raw!r} would replace the GRES {dra[0]} asks Slurm for (the devices of a claim "
            "are asked of Slurm from the claim itself, and the claim's count is not known at "
            "admission); remove the annotation"
        )
        return [InvalidInput(field, reason)]
    try:
        need = pod_resources(pod, ctx.config.scheduler.gres_table()).gres
    except InvalidInput:
        return []  # a resource the other checks refuse
    problem = gres_floor_problem(raw, need)
    return [] if problem is None else [InvalidInput(field, problem)]


def _lone_pod(pod: Mapping[str, Any]) -> bool:
    """A pod that is a group of one whatever else exists: no PodGroup, Workload,
    LeaderWorkerSet or JobSet names it, and no Job owns it (a Job's pods are one gang when
    its parallelism is over 1, which the pod alone does not say)."""
    return group_of(pod, {}).source is None


def _bridge_key_problems(
    new_obj: Mapping[str, Any], old_obj: Mapping[str, Any] | None, errors: list[InvalidInput]
) -> list[InvalidInput]:
    out: list[InvalidInput] = []
    for path, key in _BRIDGE_ONLY:
        new = mapping_at(new_obj, path, errors).get(key)
        old = mapping_at(old_obj, path, errors).get(key) if old_obj is not None else None
        if new != old:
            verb = "set" if old_obj is None else "add, change or remove"
            reason = f"is written by slurm-bridge only; users may not {verb} it"
            out.append(InvalidInput(f"{path}[{key}]", reason))
    return out


def _owner_problems(
    new_obj: Mapping[str, Any], old_obj: Mapping[str, Any] | None
) -> list[InvalidInput]:
    """An ownerReference's name and uid reach Slurm (a Job's name becomes the job name and
    comment, its uid the admin_comment), and Kubernetes checks only that they are not
    empty: the text rules of :mod:`bridge.text`, as the scheduler applies them. On UPDATE
    only when the references changed."""
    refs = mapping_at(new_obj, "metadata", []).get("ownerReferences")
    if old_obj is not None and refs == mapping_at(old_obj, "metadata", []).get("ownerReferences"):
        return []
    out: list[InvalidInput] = []
    for i, ref in enumerate(refs if isinstance(refs, list) else ()):
        if not isinstance(ref, Mapping):
            continue
        for key in ("name", "uid"):
            value = ref.get(key)
            problem = text_problem(value) if isinstance(value, str) else None
            if problem is not None:
                out.append(InvalidInput(f"metadata.ownerReferences[{i}].{key}", problem))
    return out


def _bound_immutability(
    new_ann: Mapping[str, Any], old_ann: Mapping[str, Any], node: str
) -> list[InvalidInput]:
    new, old = _slurmjob_subset(new_ann), _slurmjob_subset(old_ann)
    return [
        InvalidInput(
            f"metadata.annotations[{key}]",
            f"is immutable once the pod is bound (spec.nodeName={node})",
        )
        for key in sorted(set(new) | set(old))
        if new.get(key) != old.get(key)
    ]


# What a resize may change of a bound pod without changing what the pod holds: how a
# container is resized (restart or not), never how much. Every other difference is refused.
_RESIZE_NEUTRAL = frozenset({"resizePolicy"})


def _named(value: Any) -> TypeGuard[list[Mapping[str, Any]]]:
    """A list of named objects (containers, init containers ...), matched by name."""
    return isinstance(value, list) and all(
        isinstance(c, Mapping) and isinstance(c.get("name"), str) for c in value
    )


def _resize_changes(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[str]:
    """Every field of ``spec`` a resize changes, but ``resizePolicy``: a container's (any
    list of named containers: containers, init and sidecar containers, ephemeral ones)
    ``spec.<list>[i].<field>``, else ``spec.<field>`` (pod-level ``resources``, a field
    added by a later Kubernetes). Fail closed: whatever a future resize can change is
    refused until the bridge knows how to carry it to Slurm."""
    new_spec, old_spec = mapping_at(new, "spec", []), mapping_at(old, "spec", [])
    out: list[str] = []
    for key in sorted(set(new_spec) | set(old_spec)):
        n, o = new_spec.get(key), old_spec.get(key)
        if n == o:
            continue
        if not (_named(n) and _named(o) and len(n) == len(o)):
            out.append(f"spec.{key}")
            continue
        olds = {c["name"]: c for c in o}
        for i, c in enumerate(n):
            prev = olds.get(c["name"], {})
            out += [
                f"spec.{key}[{i}].{f}"
                for f in sorted(set(c) | set(prev))
                if f not in _RESIZE_NEUTRAL and c.get(f) != prev.get(f)
            ]
    return out


def _validate_pod_resize(req: AdmissionRequest, ctx: AdmissionContext) -> AdmissionResponse:
    """``pods/resize``: a bound managed pod's resources are its Slurm job's allocation,
    fixed while the job runs (Slurm cannot grow a running job's CPUs or memory), so an
    in-place resize that changes what the pod holds (any container's, init or sidecar
    container's, or the pod-level ``spec.resources``: :func:`_resize_changes`) is refused,
    naming each field. An unbound pod may be resized: its group is translated again and a
    pending job is updated (docs/admission.md)."""
    pod, old = req.object, req.old_object
    name = object_name(req)
    if pod is None or old is None:
        return deny(req.uid, name, [InvalidInput("request.oldObject", "missing on a resize")])
    errors: list[InvalidInput] = []
    sched = scheduler_name_of(mapping_at(old, "spec", errors), "spec.schedulerName", errors)
    node = mapping_at(old, "spec", errors).get("nodeName")
    if errors:
        return deny(req.uid, name, errors)
    if not node or not pod_managed(sched, req.namespace, ctx):
        return allow(req.uid)
    reason = (
        f"a pod bound by slurm-bridge (spec.nodeName={node}) cannot be resized in place: its "
        "Slurm job holds a fixed allocation; delete the pod and create it with the new "
        "resources"
    )
    resized = _resize_changes(pod, old)
    return (
        deny(req.uid, name, [InvalidInput(f, reason) for f in resized])
        if resized
        else allow(req.uid)
    )


def _validate_pod(req: AdmissionRequest, ctx: AdmissionContext) -> AdmissionResponse:
    pod, old = req.object, req.old_object
    name = object_name(req)
    if pod is None:
        return deny(req.uid, name, [InvalidInput("request.object", "missing")])
    if req.operation == "UPDATE" and old is None:
        return deny(req.uid, name, [InvalidInput("request.oldObject", "missing on UPDATE")])
    errors: list[InvalidInput] = []
    spec = mapping_at(pod, "spec", errors)
    sched = scheduler_name_of(spec, "spec.schedulerName", errors)
    annotations = mapping_at(pod, "metadata.annotations", errors)
    mapping_at(pod, "metadata.labels", errors)
    if errors:
        return deny(req.uid, name, errors)
    if not pod_managed(sched, req.namespace, ctx):
        return allow(req.uid)

    old_ann: dict[str, Any] | None = None
    if old is not None:
        old_ann = mapping_at(old, "metadata.annotations", errors)
    errors += _annotation_problems(
        annotations, old_ann, name, ctx, req.namespace, lone=_lone_pod(pod)
    )
    errors += _gres_problems(pod, annotations, old_ann, ctx)
    errors += _owner_problems(pod, old)
    if old is None and spec.get("topologySpreadConstraints"):
        errors.append(
            InvalidInput(
                "spec.topologySpreadConstraints",
                "not supported by slurm-bridge: Slurm places a job's nodes and has no spread "
                "constraint over topology domains; remove it (docs/admission.md)",
            )
        )
    if old is None:
        errors += unknown_device_problems(pod, ctx.config.scheduler.gres_table())
    if not ctx.is_bridge_user(req.user_info.username):
        errors += _bridge_key_problems(pod, old, errors)
    if old is not None and old_ann is not None:
        node = mapping_at(old, "spec", errors).get("nodeName")
        if node:
            errors += _bound_immutability(annotations, old_ann, str(node))
    return deny(req.uid, name, errors) if errors else allow(req.uid)


def _group_managed(req: AdmissionRequest, obj: Mapping[str, Any], ctx: AdmissionContext) -> bool:
    if ctx.namespace_managed(req.namespace):
        return True
    ignored: list[InvalidInput] = []
    for path in _TEMPLATE_SPEC_PATHS.get(req.kind.kind, ()):
        spec = mapping_at(obj, path, ignored)
        if scheduler_name_of(spec, path, ignored) == ctx.scheduler_name:
            return True
    return False


def _validate_group(req: AdmissionRequest, ctx: AdmissionContext) -> AdmissionResponse:
    obj, old = req.object, req.old_object
    name = object_name(req)
    if obj is None:
        return deny(req.uid, name, [InvalidInput("request.object", "missing")])
    errors: list[InvalidInput] = []
    annotations = mapping_at(obj, "metadata.annotations", errors)
    if errors:
        return deny(req.uid, name, errors)
    if not _slurmjob_subset(annotations) or not _group_managed(req, obj, ctx):
        return allow(req.uid)
    old_ann = mapping_at(old, "metadata.annotations", []) if old is not None else None
    errors += _annotation_problems(annotations, old_ann, name, ctx, req.namespace)
    return deny(req.uid, name, errors) if errors else allow(req.uid)


def validate(req: AdmissionRequest, ctx: AdmissionContext) -> AdmissionResponse:
    """The validating verdict for one request. Never performs I/O."""
    if req.operation not in ("CREATE", "UPDATE"):
        return allow(req.uid)
    if POD.api.matches(req.kind.group, req.kind.kind):
        if req.sub_resource == "resize":
            return _validate_pod_resize(req, ctx)
        return _validate_pod(req, ctx)
    if (req.kind.group, req.kind.kind) in GROUP_KINDS:
        return _validate_group(req, ctx)
    return allow(req.uid)
