"""A gang CompositePodGroup (``scheduling.k8s.io/v1alpha3``, Kubernetes 1.37, KEP-6012:
:mod:`bridge.workloads.builtin`): the built-in PodGroups that name it as their parent
(``spec.parentCompositePodGroupName``) are ONE gang, a hetjob component each when their
shapes differ (docs/hetjob.md). It claims the pods of a PodGroup whose parent it is, when
it is a gang (:func:`~bridge.workloads.builtin.gang_composite`); its related objects are
the PodGroups of its namespace and the composite a PodGroup names.

The gang is complete once ``schedulingPolicy.gang.minGroupCount`` of its child PodGroups
have their own ``minCount`` pods (every pod there then joins the job);
``schedulingConstraints.topology``'s key (at most one) is the Slurm topology request, as
Kueue's ``podset-required-topology`` annotation is (docs/topology.md)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from bridge import kobj
from bridge.wellknown import ANNOTATION_KUEUE_REQUIRED_TOPOLOGY
from bridge.workloads.base import Api, Claim, GroupRef, Kind, Obj, ObjectRef, Related
from bridge.workloads.builtin import (
    COMPOSITES,
    PODGROUPS,
    class_priority,
    gang_composite,
    min_count,
    min_group_count,
    parent_composite,
    podgroup_name,
    podgroups_of,
)


def children(composite: Obj | None, pod_groups: Sequence[Obj]) -> list[Obj]:
    """The PodGroups of ``pod_groups`` that are ``composite``'s gang, by name."""
    mine = [pg for pg in pod_groups if gang_composite(pg, composite)]
    return sorted(mine, key=kobj.name)


class CompositePodGroup(Kind):
    name = "CompositePodGroup"
    api = COMPOSITES
    name_field = "spec.parentCompositePodGroupName"
    source_field = "spec.schedulingGroup.podGroupName"
    size_field = "spec.schedulingPolicy.gang.minGroupCount"
    related: tuple[Api, ...] = (PODGROUPS, COMPOSITES)

    def claim(self, c: Claim) -> GroupRef | None:
        name = podgroup_name(c.pod)
        podgroup = c.related.get(PODGROUPS, c.namespace, name) if name else None
        parent = parent_composite(podgroup)
        if not parent:
            return None
        gang = gang_composite(podgroup, c.related.get(COMPOSITES, c.namespace, parent))
        return self.group(c, gang) if gang else None

    def size(
        self, ref: GroupRef, obj: Obj | None, pods: Sequence[Obj], related: Related
    ) -> int | None:
        """Every pod there once ``minGroupCount`` children have their ``minCount``;
        until then every child's ``minCount`` (and one more than the pods there)."""
        want = min_group_count(obj)
        if obj is None or want is None:
            return None
        mine = children(obj, related.listed(PODGROUPS, ref.namespace))
        have = Counter(podgroup_name(p) for p in pods)
        ready = [pg for pg in mine if have[kobj.name(pg)] >= min_count(kobj.get(pg, "spec"))]
        if len(ready) >= want:
            return len(pods)
        return max(sum(min_count(kobj.get(pg, "spec")) for pg in mine), len(pods) + 1)

    def order(
        self, ref: GroupRef, obj: Obj | None, pods: Sequence[Obj], related: Related
    ) -> list[Obj]:
        """By child PodGroup (by name), then by pod name."""
        return sorted(pods, key=lambda p: (podgroup_name(p), kobj.name(p)))

    def part(self, ref: GroupRef, pod: Obj) -> str | None:
        return podgroup_name(pod) or None

    def priority(self, obj: Obj) -> int | None:
        return class_priority(obj)

    def scheduled(self, ref: GroupRef, pods: Sequence[Obj]) -> tuple[ObjectRef, ...]:
        mine = podgroups_of(ref.namespace, pods)
        return mine if ref.source is None else (ref.source, *mine)

    def annotations(self, obj: Obj) -> dict[str, str]:
        """Its topology constraint's key as Kueue's required-topology annotation (its
        own annotations win)."""
        keys = [
            kobj.text(t, "key")
            for t in kobj.sequence(obj, "spec", "schedulingConstraints", "topology")
        ]
        implied = {ANNOTATION_KUEUE_REQUIRED_TOPOLOGY: keys[0]} if keys and keys[0] else {}
        return {**implied, **kobj.annotations(obj)}


KIND = CompositePodGroup()
