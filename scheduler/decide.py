"""The pure decide step of a scheduling cycle.

Given everything known about one group at one moment (its pods, whether it is complete,
its translated JobSpec or the reason it cannot be translated, the Slurm job that already
exists for it, whether Slurm answers, and what the bridge knows of the partition a new
job would go to), return what to do next: one :data:`Decision`. No I/O, no clock: the
cycle (:mod:`scheduler.cycle`) acts on the returned decision, and
tests/unit/scheduler/test_decide.py checks it as plain tables. Choices made here travel in
the decision (how a new job is started: :attr:`Submit.start`; how many pods go on each
node: :attr:`Bind.tasks_per_node`), so the acting step only carries them out.

The pods' pending message is written and read back here only (:func:`pending_message`,
:func:`parse_pending`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime

from bridge.errors import InvalidInput
from bridge.expected import NO_PLAN_YET, Plan, choose, note, plan_of, strip_note
from bridge.models import GroupId, JobSpec
from bridge.queueplan import NO_QUEUE_PLAN, PLANNABLE_REASONS, QueueStart
from bridge.slurm.models import JOB_ENDED_STATES, het_shown
from scheduler.assign import tasks_per_node_even

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
class JobSnapshot:
    """The group's Slurm job, as the decide step knows it (the job part of a snapshot)."""

    job_id: int
    state: str  # Slurm base state: PENDING, RUNNING, CANCELLED ...
    reason: str | None = None  # Slurm's state_reason ("Resources", "Priority" ...)
    nodes: tuple[str, ...] = ()  # expanded allocation, in Slurm's order
    spec_hash: str | None = None  # the hash of the JobSpec it was submitted with
    shared: bool = False  # its nodes may hold other jobs (OverSubscribe)
    cpus: tuple[tuple[str, int], ...] = ()  # CPUs Slurm allocated per node, when known
    cpus_per_task: int | None = None
    # A heterogeneous job (docs/hetjob.md): every component, leader first; the fields
    # above then sum them up (state: see :func:`het_state`; nodes: all, component order).
    parts: tuple[JobPart, ...] = ()
    # the component whose state and reason the fields above show (None: a plain job)
    shown: int | None = None
    # a PENDING job's start_time: Slurm's plan (bridge.expected; a hetjob: its last
    # component's, None while one has none)
    start_time: datetime | None = None
    # the bridge's per-CPU plan of it (bridge.queueplan), from the last plan refresh;
    # None: the bridge has not planned it yet (its pods then wait for that plan before
    # showing one, when it may replace Slurm's: shown_plan)
    queue: QueueStart | None = NO_QUEUE_PLAN


@dataclass(frozen=True)
class JobPart:
    """One component of a heterogeneous job, as the job view needs it."""

    job_id: int
    offset: int
    state: str
    reason: str | None = None
    nodes: tuple[str, ...] = ()
    pods: tuple[str, ...] = ()  # the pods its back-link names, in rank order
    shared: bool = False
    cpus: tuple[tuple[str, int], ...] = ()
    cpus_per_task: int | None = None


def het_state(parts: tuple[JobPart, ...]) -> JobPart:
    """The component a hetjob's state is told by: the hetjob rule of the Slurm job model
    (:func:`bridge.slurm.models.het_shown`)."""
    return parts[het_shown([p.state for p in parts])]


@dataclass(frozen=True)
class GroupSnapshot:
    group: GroupId
    pods: tuple[PodView, ...]  # unbound members, in group order
    expected: int  # members the group needs before it is submitted
    spec: JobSpec | None = None
    invalid: InvalidInput | None = None
    job: JobSnapshot | None = None
    # ``job`` is what the pods record of it, not read from Slurm: enough to leave a pending
    # job alone, never to act on it
    job_unread: bool = False
    # Slurm has not given the new job a pending reason yet, and the poller still asks
    job_reason_awaited: bool = False
    # a new job may be made now (False until the start-up sweep ends, but for groups no
    # earlier scheduler can have seen)
    may_create: bool = True
    slurm_unreachable: str = ""  # what failed, while Slurm cannot be reached
    # the group's object (a PodGroup ...) does not exist: why it waits, naming the field
    waiting_for: str = ""
    # how a new job may be started (scheduler.immediateAllocation: "auto" or "never"), and
    # what the bridge knows of the partition it would go to (the start rule's inputs)
    immediate_allocation: str = "auto"
    partition: PartitionView | None = None
    # when the snapshot was taken: a pending job's plan is told relative to it (None: the
    # pods say nothing of a plan)
    now: datetime | None = None


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
    """No job yet: make one, started as ``start`` says (:func:`start_how`): ``ALLOCATE``
    (at once, ``job/allocate``) or ``SUBMIT`` (queued, ``job/submit``), ``why`` in words."""

    spec: JobSpec
    spec_hash: str
    start: str = "submit"
    why: str = ""


