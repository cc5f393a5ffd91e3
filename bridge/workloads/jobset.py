"""A JobSet: the pods labelled with its name; one gang, or one per replicated job
(``<jobset>-<rjob>``, ``scheduler.jobsetGrouping: replicatedJob``). Its size is replicas
x pods per Job over the (selected) replicated jobs; its pods come by replicated job (in
spec order), job index and completion index, a replicated job a part."""

from __future__ import annotations

from collections.abc import Sequence

from bridge import kobj
from bridge.wellknown import LABEL_JOBSET_JOB_INDEX, LABEL_JOBSET_NAME, LABEL_JOBSET_REPLICATED_JOB
from bridge.workloads.base import (
    Api,
    Claim,
    Deadline,
    GroupRef,
    Kind,
    Obj,
    Related,
    completion_index,
    int_label,
    job_parallelism,
)


class JobSet(Kind):
    name = "JobSet"
    api = Api("jobset.x-k8s.io", ("v1alpha2",), "jobsets", "JobSet")
    name_field = f"metadata.labels[{LABEL_JOBSET_NAME}]"
    source_field = name_field
    size_field = "spec.replicatedJobs"

    def claim(self, c: Claim) -> GroupRef | None:
        jobset = c.labels.get(LABEL_JOBSET_NAME)
        if not jobset:
            return None
        rjob = c.labels.get(LABEL_JOBSET_REPLICATED_JOB)
        if c.settings.jobset_grouping == "replicatedJob" and rjob:
            return self.group(c, jobset, name=f"{jobset}-{rjob}", owned=True, replicated_job=rjob)
        return self.group(c, jobset, owned=True)

    def size(
        self, ref: GroupRef, obj: Obj | None, pods: Sequence[Obj], related: Related
    ) -> int | None:
        if obj is None:
            return None
        total = 0
        for rj in kobj.sequence(obj, "spec", "replicatedJobs"):
            if ref.replicated_job is not None and kobj.text(rj, "name") != ref.replicated_job:
                continue
            replicas = kobj.integer(rj, "replicas")
            replicas = 1 if replicas is None else replicas
            total += replicas * job_parallelism(kobj.get(rj, "template", "spec"))
        return total or None

    def order(
        self, ref: GroupRef, obj: Obj | None, pods: Sequence[Obj], related: Related
    ) -> list[Obj]:
        rjobs = [kobj.text(rj, "name") for rj in kobj.sequence(obj, "spec", "replicatedJobs")]

        def key(p: Obj) -> tuple[int, str, int, int, str]:
            labels = kobj.labels(p)
            rj = labels.get(LABEL_JOBSET_REPLICATED_JOB, "")
            pos = rjobs.index(rj) if rj in rjobs else len(rjobs)
            job_index = int_label(labels, LABEL_JOBSET_JOB_INDEX)
            return (
                pos,
                rj,
                -1 if job_index is None else job_index,
                completion_index(p),
                kobj.name(p),
            )

        return sorted(pods, key=key)

    def part(self, ref: GroupRef, pod: Obj) -> str | None:
        if ref.replicated_job is not None:
            return None
        return kobj.labels(pod).get(LABEL_JOBSET_REPLICATED_JOB)

    def deadlines(self, ref: GroupRef, obj: Obj) -> tuple[Deadline, ...]:
        """Every (selected) replicated job's ``activeDeadlineSeconds``."""
        found = []
        for i, rj in enumerate(kobj.sequence(obj, "spec", "replicatedJobs")):
            if ref.replicated_job is not None and kobj.text(rj, "name") != ref.replicated_job:
                continue
            seconds = kobj.integer(rj, "template", "spec", "activeDeadlineSeconds")
            path = f"spec.replicatedJobs[{i}].template.spec.activeDeadlineSeconds"
            found.append(Deadline(seconds, path, kobj.describe(obj, "JobSet")))
        return tuple(found)


KIND = JobSet()
