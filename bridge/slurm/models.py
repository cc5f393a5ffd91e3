"""Typed, frozen read models of what slurmrestd returns, independent of the REST version.

The codecs (:mod:`bridge.slurm.codec`) build these from each version's JSON; everything
above the client sees only these. Times are aware UTC datetimes, ``None`` when Slurm
says "not set" (``set: false`` or 0).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from pydantic import BaseModel, ConfigDict

# Slurm's base job states; everything else in ``job_state`` is a flag (REQUEUED, ...).
JOB_BASE_STATES = frozenset(
    {
        "PENDING",
        "RUNNING",
        "SUSPENDED",
        "COMPLETED",
        "CANCELLED",
        "FAILED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "OUT_OF_MEMORY",
    }
)
JOB_ACTIVE_STATES = frozenset({"PENDING", "RUNNING", "SUSPENDED"})
# Base states after which a job holds no allocation any more.
JOB_ENDED_STATES = JOB_BASE_STATES - JOB_ACTIVE_STATES


def het_shown(states: Sequence[str | None]) -> int:
    """THE hetjob rule (docs/hetjob.md): which component's state is a heterogeneous job's,
    from its components' primary states in offset order (None: not known). The first
    that ended (the whole gang ends with it; one not known counts so: it is read), else
    the first not RUNNING (pending, configuring ...: its reason is the gang's), else the
    leader (all RUNNING)."""
    ended = [i for i, st in enumerate(states) if st is None or st not in JOB_ACTIVE_STATES]
    waiting = [i for i, st in enumerate(states) if st != "RUNNING"]
    return (ended or waiting or [0])[0]


# Base node states; the rest of a node's ``state`` list are flags (DRAIN, EXTERNAL, ...).
NODE_BASE_STATES = frozenset(
    {"UNKNOWN", "DOWN", "IDLE", "ALLOCATED", "ERROR", "MIXED", "FUTURE", "INVALID"}
)


# Written into the ``comment`` of every job the bridge asks Slurm to start at once
# (POST job/allocate, immediate): with the record's state it tells a refused try apart.
ALLOCATE_MARK = "start=now"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SlurmMessage(_Frozen):
    """One entry of a response's ``errors[]`` (or a DELETE's ``status[].error``)."""

    error_number: int = 0
    error: str = ""
    description: str = ""
    source: str = ""

    @property
    def text(self) -> str:
        """Slurm's own words: ``description: error`` (whichever are present)."""
        parts = [p for p in (self.description, self.error) if p]
        if len(parts) == 2 and parts[0] == parts[1]:
            parts = parts[:1]
        return ": ".join(parts) or f"Slurm error {self.error_number}"


class SlurmWarning(_Frozen):
    description: str = ""
    source: str = ""


class JobState(_Frozen):
    """``job_state`` split into the base state and its flags (``["PENDING", "REQUEUED"]``)."""

    primary: str
    flags: frozenset[str] = frozenset()

    @property
    def active(self) -> bool:
        """Pending, running or suspended: the job still holds (or waits for) nodes."""
        return self.primary in JOB_ACTIVE_STATES

    @classmethod
    def from_list(cls, states: list[str] | tuple[str, ...]) -> JobState:
        base = [s for s in states if s in JOB_BASE_STATES]
        primary = base[0] if base else (states[0] if states else "UNKNOWN")
        return cls(primary=primary, flags=frozenset(s for s in states if s != primary))


class ExitCode(_Frozen):
    status: tuple[str, ...] = ()
    return_code: int | None = None
    signal: int | None = None


class AllocatedNode(_Frozen):
    """One node of ``job_resources``: how much of it the job holds."""

    name: str
    cpus: int | None = None
    memory_mib: int | None = None


