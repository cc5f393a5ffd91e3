"""A batch/v1 Job: the pods its controller ownerReference names. A gang (one Slurm job
for min(parallelism, completions) pods, by completion index) when its parallelism is
over 1 (or it is Indexed, when the Job is not read) and ``scheduler.gangBatchJobs``;
otherwise each pod is a plain pod's group, the Job its source (its annotations and
deadline apply)."""

from __future__ import annotations

from collections.abc import Sequence

from bridge import kobj
from bridge.wellknown import LABEL_JOB_COMPLETION_INDEX
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
    chain_owner,
    completion_index,
    job_deadline,
    job_parallelism,
    owner_of,
)


class Job(Kind):
    name = "Job"
    api = Api("batch", ("v1",), "jobs", "Job", builtin=True)
    name_field = "metadata.ownerReferences.name"
    size_field = "spec.parallelism"
    template_paths: tuple[str, ...] = ("spec.template.spec",)
    identity: Identity = "controller"

    def claim(self, c: Claim) -> GroupRef | None:
        owner = c.chain[0] if c.chain else None
        if owner is None or chain_owner(c.chain[:1], self.api) is None:
            return None
        job_ref = owner.model_copy(update={"api_version": self.api.api_version})
        job = owner_of(c.owners, c.namespace, self.api.kind, job_ref.name, job_ref.uid or "")
        if job is not None:
            gang = job_parallelism(kobj.get(job, "spec")) > 1
        else:
            gang = LABEL_JOB_COMPLETION_INDEX in c.labels
        if c.settings.gang_batch_jobs and gang:
            return GroupRef(
                kind=self.name,
                namespace=c.namespace,
                name=job_ref.name,
                uid=job_ref.uid,
                source=job_ref,
            )
        # not a gang: the pod's own group, the Job its source
        return GroupRef(
            kind=POD_KIND,
            namespace=c.namespace,
            name=kobj.name(c.pod),
            uid=kobj.uid(c.pod),
            source=job_ref,
        )

    def size(
        self, ref: GroupRef, obj: Obj | None, pods: Sequence[Obj], related: Related
    ) -> int | None:
        return None if obj is None else job_parallelism(kobj.get(obj, "spec"))

    def order(
        self, ref: GroupRef, obj: Obj | None, pods: Sequence[Obj], related: Related
    ) -> list[Obj]:
        return sorted(pods, key=lambda p: (completion_index(p), kobj.name(p)))

    def deadlines(self, ref: GroupRef, obj: Obj) -> tuple[Deadline, ...]:
        return job_deadline(obj)


KIND = Job()
