"""The built-in scheduling API of Kubernetes (``scheduling.k8s.io``), which the kinds
:mod:`~bridge.workloads.podgroup` and :mod:`~bridge.workloads.workload` share: a pod
names its PodGroup, a PodGroup the Workload (and template) it was made from.

1.36 serves Workload and PodGroup as ``v1alpha2`` (a PodGroup names its Workload in
``spec.podGroupTemplateRef.workload``); 1.37 as ``v1beta1`` (``spec.workloadRef``), and
CompositePodGroup (KEP-6012) as ``v1alpha3``: a PodGroup may name its parent composite in
``spec.parentCompositePodGroupName`` (:mod:`~bridge.workloads.composite`). The version in
use is found by discovery, the newest served first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bridge import kobj
from bridge.workloads.base import Api, ObjectRef

SCHEDULING_GROUP = "scheduling.k8s.io"
VERSIONS = ("v1beta1", "v1alpha2")  # newest first
PODGROUPS = Api(SCHEDULING_GROUP, VERSIONS, "podgroups", "PodGroup", True, True)
WORKLOADS = Api(SCHEDULING_GROUP, VERSIONS, "workloads", "Workload", True, True)
COMPOSITES = Api(
    SCHEDULING_GROUP, ("v1alpha3",), "compositepodgroups", "CompositePodGroup", True, True
)


# The condition a scheduler sets on a PodGroup (and CompositePodGroup) it placed, by the
# version served: 1.36's v1alpha2 ``PodGroupScheduled``, ``PodGroupInitiallyScheduled``
# from 1.37 (KEP-6012).
SCHEDULED_CONDITION = "PodGroupInitiallyScheduled"
SCHEDULED_CONDITION_BY_VERSION = {"v1alpha2": "PodGroupScheduled"}


# The reason of the ``DisruptionTarget`` condition kube-scheduler sets on a PodGroup whose
# gang it preempts (1.37, KEP-5710's workload-aware preemption): the bridge sets it where
# Slurm preempts the gang's job (controller/jobs.py).
PREEMPTED_REASON = "PreemptionByScheduler"


def scheduled_condition(version: str) -> str:
    """The name of the "scheduled" condition at the served ``version``."""
    return SCHEDULED_CONDITION_BY_VERSION.get(version, SCHEDULED_CONDITION)


def podgroup_name(pod: Mapping[str, Any]) -> str:
    """The built-in PodGroup a pod names (``spec.schedulingGroup.podGroupName``), or ""."""
    return kobj.text(pod, "spec", "schedulingGroup", "podGroupName")


def workload_ref(podgroup: Mapping[str, Any] | None) -> tuple[str, str]:
    """The (Workload, podGroupTemplate) a built-in PodGroup was made from, ("", "") when
    none: ``spec.podGroupTemplateRef.workload`` in 1.36's v1alpha2 (``workloadName``,
    ``podGroupTemplateName``), ``spec.workloadRef`` (``workloadName``, ``templateName``)
    in the later versions."""
    if podgroup is None:
        return "", ""
    spec = kobj.get(podgroup, "spec")
    if name := kobj.text(spec, "podGroupTemplateRef", "workload", "workloadName"):
        return name, kobj.text(spec, "podGroupTemplateRef", "workload", "podGroupTemplateName")
    return kobj.text(spec, "workloadRef", "workloadName"), kobj.text(
        spec, "workloadRef", "templateName"
    )


# The fields of a built-in PodGroup that name its Workload (1.36's v1alpha2, then 1.37's)
# and its parent CompositePodGroup
WORKLOAD_FIELDS = (
    "spec.podGroupTemplateRef.workload.workloadName",
    "spec.workloadRef.workloadName",
)
PARENT_FIELD = "spec.parentCompositePodGroupName"


def workload_field(podgroup: Mapping[str, Any]) -> str:
    """The field of ``podgroup`` that names its Workload (by the version's shape)."""
    old = kobj.text(podgroup, "spec", "podGroupTemplateRef", "workload", "workloadName")
    return WORKLOAD_FIELDS[0] if old else WORKLOAD_FIELDS[1]


def workload_templates(workload: Mapping[str, Any] | None) -> list[str]:
    """The names of a built-in Workload's ``spec.podGroupTemplates``, in spec order."""
    return [kobj.text(t, "name") for t in kobj.sequence(workload, "spec", "podGroupTemplates")]


def gang_workload(podgroup: Mapping[str, Any] | None, workload: Mapping[str, Any] | None) -> str:
    """The Workload whose PodGroups make ONE gang with ``podgroup``'s pods, or "": a
    Workload of several ``podGroupTemplates`` that names the template ``podgroup`` was
    made from. A Workload of one template keeps each of its PodGroups a gang of its own
    (the PodGroups of one template are replicas, placed independently)."""
    name, template = workload_ref(podgroup)
    if not name or workload is None or kobj.name(workload) != name:
        return ""
    if kobj.namespace(workload) != kobj.namespace(podgroup or {}):
        return ""
    templates = workload_templates(workload)
    return name if len(templates) > 1 and template in templates else ""


def parent_composite(podgroup: Mapping[str, Any] | None) -> str:
    """The CompositePodGroup a built-in PodGroup (or composite) names as its parent
    (``spec.parentCompositePodGroupName``), or ""."""
    return kobj.text(podgroup, "spec", "parentCompositePodGroupName")


def min_group_count(composite: Mapping[str, Any] | None) -> int | None:
    """A gang CompositePodGroup's ``schedulingPolicy.gang.minGroupCount`` (None: a
    ``basic`` composite, whose children are placed independently)."""
    n = kobj.integer(composite, "spec", "schedulingPolicy", "gang", "minGroupCount")
    return n if n is not None and n > 0 else None


def gang_composite(podgroup: Mapping[str, Any] | None, composite: Mapping[str, Any] | None) -> str:
    """The gang CompositePodGroup whose child PodGroups make ONE gang with ``podgroup``'s
    pods, or "": the composite ``podgroup`` names as its parent, in its namespace, with a
    gang policy."""
    name = parent_composite(podgroup)
    if not name or composite is None or kobj.name(composite) != name:
        return ""
    if kobj.namespace(composite) != kobj.namespace(podgroup or {}):
        return ""
    return name if min_group_count(composite) is not None else ""


def podgroups_of(namespace: str, pods: Sequence[Mapping[str, Any]]) -> tuple[ObjectRef, ...]:
    """The built-in PodGroups ``pods`` name, by name."""
    names = sorted({podgroup_name(p) for p in pods} - {""})
    return tuple(
        ObjectRef(
            api_version=PODGROUPS.api_version, kind=PODGROUPS.kind, namespace=namespace, name=n
        )
        for n in names
    )


def class_priority(obj: Mapping[str, Any]) -> int | None:
    """A 1.37 PodGroup's or CompositePodGroup's ``spec.priority`` (the value of its
    ``priorityClassName``, which the API server resolves as for a pod), when it names a
    class."""
    if not kobj.text(obj, "spec", "priorityClassName"):
        return None
    return kobj.integer(obj, "spec", "priority")


def min_count(podgroup_spec: Any) -> int:
    """A built-in PodGroup's gang size: ``schedulingPolicy.gang.minCount`` (1 for a
    ``basic`` policy)."""
    for path in (("schedulingPolicy", "gang", "minCount"), ("policy", "gang", "minCount")):
        n = kobj.integer(podgroup_spec, *path)
        if n is not None and n > 0:
            return n
    return 1


def workload_podgroups(
    workload: Mapping[str, Any] | None, pod_groups: Sequence[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """The PodGroups of ``pod_groups`` that are ``workload``'s gang (:func:`gang_workload`),
    in the order of their templates in the Workload, then by name."""
    templates = workload_templates(workload)
    mine = [pg for pg in pod_groups if gang_workload(pg, workload)]
    return sorted(mine, key=lambda pg: (templates.index(workload_ref(pg)[1]), kobj.name(pg)))
