"""A built-in PodGroup (``scheduling.k8s.io``, :mod:`bridge.workloads.builtin`): the pods
whose ``spec.schedulingGroup.podGroupName`` names it; its size is its gang policy's
``minCount``. When its Workload makes one gang of several PodGroups, its pods are that
Workload's instead (:mod:`bridge.workloads.workload`, asked first)."""

from __future__ import annotations

from collections.abc import Sequence

from bridge import kobj
from bridge.workloads.base import Claim, GroupRef, Kind, Obj, ObjectRef
from bridge.workloads.builtin import PODGROUPS, class_priority, min_count, podgroup_name


class BuiltinPodGroup(Kind):
    name = "WorkloadPodGroup"
    api = PODGROUPS
    name_field = "spec.schedulingGroup.podGroupName"
    source_field = name_field
    size_field = "spec.schedulingPolicy.gang.minCount"
    parent_gang = True  # its Workload may make one gang of several PodGroups
    reread = True

    def claim(self, c: Claim) -> GroupRef | None:
        name = podgroup_name(c.pod)
        return self.group(c, name) if name else None

    def size(
        self, ref: GroupRef, obj: Obj | None, pods: Sequence[Obj], related: Sequence[Obj]
    ) -> int | None:
        return None if obj is None else min_count(kobj.get(obj, "spec"))

    def priority(self, obj: Obj) -> int | None:
        return class_priority(obj)

    def scheduled(self, ref: GroupRef, pods: Sequence[Obj]) -> tuple[ObjectRef, ...]:
        return () if ref.source is None else (ref.source,)


KIND = BuiltinPodGroup()
