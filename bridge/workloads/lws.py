"""A group of a LeaderWorkerSet: the pods labelled with its name and a group index, a
group per index (``<lws>-<groupIndex>``); its size is ``spec.leaderWorkerTemplate.size``
(the pods' size annotation until the LWS is read); the leader first, then the workers by
index, a part each (a hetjob's components when their shapes differ)."""

from __future__ import annotations

from collections.abc import Sequence

from bridge import kobj
from bridge.wellknown import (
    ANNOTATION_LWS_SIZE,
    LABEL_LWS_GROUP_INDEX,
    LABEL_LWS_NAME,
    LABEL_LWS_WORKER_INDEX,
)
from bridge.workloads.base import Api, Claim, GroupRef, Kind, Obj, Related, int_label


class LeaderWorkerSet(Kind):
    name = "LeaderWorkerSet"
    api = Api("leaderworkerset.x-k8s.io", ("v1",), "leaderworkersets", "LeaderWorkerSet")
    name_field = f"metadata.labels[{LABEL_LWS_NAME}]"
    source_field = name_field
    size_field = "spec.leaderWorkerTemplate.size"
    template_paths: tuple[str, ...] = (
        "spec.leaderWorkerTemplate.leaderTemplate.spec",
        "spec.leaderWorkerTemplate.workerTemplate.spec",
    )

    def claim(self, c: Claim) -> GroupRef | None:
        lws = c.labels.get(LABEL_LWS_NAME)
        if not lws or LABEL_LWS_GROUP_INDEX not in c.labels:
            return None
        return self.group(c, lws, name=f"{lws}-{c.labels[LABEL_LWS_GROUP_INDEX]}", owned=True)

    def size(
        self, ref: GroupRef, obj: Obj | None, pods: Sequence[Obj], related: Related
    ) -> int | None:
        size = kobj.integer(obj, "spec", "leaderWorkerTemplate", "size")
        if size is None:
            sizes = {kobj.annotations(p).get(ANNOTATION_LWS_SIZE, "") for p in pods}
            digits = [int(x) for x in sizes if x.isdigit() and len(x) < 10]
            size = max(digits) if digits else None
        return size

    def order(
        self, ref: GroupRef, obj: Obj | None, pods: Sequence[Obj], related: Related
    ) -> list[Obj]:
        return sorted(
            pods,
            key=lambda p: (int_label(kobj.labels(p), LABEL_LWS_WORKER_INDEX) or 0, kobj.name(p)),
        )

    def part(self, ref: GroupRef, pod: Obj) -> str | None:
        return "leader" if kobj.labels(pod).get(LABEL_LWS_WORKER_INDEX, "0") == "0" else "workers"


KIND = LeaderWorkerSet()
