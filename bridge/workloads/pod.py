"""A plain pod: a group of one, its Slurm job named after the pod. It claims every pod
no other kind claims (it is the registry's last)."""

from __future__ import annotations

from collections.abc import Sequence

from bridge import kobj
from bridge.workloads.base import (
    POD_KIND,
    Api,
    Claim,
    Deadline,
    GroupRef,
    Identity,
    Kind,
    Obj,
    Related,
    job_deadline,
)


class Pod(Kind):
    name = POD_KIND
    api = Api("", ("v1",), "pods", "Pod", builtin=True)
    name_field = "metadata.name"
    identity: Identity = "pod"

    def claim(self, c: Claim) -> GroupRef:
        return GroupRef(
            kind=self.name, namespace=c.namespace, name=kobj.name(c.pod), uid=kobj.uid(c.pod)
        )

    def size(self, ref: GroupRef, obj: Obj | None, pods: Sequence[Obj], related: Related) -> int:
        return 1

    def deadlines(self, ref: GroupRef, obj: Obj) -> tuple[Deadline, ...] | None:
        # the pod of a Job that is not a gang: the Job is its source, its deadline applies
        return job_deadline(obj) if ref.source is not None else None


KIND = Pod()
