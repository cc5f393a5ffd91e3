"""Slurm's preemption, seen early: the grace contract (docs/controller.md, "The allocation
invariant"). Pure: partitions and jobs in, decisions out.

When Slurm selects a job for preemption it sets the job's ``preempt_time`` and lets it keep
its nodes for the partition's ``GraceTime`` (``end_time`` = preempt_time + GraceTime;
measured on 26.05: the job ended PREEMPTED 4 to 30 s after that, at slurmctld's next
time-limit check; an external job is never requeued, with PreemptMode REQUEUE too). The
job's state stays RUNNING meanwhile, and ``GET /jobs/state/`` does not show it: only the
job's record does. So while a partition of the bridge has a GraceTime, the controller reads
the records of its RUNNING jobs, :data:`PREEMPT_READS_PER_POLL` a poll in turn, and fails
the pods of a job selected for preemption at once (``DisruptionTarget``): their containers
get SIGTERM while Slurm still holds the nodes, and the job is cancelled once they stopped.

The contract: ``GraceTime`` of every partition the bridge's jobs run in must be at least
the pods' ``terminationGracePeriodSeconds`` plus the time to notice (up to
``ceil(running jobs / PREEMPT_READS_PER_POLL)`` polls). :func:`grace_warnings` says, at
start, where a higher-tier partition shares a bridge partition's nodes (partition_prio
preemption is possible) with less GraceTime than :data:`POD_GRACE_SECONDS` plus a poll.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from bridge.slurm.models import SlurmJob, SlurmPartition

# Slurm job records read per poll to see a preemption (only while a bridge partition
# has a GraceTime, and only of RUNNING jobs): at most 16 small GETs a second at the
# default 0.25 s poll while job states change, 4 once the poller idles at 1 s; a
# preemption among N running jobs is seen within ceil(N / 4) polls.
PREEMPT_READS_PER_POLL = 4
# Kubernetes' default terminationGracePeriodSeconds: the least GraceTime the warning asks for.
POD_GRACE_SECONDS = 30


def selected_for_preemption(job: SlurmJob) -> bool:
    """Slurm picked this still-running job for preemption (it ends at ``end_time``)."""
    return job.preempt_time is not None and job.state.primary == "RUNNING"


def watch(partitions: Iterable[SlurmPartition], bridge_partitions: Iterable[str]) -> bool:
    """Reading job records for preemption is worth it: a bridge partition has a GraceTime
    (without one Slurm ends a preempted job at once; the poller sees PREEMPTED)."""
    names = set(bridge_partitions)
    return any(p.grace_time_seconds > 0 for p in partitions if p.name in names)


def grace_warnings(
    partitions: Sequence[SlurmPartition], bridge_partitions: Iterable[str], poll_seconds: float
) -> list[str]:
    """Why the grace contract may not hold, one sentence per bridge partition at risk."""
    need = POD_GRACE_SECONDS + math.ceil(poll_seconds)
    out = []
    for name in sorted(set(bridge_partitions)):
        part = next((p for p in partitions if p.name == name), None)
        if part is None or part.grace_time_seconds >= need:
            continue
        higher = sorted(
            q.name
            for q in partitions
            if q.priority_tier > part.priority_tier and set(q.nodes) & set(part.nodes)
        )
        if higher:
            out.append(
                f"Slurm partition {name} has GraceTime={part.grace_time_seconds} s, and "
                f"jobs of higher-tier partitions ({', '.join(higher)}) may preempt its jobs: "
                f"a preempted pod's containers may still run when Slurm gives its nodes to "
                f"the preemptor. Set GraceTime >= the pods' terminationGracePeriodSeconds "
                f"plus the time to notice (>= {need} s for the default 30 s grace)"
            )
    return out


def next_reads(running: Sequence[int], cursor: int) -> tuple[list[int], int]:
    """The next :data:`PREEMPT_READS_PER_POLL` of ``running`` (sorted ids) from ``cursor``
    (the last id read), wrapping around; and the new cursor."""
    if not running:
        return [], 0
    after = [j for j in running if j > cursor]
    batch = (after + [j for j in running if j <= cursor])[:PREEMPT_READS_PER_POLL]
    return batch, batch[-1]
