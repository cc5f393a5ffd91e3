"""A built-in PodGroup (``scheduling.k8s.io``, :mod:`bridge.workloads.builtin`): the pods
whose ``spec.schedulingGroup.podGroupName`` names it; its size is its gang policy's
``minCount``. When its Workload makes one gang of several PodGroups (or its parent
CompositePodGroup is a gang), its pods are that Workload's (composite's) instead
(:mod:`bridge.workloads.workload`, :mod:`bridge.workloads.composite`, asked first); while
the parent it names is not there, it waits for it (a part of a gang never starts
alone)."""

from __future__ import annotations

from collections.abc import Sequence

from bridge import kobj
from bridge.workloads.base import Api, Claim, GroupRef, Kind, Obj, ObjectRef, Related, missing
from bridge.workloads.builtin import (
    COMPOSITES,
    PARENT_FIELD,
    PODGROUPS,
    WORKLOADS,
    class_priority,
    min_count,
    parent_composite,
    podgroup_name,
    workload_field,
    workload_ref,
)


class BuiltinPodGroup(Kind):
    name = "WorkloadPodGroup"
    api = PODGROUPS
    name_field = "spec.schedulingGroup.podGroupName"
    source_field = name_field
    size_field = "spec.schedulingPolicy.gang.minCount"
    # the parent it names (its pods move to the parent's gang once it comes)
    related: tuple[Api, ...] = (WORKLOADS, COMPOSITES)

    def claim(self, c: Claim) -> GroupRef | None:
        name = podgroup_name(c.pod)
        return self.group(c, name) if name else None

    def size(
        self, ref: GroupRef, obj: Obj | None, pods: Sequence[Obj], related: Related
    ) -> int | None:
        return None if obj is None else min_count(kobj.get(obj, "spec"))

    def awaits(self, ref: GroupRef, obj: Obj, related: Related) -> str:
        """Its parent CompositePodGroup, else its Workload, when it names one that is not
        there."""
        where = f"PodGroup {ref.namespace}/{kobj.name(obj)}"
        if composite := parent_composite(obj):
            if related.get(COMPOSITES, ref.namespace, composite) is not None:
                return ""
            return missing(COMPOSITES, ref.namespace, composite, PARENT_FIELD, where)
        workload = workload_ref(obj)[0]
        if not workload or related.get(WORKLOADS, ref.namespace, workload) is not None:
            return ""
        return missing(WORKLOADS, ref.namespace, workload, workload_field(obj), where)

    def priority(self, obj: Obj) -> int | None:
        return class_priority(obj)

    def scheduled(self, ref: GroupRef, pods: Sequence[Obj]) -> tuple[ObjectRef, ...]:
        return () if ref.source is None else (ref.source,)


KIND = BuiltinPodGroup()