@dataclass(frozen=True)
class Update:
    job_id: int
    spec: JobSpec
    spec_hash: str
    # a heterogeneous job's component ids, leader first (each updated by its own id)
    component_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Cancel:
    job_id: int
    message: str


@dataclass(frozen=True)
class Bind:
    """The job runs: put ``pods`` on its nodes, ``tasks_per_node`` pods on each Slurm
    node (None: one each, the job has a node per pod). A heterogeneous job binds by
    ``parts``: the pods of component k on component k's nodes."""

    job: JobSnapshot
    pods: tuple[PodView, ...] = field(default=())
    tasks_per_node: tuple[tuple[str, int], ...] | None = None
    parts: tuple[BindPart, ...] = ()


@dataclass(frozen=True)
class BindPart:
    """One component's share of a :class:`Bind`."""

    nodes: tuple[str, ...]
    pods: tuple[PodView, ...]
    tasks_per_node: tuple[tuple[str, int], ...] | None = None
    job_id: int = 0  # the component's own job id (its allocation: DRA devices)


@dataclass(frozen=True)
class Pending:
    """The job waits in Slurm: link every pod to it (noting ``spec_hash``, the spec it was
    made from) and show Slurm's reason; unless ``quiet``: Slurm has not looked at the new
    job yet, and most jobs start at that first scheduling pass, their pods then linked
    and bound in one go."""

    job_id: int
    message: str
    spec_hash: str | None = None
    quiet: bool = False
    # Slurm's plan for the job, as the message tells it (None: the message tells none)
    plan: Plan | None = None


@dataclass(frozen=True)
class Ended:
    """The job ended before its pods were bound (scancel, time limit ...)."""

    job_id: int
    message: str


@dataclass(frozen=True)
class ReadJob:
    """The pods' record of the job says something must change (a member gone, a new
    spec ...), but the job may have started since: read it, then decide again."""

    job_id: int


@dataclass(frozen=True)
class AwaitSweep:
    """A new job is due, but an earlier scheduler's job may exist: the start-up sweep
    says, and the group is processed again when it ends."""


@dataclass(frozen=True)
class Unreachable:
    """Slurm cannot be reached: nothing that needs it is tried (no blind submit); the
    pods say so instead of a stale reason."""

    message: str


Decision = (
    Wait
    | Reject
    | Submit
    | Update
    | Cancel
    | Bind
    | Pending
    | Ended
    | ReadJob
    | AwaitSweep
    | Unreachable
)


# JobSpec fields newer than the hashes pending jobs carry: left out while unset, so a job
# without a topology request (or a plain job: no het_components) keeps its hash across
# the upgrade (no Update of every pending job).
_HASHED_WHEN_SET = ("segment_size", "required_switches", "wait_for_switch_seconds")


def spec_hash(spec: JobSpec) -> str:
    """A short stable hash of everything Slurm-relevant in ``spec`` (not the comment,
    which carries the hash itself)."""
    unset = {f for f in _HASHED_WHEN_SET if getattr(spec, f) is None}
    if not spec.het_components:
        unset.add("het_components")
    data = spec.model_dump_json(exclude={"comment", *unset})
    return hashlib.sha256(data.encode()).hexdigest()[:12]


TOPOLOGY_NOTE = "; topology request: "


def topology_note(spec: JobSpec | None) -> str:
    """The job's topology request in words (empty: none), so a pod waiting for a block or
    a leaf switch says so next to Slurm's reason (docs/topology.md)."""
    if spec is None:
        return ""
    parts = []
    if spec.segment_size is not None:
        parts.append(f"segments of {spec.segment_size} nodes, each inside one block")
    if spec.required_switches is not None:
        n = spec.required_switches
        wait = (
            f"{spec.wait_for_switch_seconds} s"
            if spec.wait_for_switch_seconds is not None
            else "max_switch_wait"
        )
        parts.append(f"at most {n} leaf switch{'es' if n > 1 else ''}, waiting up to {wait}")
    return TOPOLOGY_NOTE + " and ".join(parts) if parts else ""


