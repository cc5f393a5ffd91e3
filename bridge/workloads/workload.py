"""A built-in Workload of several ``podGroupTemplates`` (:mod:`bridge.workloads.builtin`):
the PodGroups made from its templates are ONE gang, a hetjob component each when their
shapes differ (docs/hetjob.md). It claims the pods of a PodGroup that names it (a
PodGroup naming a parent CompositePodGroup is that composite's:
:mod:`~bridge.workloads.composite`), when the Workload makes one gang of its PodGroups
(:func:`~bridge.workloads.builtin.gang_workload`); its related objects are the PodGroups
of its namespace and the Workload a PodGroup names."""

from __future__ import annotations

from collections.abc import Sequence

from bridge import kobj
from bridge.workloads.base import Api, Claim, GroupRef, Kind, Obj, ObjectRef, Related
from bridge.workloads.builtin import (
    PODGROUPS,
    WORKLOADS,
    gang_workload,
    min_count,
    parent_composite,
    podgroup_name,
    podgroups_of,
    workload_podgroups,
    workload_ref,
    workload_templates,
)


class Workload(Kind):
    name = "Workload"
    api = WORKLOADS
    name_field = "spec.podGroupTemplateRef.workload.workloadName"
    source_field = "spec.schedulingGroup.podGroupName"
    size_field = "spec.podGroupTemplates"
    related: tuple[Api, ...] = (PODGROUPS, WORKLOADS)

    def claim(self, c: Claim) -> GroupRef | None:
        name = podgroup_name(c.pod)
        podgroup = c.related.get(PODGROUPS, c.namespace, name) if name else None
        workload = workload_ref(podgroup)[0]
        if not workload or parent_composite(podgroup):
            return None
        gang = gang_workload(podgroup, c.related.get(WORKLOADS, c.namespace, workload))
        return self.group(c, gang) if gang else None

    def size(
        self, ref: GroupRef, obj: Obj | None, pods: Sequence[Obj], related: Related
    ) -> int | None:
        """Every PodGroup's minCount, and at least one pod for each template no PodGroup
        was made from yet: the gang never starts before every part of it is there."""
        if obj is None:
            return None
        mine = workload_podgroups(obj, related.listed(PODGROUPS, ref.namespace))
        made = {workload_ref(pg)[1] for pg in mine}
        missing = sum(1 for t in workload_templates(obj) if t not in made)
        return sum(min_count(kobj.get(pg, "spec")) for pg in mine) + missing

    def order(
        self, ref: GroupRef, obj: Obj | None, pods: Sequence[Obj], related: Related
    ) -> list[Obj]:
        """By its PodGroups (:func:`~bridge.workloads.builtin.workload_podgroups`)."""
        mine = workload_podgroups(obj, related.listed(PODGROUPS, ref.namespace))
        rank = {kobj.name(pg): i for i, pg in enumerate(mine)}
        return sorted(
            pods,
            key=lambda p: (rank.get(podgroup_name(p), len(rank)), podgroup_name(p), kobj.name(p)),
        )

    def part(self, ref: GroupRef, pod: Obj) -> str | None:
        return podgroup_name(pod) or None

    def scheduled(self, ref: GroupRef, pods: Sequence[Obj]) -> tuple[ObjectRef, ...]:
        return podgroups_of(ref.namespace, pods)  # a Workload has no status


KIND = Workload()
