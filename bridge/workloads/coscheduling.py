"""A PodGroup of the scheduler-plugins coscheduling API (``scheduling.x-k8s.io``): the
pods labelled ``scheduling.x-k8s.io/pod-group``; its size is ``spec.minMember``."""

from __future__ import annotations

from collections.abc import Sequence

from bridge import kobj
from bridge.wellknown import LABEL_POD_GROUP
from bridge.workloads.base import Api, Claim, GroupRef, Kind, Obj, Related


class CoschedulingPodGroup(Kind):
    name = "PodGroup"
    api = Api("scheduling.x-k8s.io", ("v1alpha1",), "podgroups", "PodGroup")
    name_field = f"metadata.labels[{LABEL_POD_GROUP}]"
    source_field = name_field
    size_field = "spec.minMember"

    def claim(self, c: Claim) -> GroupRef | None:
        name = c.labels.get(LABEL_POD_GROUP)
        return self.group(c, name) if name else None

    def size(
        self, ref: GroupRef, obj: Obj | None, pods: Sequence[Obj], related: Related
    ) -> int | None:
        if obj is None:
            return None
        n = kobj.integer(obj, "spec", "minMember")
        return n if n is not None and n > 0 else 1


KIND = CoschedulingPodGroup()