def shown_plan(job: JobSnapshot, now: datetime) -> Plan:
    """The plan a pending job's pods show at ``now``: Slurm's, or the bridge's where
    Slurm's backfill is whole-node pessimistic (:func:`bridge.expected.choose`). A job
    backfill plans (its reason ``Priority``, ``Resources`` or none) that the bridge has
    not planned yet shows no plan until it has (at most one plan refresh): its first
    plan shown is then the better one."""
    return plan_shown(job.start_time, job.reason, job.queue, now)


def plan_shown(
    start_time: datetime | None, reason: str | None, queue: QueueStart | None, now: datetime
) -> Plan:
    """:func:`shown_plan` of a job whose ``start_time`` (Slurm's plan), ``reason`` and
    bridge's plan ``queue`` are these."""
    slurm = plan_of(start_time, now)
    if queue is None:
        plannable = (reason or "") in PLANNABLE_REASONS
        return NO_PLAN_YET if plannable and slurm.start is not None else slurm
    return choose(slurm, queue.start, queue.whole)


_JOB_PREFIX = "Slurm job "
_IS_PENDING = " is pending: "


def pending_message(
    job: JobSnapshot,
    spec: JobSpec | None = None,
    plan: Plan | None = None,
    now: datetime | None = None,
) -> str:
    """What a pod of a pending job says: Slurm's reason, then the topology note if any,
    then Slurm's plan when ``plan`` is given (:func:`bridge.expected.note`, at ``now``;
    read back by :func:`parse_pending`)."""
    reason = job.reason or "None"
    text = f"{_JOB_PREFIX}{job.job_id}{_IS_PENDING}{reason}{het_note(job)}{topology_note(spec)}"
    if plan is not None and now is not None:
        text += note(plan, now)
    return text


HET_NOTE = " (hetjob component "


def het_note(job: JobSnapshot) -> str:
    """Which component's reason a hetjob's pods show (Slurm gives one per component)."""
    if not job.parts or job.shown is None:
        return ""
    return f"{HET_NOTE}{job.job_id}+{job.shown} of {len(job.parts)})"


def parse_pending(message: str) -> tuple[int, str] | None:
    """(job id, Slurm's reason) from a message :func:`pending_message` wrote, without the
    hetjob and topology notes (the reason may be empty); None for any other message."""
    head, sep, rest = strip_note(message).partition(_IS_PENDING)
    job_id = head[len(_JOB_PREFIX) :] if head.startswith(_JOB_PREFIX) else ""
    if not sep or not job_id.isdigit():
        return None
    return int(job_id), rest.partition(TOPOLOGY_NOTE)[0].partition(HET_NOTE)[0]


def pending_reason(message: str, job_id: int) -> str | None:
    """The reason :func:`pending_message` put in ``message`` for ``job_id``, else None."""
    parsed = parse_pending(message)
    return (parsed[1] or None) if parsed is not None and parsed[0] == job_id else None


