"""The pure decide step of a scheduling cycle.

Given everything known about one group at one moment (its pods, whether it is complete,
its translated JobSpec or the reason it cannot be translated, and the Slurm job that
already exists for it), return what to do next. No I/O, no clock: the cycle acts on the
returned decision and the tests below are plain tables.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from bridge.errors import InvalidInput
from bridge.models import GroupId, JobSpec

# Slurm base states after which a job holds no allocation any more.
ENDED_STATES = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "TIMEOUT",
    }
)
# Reasons written on pods (PodScheduled=False). "Unschedulable" is what kube-scheduler
# uses, so generic tooling (kubectl describe, cluster autoscalers) reads it right; the
# message carries Slurm's own reason.
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_SCHEDULER_ERROR = "SchedulerError"


@dataclass(frozen=True)
class PodView:
    key: str  # "namespace/name"
    uid: str
    job_id: int | None = None  # from the slurm-jobid label
    assigned_node: str | None = None  # from the slurm-node annotation


@dataclass(frozen=True)
class JobView:
    job_id: int
    state: str  # Slurm base state: PENDING, RUNNING, CANCELLED ...
    reason: str | None = None  # Slurm's state_reason ("Resources", "Priority" ...)
    nodes: tuple[str, ...] = ()  # expanded allocation, in Slurm's order
    spec_hash: str | None = None  # the hash of the JobSpec it was submitted with
    tasks_per_node: tuple[tuple[str, int], ...] | None = None


@dataclass(frozen=True)
class GroupSnapshot:
    group: GroupId
    pods: tuple[PodView, ...]  # unbound members, in group order
    expected: int  # members the group needs before it is submitted
    spec: JobSpec | None = None
    invalid: InvalidInput | None = None
    job: JobView | None = None


# --- decisions --------------------------------------------------------------------------
@dataclass(frozen=True)
class Wait:
    """Nothing to do in Slurm yet; tell the pods why."""

    reason: str
    message: str


@dataclass(frozen=True)
class Reject:
    """The group cannot become a Slurm job as it is: say why, back off."""

    message: str


@dataclass(frozen=True)
class Submit:
    spec: JobSpec
    spec_hash: str


@dataclass(frozen=True)
class Update:
    job_id: int
    spec: JobSpec
    spec_hash: str


@dataclass(frozen=True)
class Cancel:
    job_id: int
    message: str


@dataclass(frozen=True)
class Bind:
    job: JobView
    pods: tuple[PodView, ...] = field(default=())


@dataclass(frozen=True)
class Pending:
    """The job waits in Slurm: show Slurm's reason on every pod."""

    job_id: int
    message: str


@dataclass(frozen=True)
class Ended:
    """The job ended before its pods were bound (scancel, time limit ...)."""

    job_id: int
    message: str


Decision = Wait | Reject | Submit | Update | Cancel | Bind | Pending | Ended


def spec_hash(spec: JobSpec) -> str:
    """A short stable hash of everything Slurm-relevant in ``spec`` (not the comment,
    which carries the hash itself)."""
    data = spec.model_dump_json(exclude={"comment"})
    return hashlib.sha256(data.encode()).hexdigest()[:12]


def pending_message(job: JobView) -> str:
    reason = job.reason or "None"
    return f"Slurm job {job.job_id} is pending: {reason}"


def decide(snap: GroupSnapshot) -> Decision:
    """What to do next for one group. Pure."""
    have, want = len(snap.pods), snap.expected
    job = snap.job
    if job is not None and job.state in ENDED_STATES:
        return Ended(
            job.job_id,
            f"Slurm job {job.job_id} ended before allocation: {job.state}"
            + (f" ({job.reason})" if job.reason and job.reason != "None" else ""),
        )
    if have < want:
        if job is not None and job.state == "PENDING":
            return Cancel(
                job.job_id,
                f"group {snap.group.key} lost members before allocation ({have} of {want})",
            )
        if job is None:
            return Wait(
                REASON_UNSCHEDULABLE,
                f"waiting for group {snap.group.key}: {have} of {want} pods exist",
            )
    if job is not None and job.state == "RUNNING" and job.nodes:
        # Allocated: bind what is unbound. Members missing from the snapshot were bound
        # already (a restart mid-bind), and then the group translates as incomplete, with
        # no spec: binding the rest must not depend on it.
        return Bind(job, snap.pods)
    if snap.invalid is not None:
        return Reject(str(snap.invalid))
    if snap.spec is None:
        return Reject(f"group {snap.group.key}: no job spec")
    h = spec_hash(snap.spec)
    if job is None:
        return Submit(snap.spec, h)
    if job.state == "PENDING":
        if job.spec_hash is not None and job.spec_hash != h:
            return Update(job.job_id, snap.spec, h)
        return Pending(job.job_id, pending_message(job))
    # CONFIGURING, SUSPENDED, REQUEUED ...: wait for Slurm to settle.
    return Pending(job.job_id, f"Slurm job {job.job_id} is {job.state}")