class SlurmJob(_Frozen):
    job_id: int
    name: str
    state: JobState
    state_reason: str = ""
    state_description: str = ""
    nodes: tuple[str, ...] = ()  # expanded from the job's hostlist, Slurm's order
    node_count: int | None = None
    partition: str = ""
    comment: str = ""
    admin_comment: str = ""
    mcs_label: str = ""
    user: str = ""
    user_id: int | None = None
    group_id: int | None = None
    submit_time: datetime | None = None
    eligible_time: datetime | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None
    # The job record has no update_time field in v0.0.43-45; this is the last time the
    # scheduler looked at the job, the closest thing Slurm gives.
    last_sched_evaluation: datetime | None = None
    time_limit_minutes: int | None = None
    exit_code: ExitCode = ExitCode()
    flags: frozenset[str] = frozenset()
    cpus: int | None = None
    cpus_per_task: int | None = None
    memory_per_node_mib: int | None = None
    memory_per_cpu_mib: int | None = None
    tres_per_node: str = ""
    tres_req_str: str = ""
    tres_alloc_str: str = ""
    gres_detail: tuple[str, ...] = ()
    shared: tuple[str, ...] = ()
    batch: bool = False
    allocation: tuple[AllocatedNode, ...] = ()
    # Set when Slurm selected the job for preemption; a RUNNING job keeps its nodes until
    # ``end_time`` (preempt_time + the partition's GraceTime), then ends PREEMPTED or is
    # requeued (PreemptMode REQUEUE: PENDING again, ``restart_count`` one more).
    preempt_time: datetime | None = None
    restart_count: int = 0
    # What decides its place in the queue and what may hold it (slurm-bridge why):
    # Slurm's priority, QOS, account, reservation and dependency ("" none)
    priority: int | None = None
    qos: str = ""
    account: str = ""
    reservation: str = ""
    dependency: str = ""
    minimum_cpus_per_node: int | None = None
    # What a pending job asks, for the bridge's plan of Slurm's queue (bridge.queueplan):
    # tasks, at most how many nodes, tasks per node (None/0: any), GRES per task, the nodes
    # it must or must not use, its constraint (features) and licenses
    tasks: int | None = None
    max_nodes: int | None = None
    tasks_per_node: int | None = None
    tres_per_task: str = ""
    required_nodes: tuple[str, ...] = ()
    excluded_nodes: tuple[str, ...] = ()
    features: str = ""
    licenses: str = ""
    # Its topology request as Slurm reports it back (None: none): ``--segment`` (nodes per
    # segment, each inside one block) and ``--switches`` (at most this many leaf switches)
    segment_size: int | None = None
    required_switches: int | None = None
    # A heterogeneous job (docs/hetjob.md): ``het_job_id`` is the leader's id (component
    # 0's), ``het_job_offset`` this component's offset; both None for a plain job. The
    # leader read by id (``GET /job/{leader}``) carries components 1..n here.
    het_job_id: int | None = None
    het_job_offset: int | None = None
    het_components: tuple[SlurmJob, ...] = ()

    @property
    def components(self) -> tuple[SlurmJob, ...]:
        """Every component in offset order: ``(self,)`` for a plain job."""
        return (self, *self.het_components)

    @property
    def heterogeneous(self) -> bool:
        return self.het_job_id is not None

    @property
    def shown_offset(self) -> int:
        """The offset of the component whose state is the job's (:func:`het_shown`; 0,
        itself, for a plain job)."""
        return het_shown([c.state.primary for c in self.components])

    @property
    def external(self) -> bool:
        return "EXTERNAL_JOB" in self.flags

    @property
    def refused_allocation(self) -> bool:
        """The FAILED record a refused immediate allocation leaves in Slurm's job table
        (2013/2015/2016, measured on 26.05: state FAILED, reason BadConstraints, no
        nodes, never ran; name, comment and admin_comment as given). It never held
        nodes and is never a group's job: the bridge's comment marks the try
        (:data:`ALLOCATE_MARK`) and a job that started carries ``JOB_WAS_RUNNING``."""
        return (
            self.state.primary == "FAILED"
            and "JOB_WAS_RUNNING" not in self.flags
            and not self.nodes
            and ALLOCATE_MARK in self.comment.split()
        )

    def tres_alloc(self) -> dict[str, str]:
        """``tres_alloc_str`` as a mapping: ``{"cpu": "16", "mem": "16000M", ...}``."""
        return _parse_tres(self.tres_alloc_str)


def fold_hetjobs(jobs: Iterable[SlurmJob]) -> list[SlurmJob]:
    """A flat job list (``GET /jobs/`` lists every hetjob component as a job of its own)
    with each hetjob as one entry: its leader, carrying its other components in offset
    order. Components whose leader is not in the list are kept as they are."""
    listed = list(jobs)
    leaders = {j.job_id for j in listed if j.het_job_id == j.job_id}
    rest: dict[int, list[SlurmJob]] = {}
    out: list[SlurmJob] = []
    for j in listed:
        if j.het_job_id is not None and j.het_job_id != j.job_id and j.het_job_id in leaders:
            rest.setdefault(j.het_job_id, []).append(j)
        else:
            out.append(j)
    return [
        j.model_copy(
            update={
                "het_components": tuple(sorted(rest[j.job_id], key=lambda c: c.het_job_offset or 0))
            }
        )
        if j.job_id in rest and not j.het_components
        else j
        for j in out
    ]