def _bind(job: JobSnapshot, pods: tuple[PodView, ...]) -> Bind:
    """Bind ``pods`` to the running ``job``: one pod per node, unless the job shares its
    nodes or has fewer nodes than pods; then as many per node as Slurm's CPUs there hold
    tasks, or (CPUs unknown) spread evenly as Slurm's block distribution does. A
    heterogeneous job does this per component, with the pods its back-link names."""
    if job.parts:
        out = []
        for part in job.parts:
            mine = set(part.pods)
            view = JobSnapshot(
                part.job_id,
                part.state,
                nodes=part.nodes,
                shared=part.shared,
                cpus=part.cpus,
                cpus_per_task=part.cpus_per_task,
            )
            one = _bind(view, tuple(p for p in pods if p.key in mine))
            out.append(BindPart(part.nodes, one.pods, one.tasks_per_node, part.job_id))
        return Bind(job, tuple(p for b in out for p in b.pods), None, tuple(out))
    if not job.shared and len(job.nodes) >= len(pods):
        return Bind(job, pods)
    # pods already bound are not here: spread what is left
    per_node = tasks_per_node_even(job.nodes, max(len(pods), len(job.nodes)))
    if job.cpus and job.cpus_per_task:
        per_node = {n: max(c // job.cpus_per_task, 1) for n, c in job.cpus}
    return Bind(job, pods, tuple(per_node.items()))


def decide(snap: GroupSnapshot) -> Decision:
    """What to do next for one group. Pure."""
    d = _next_step(snap)
    # A pending job known from the pods is left to the poller; anything else is read (a
    # job in a state the poller does not follow is read again by its cycle).
    job = snap.job
    if (
        snap.job_unread
        and job is not None
        and (not isinstance(d, Pending) or job.state != "PENDING")
    ):
        return ReadJob(job.job_id)
    if isinstance(d, Submit) and not snap.may_create:
        return AwaitSweep()
    if snap.slurm_unreachable and isinstance(d, Submit | Update | Cancel | Pending):
        return Unreachable(snap.slurm_unreachable)
    if isinstance(d, Submit):
        how, why = _start_of(d.spec, snap.immediate_allocation, snap.partition)
        return Submit(d.spec, d.spec_hash, how, why)
    return d


def decide_start(d: Submit, snap: GroupSnapshot, part: PartitionView) -> Submit:
    """``d`` (:func:`decide`'s Submit for ``snap``) decided again on the partition as it
    is now (``part``): only how the job starts can change, so this equals
    ``decide(replace(snap, partition=part))`` without deciding the rest again (its
    spec hash, about 2% of a lone pod's CPU, is computed once)."""
    how, why = _start_of(d.spec, snap.immediate_allocation, part)
    return Submit(d.spec, d.spec_hash, how, why)


def _start_of(spec: JobSpec, mode: str, part: PartitionView | None) -> tuple[str, str]:
    """How a new job of ``spec`` is started (:func:`start_how`, and what it cannot see)."""
    if not spec.external:
        return SUBMIT, "not an external job"
    if spec.user_id is not None or spec.group_id is not None:
        # job/allocate (Slurm 26.05) runs the job as the token's user whatever user_id and
        # group_id say: a job with an identity (namespacePolicies) is always queued.
        return SUBMIT, "a job with a user or group identity is queued"
    return start_how(mode, shape_of(spec), part or PartitionView())


def _next_step(snap: GroupSnapshot) -> Decision:
    """What the group's pods and job call for, Slurm's reachability aside."""
    have, want = len(snap.pods), snap.expected
    job = snap.job
    if job is not None and job.state in JOB_ENDED_STATES:
        which = f" (hetjob component {job.job_id}+{job.shown})" if job.parts else ""
        return Ended(
            job.job_id,
            f"Slurm job {job.job_id} ended before allocation: {job.state}"
            + (f" ({job.reason})" if job.reason and job.reason != "None" else "")
            + which,
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
                snap.waiting_for
                or f"waiting for group {snap.group.key}: {have} of {want} pods exist",
            )
    if job is not None and job.state == "RUNNING" and job.nodes:
        # Allocated: bind what is unbound. Members missing from the snapshot were bound
        # already (a restart mid-bind), and then the group translates as incomplete, with
        # no spec: binding the rest must not depend on it.
        return _bind(job, snap.pods)
    if snap.invalid is not None:
        return Reject(str(snap.invalid))
    if snap.spec is None:
        return Reject(f"group {snap.group.key}: no job spec")
    h = spec_hash(snap.spec)
    if job is None:
        return Submit(snap.spec, h)
    quiet = snap.job_reason_awaited
    if job.state == "PENDING":
        if job.spec_hash is not None and job.spec_hash != h:
            if len(job.parts or (job,)) != len(snap.spec.components):
                # components cannot be added to or taken from a pending hetjob
                return Cancel(
                    job.job_id,
                    f"group {snap.group.key} now has {len(snap.spec.components)} shape(s), "
                    f"its pending job {len(job.parts or (job,))}: submitted anew",
                )
            return Update(job.job_id, snap.spec, h, tuple(p.job_id for p in job.parts))
        if snap.now is None:
            return Pending(job.job_id, pending_message(job, snap.spec), job.spec_hash, quiet)
        plan = shown_plan(job, snap.now)
        message = pending_message(job, snap.spec, plan, snap.now)
        return Pending(job.job_id, message, job.spec_hash, quiet, plan)
    # RUNNING without its nodes yet, SUSPENDED ...: wait for Slurm to settle. The poller
    # follows PENDING jobs only, so the cycle reads this one again (scheduler.cycle).
    return Pending(job.job_id, f"Slurm job {job.job_id} is {job.state}", job.spec_hash, quiet)


# --- how a new job is started -----------------------------------------------------------
ALLOCATE = "allocate"  # POST job/allocate, immediate: RUNNING when it answers, or refused
SUBMIT = "submit"  # POST job/submit, queued: Slurm's next scheduling pass starts it


@dataclass(frozen=True)
class Shape:
    """What a job asks of the partition, as far as "can it start now" goes."""

    nodes: int
    cpus_per_node: int  # whole nodes when exclusive
    memory_per_node_mib: int = 0  # 0: not asked
    exclusive: bool = False
    # priority 0: Slurm holds the job until someone releases it, and refuses to start it
    # at once (2038, "Job dependency problem")
    held: bool = False
    # a heterogeneous job: Slurm never starts one at once (2078, docs/hetjob.md)
    heterogeneous: bool = False

    def covers(self, other: Shape) -> bool:
        """At least as much as ``other`` everywhere: when ``other`` was refused for lack
        of free room, this would be too."""
        return (
            self.nodes >= other.nodes
            and self.cpus_per_node >= other.cpus_per_node
            and self.memory_per_node_mib >= other.memory_per_node_mib
            and (self.exclusive or not other.exclusive)
        )


def shape_of(spec: JobSpec) -> Shape:
    """The job's smallest footprint: ``min_nodes`` nodes, and per node the fewest tasks
    Slurm may put there (a job that may span up to ``max_nodes`` nodes is spread that
    thin at best: 256 shared 1-CPU pods on 1-256 nodes need 1 CPU on a node, not 256)."""
    nodes = spec.min_nodes
    spread = max(nodes, spec.max_nodes or nodes)
    per_node = spec.tasks_per_node or -(-spec.tasks // spread)
    cpus = per_node * spec.cpus_per_task
    mem = spec.memory_per_node_mib or (spec.memory_per_cpu_mib or 0) * cpus
    return Shape(
        nodes,
        cpus,
        mem,
        spec.exclusive,
        held=spec.priority == 0,
        heterogeneous=spec.heterogeneous,
    )


@dataclass(frozen=True)
class PartitionView:
    """What the bridge knows of the partition a new job goes to, without asking Slurm."""

    pending: int = 0  # the bridge's own jobs pending there
    refused: tuple[Shape, ...] = ()  # shapes Slurm refused to start at once, recently
    nodes: int | None = None  # Slurm nodes in it (None: unknown)
    max_node_cpus: int | None = None
    max_node_memory_mib: int | None = None


def start_how(mode: str, shape: Shape, part: PartitionView) -> tuple[str, str]:
    """(ALLOCATE or SUBMIT, why): try to start the job at once only when nothing the bridge
    knows says Slurm would refuse (a refused try costs an RPC and leaves a FAILED record
    operators see). Slurm itself never starts an immediate job ahead of a job pending in
    its partition (2013, "insufficient priority"); the bridge does not even ask then."""
    if mode == "never":
        return SUBMIT, "immediateAllocation is never"
    if shape.held:
        return SUBMIT, "a held job (priority 0) waits for its release"
    if shape.heterogeneous:
        return SUBMIT, "Slurm cannot start a heterogeneous job at once (2078)"
    if part.pending:
        return SUBMIT, "jobs pending in the partition go first"
    if part.nodes is not None and shape.nodes > part.nodes:
        return SUBMIT, "more nodes than the partition has"
    if not shape.exclusive and part.max_node_cpus and shape.cpus_per_node > part.max_node_cpus:
        return SUBMIT, "more CPUs per node than its largest node"
    if (
        part.max_node_memory_mib
        and shape.memory_per_node_mib
        and shape.memory_per_node_mib > part.max_node_memory_mib
    ):
        return SUBMIT, "more memory per node than its largest node"
    if any(shape.covers(r) for r in part.refused):
        return SUBMIT, "a job this size was just refused"
    return ALLOCATE, "free capacity is likely"