def _parse_tres(s: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in s.split(","):
        k, sep, v = item.partition("=")
        if sep:
            out[k.strip()] = v.strip()
    return out


class JobList(_Frozen):
    """A jobs answer (``GET /job/{id}``, ``GET /jobs/``): the jobs and the server's
    ``last_update``."""

    jobs: tuple[SlurmJob, ...]
    last_update: datetime | None = None


class JobStateItem(_Frozen):
    """One row of ``GET /jobs/state/``: the cheapest way to see every job's state."""

    job_id: int
    state: JobState
    # a hetjob component's offset (the row reads ``"<id>+<offset>"``); None: a plain job
    het_offset: int | None = None


class SlurmNode(_Frozen):
    name: str
    state: frozenset[str]
    reason: str = ""
    reason_set_by_user: str = ""
    cpus: int = 0
    alloc_cpus: int = 0
    real_memory_mib: int = 0
    alloc_memory_mib: int = 0
    gres: str = ""
    gres_used: str = ""
    partitions: tuple[str, ...] = ()
    features: tuple[str, ...] = ()
    active_features: tuple[str, ...] = ()
    address: str = ""
    hostname: str = ""
    comment: str = ""
    tres: str = ""
    # Topology= (topology.yaml affiliation or set by update): "net:block-0", "" for none
    topology: str = ""

    @property
    def base_state(self) -> str:
        base = [s for s in self.state if s in NODE_BASE_STATES]
        return sorted(base)[0] if base else "UNKNOWN"

    @property
    def drain(self) -> bool:
        return "DRAIN" in self.state

    @property
    def down(self) -> bool:
        return "DOWN" in self.state

    @property
    def fail(self) -> bool:
        return "FAIL" in self.state

    @property
    def external(self) -> bool:
        return "EXTERNAL" in self.state

    @property
    def unusable(self) -> bool:
        """DOWN, DRAIN(ED/ING), FAIL or NOT_RESPONDING: Slurm will not start jobs here."""
        return bool(self.state & {"DOWN", "DRAIN", "FAIL", "NOT_RESPONDING"})


class SlurmPartition(_Frozen):
    name: str
    nodes: tuple[str, ...] = ()  # expanded from ``nodes.configured``
    node_count: int = 0
    total_cpus: int = 0
    state: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    tres: str = ""
    grace_time_seconds: int = 0  # GraceTime: how long a job selected for preemption keeps its nodes
    priority_tier: int = 1  # PriorityTier (preempt/partition_prio: higher tiers preempt lower)

    @property
    def up(self) -> bool:
        return "UP" in self.state

    @property
    def default(self) -> bool:
        return "DEFAULT" in self.flags


class SlurmReservation(_Frozen):
    """A reservation (``GET /reservations/``): its window and its nodes. Its users and
    accounts are not read: ``slurm-bridge why`` never shows them."""

    name: str
    start_time: datetime | None = None
    end_time: datetime | None = None
    node_count: int = 0
    nodes: tuple[str, ...] = ()  # expanded from ``node_list``
    partition: str = ""
    flags: tuple[str, ...] = ()


class SlurmLimits(_Frozen):
    """The limits of a QOS or an association (slurmdbd: ``sacctmgr show qos|assoc``), by
    sacctmgr's names: ``tres`` the TRES limits (``GrpTRES``, ``MaxTRESPerUser`` ... ->
    ``{"cpu": 12, "gres/gpu": 2}``; ``mem`` in MB), ``counts`` the others (``GrpJobs``,
    ``MaxJobsPerUser``, ``MaxSubmitJobs``, ``MaxWall`` and ``GrpWall`` in minutes ...).
    A limit not set is absent."""

    tres: dict[str, dict[str, int]] = {}
    counts: dict[str, int] = {}


class SlurmQos(_Frozen):
    """A QOS (``GET /slurmdb/<v>/qos/``)."""

    name: str
    limits: SlurmLimits = SlurmLimits()


class SlurmAssociation(_Frozen):
    """An association (``GET /slurmdb/<v>/associations/``): an account's (``user`` "")
    or a user's in an account; ``parent_account`` is the account above an account's."""

    account: str
    user: str = ""
    partition: str = ""
    parent_account: str = ""
    qos: tuple[str, ...] = ()
    limits: SlurmLimits = SlurmLimits()


class SubmitResult(_Frozen):
    job_id: int
    step_id: str = ""
    user_msg: str = ""
    warnings: tuple[SlurmWarning, ...] = ()


class Allocated(_Frozen):
    """An immediate allocation succeeded: the job is RUNNING now."""

    job_id: int
    user_msg: str = ""
    warnings: tuple[SlurmWarning, ...] = ()


class AllocationRefused(_Frozen):
    """Slurm cannot start the job now (2013 priority, 2015/2016 busy). No job id comes
    back, yet a FAILED record stays (:attr:`SlurmJob.refused_allocation`)."""

    error_number: int
    message: str


AllocateOutcome = Allocated | AllocationRefused


class CancelStatus(_Frozen):
    """One ``status[]`` entry of a DELETE: HTTP 200 even when it failed."""

    job_id: int | None = None
    error: SlurmMessage | None = None


class PingResult(_Frozen):
    hostname: str
    responding: bool
    primary: bool = False
    status: str = ""
    latency_us: int | None = None


class GresAllocation(_Frozen):
    """One GRES of a job on one node (``GET /resources/{job_id}``): ``indices`` are the
    device indices Slurm picked, ``None`` where Slurm only counts (nodes without slurmd,
    ``State=EXTERNAL``, whose device files slurmctld never learns)."""

    name: str
    type: str = ""
    count: int = 0
    indices: tuple[int, ...] | None = None


class NodeResources(_Frozen):
    """What a job holds on one node: the cores of Slurm's ``core_bitmap`` (index =
    socket * cores_per_socket + core) and its GRES."""

    node: str
    cores: tuple[int, ...] = ()
    sockets_per_node: int | None = None
    cores_per_socket: int | None = None
    gres: tuple[GresAllocation, ...] = ()
