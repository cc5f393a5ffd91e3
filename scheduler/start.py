"""Starting a group's job as the Submit decision says (:attr:`scheduler.decide.Submit.start`):
at once (``job/allocate``, immediate) or queued (``job/submit``), and queued too when Slurm
refuses to start it at once. Immediate tries per partition go through an allocation window
(:meth:`Starter.allocation_turn`), so a burst on a full partition costs ONE refused try, not
one per worker. The Starter decides nothing: it carries the decision out and answers what
came of it (:class:`Started`); the cycle keeps the job and requeues.

Figures behind these choices (start latency, refused tries, read costs):
docs/benchmarks.md, "The scheduler's measured choices".
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

import structlog

from bridge.bounded import BoundedMap
from bridge.clock import Clock
from bridge.config import BridgeConfig
from bridge.errors import KubeError, SlurmError, SlurmRejected, SlurmUnavailable
from bridge.kube.resources import KubeObject
from bridge.models import JobSpec
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import (
    ALLOCATE_MARK,
    Allocated,
    AllocatedNode,
    JobState,
    NodeResources,
    SlurmJob,
)
from scheduler.decide import REASON_UNSCHEDULABLE, Submit, shape_of
from scheduler.metrics import SchedulerMetrics
from scheduler.outcome import NOW, REFUSED, Outcome, failed
from scheduler.report import Reporter
from scheduler.slurm_state import SlurmState
from scheduler.snapshot import SPEC_MARK

log = structlog.get_logger("scheduler")

# An allocation window falls back to one try in flight (a probe) after this long without
# a try: the partition may have filled meanwhile.
PROBE_AFTER_IDLE_SECONDS = 1.0
# Partitions (named by pods) the start rule remembers windows and refusals of, at most.
PARTITIONS_MAX = 1024


@dataclass
class AllocationWindow:
    """Immediate allocations in flight in one partition: the window starts at 1 (a probe),
    doubles with each success up to the workers, and falls back to 1 on a refusal and
    after PROBE_AFTER_IDLE_SECONDS without a try."""

    cond: asyncio.Condition = field(default_factory=asyncio.Condition)
    size: int = 1
    in_flight: int = 0
    last: float = float("-inf")


@dataclass
class AllocationTurn:
    """One try's turn in its partition's window; ``started`` (True: Slurm started it or
    said why not; False: refused) sizes the window when the turn ends (None: unchanged)."""

    started: bool | None = None


@dataclass(frozen=True)
class Started:
    """What starting a group's job came to: the job Slurm gave it (``job``: as it is known
    now, pending until read; None: none was made), made from ``spec``; ``uncertain``: the
    answer was lost, so the job may exist (looked up by identity before any new submit);
    ``outcome``: what the cycle does next."""

    outcome: Outcome
    job: SlurmJob | None = None
    spec: JobSpec | None = None
    uncertain: bool = False

    @property
    def running(self) -> bool:
        """Slurm started it at once and its nodes are known: it is bound in this cycle."""
        return self.job is not None and self.job.state.primary == "RUNNING" and bool(self.job.nodes)


# Work on a job started at once that needs only its id (a lone pod's link), done while
# Slurm is asked for its nodes.
Alongside = Callable[[int], Awaitable[object]]


async def _settled(work: asyncio.Future[object]) -> None:
    """``work`` ended; a failed write is only logged: the binding step writes it again."""
    try:
        await work
    except KubeError as e:
        log.info("early_link_failed", error=str(e))


def held_job(
    known: SlurmJob,
    spec: JobSpec,
    held: Sequence[NodeResources],
    node_cpus: Mapping[str, int],
    pods: int,
) -> SlurmJob | None:
    """``known`` (a job just started at once from ``spec``) as RUNNING on the nodes of
    ``held`` (its ``GET /resources``, in Slurm's node order), or None when that does not
    say what its record would. One pod needs its node only. A group needs the CPUs held
    on each node (:func:`scheduler.decide._bind`: a node takes CPUs / cpus_per_task
    pods), which the core bitmap gives only on a node of one thread per core (its CPUs,
    from Slurm's node list, are its sockets x cores): else None, and the record is read.
    ``shared`` is what the job was submitted with (26.05's record shows none at all;
    only "none" in it is read, see :func:`scheduler.snapshot.job_view`)."""
    if not held:
        return None
    nodes = tuple(r.node for r in held)
    running = JobState(primary="RUNNING")
    if pods == 1:
        return known.model_copy(update={"state": running, "nodes": nodes})
    allocation = []
    for r in held:
        cores = (r.sockets_per_node or 0) * (r.cores_per_socket or 0)
        if not cores or node_cpus.get(r.node) != cores or not r.cores:
            return None  # threads per core unknown, or more than one
        allocation.append(AllocatedNode(name=r.node, cpus=len(r.cores)))
    return known.model_copy(
        update={
            "state": running,
            "nodes": nodes,
            "allocation": tuple(allocation),
            "cpus_per_task": spec.cpus_per_task,
            "shared": ("none",) if spec.exclusive else (),
        }
    )


def with_hash_in_comment(spec: JobSpec, spec_hash: str, *, started_now: bool = False) -> JobSpec:
    """``spec`` whose comment ends with ``spec=<hash>`` (and ``start=now`` for a job
    started at once): how a restarted scheduler tells whether the job is still current."""
    mark = f" {ALLOCATE_MARK}" if started_now else ""
    return spec.model_copy(update={"comment": f"{spec.comment}{SPEC_MARK}{spec_hash}{mark}"})


class Starter:
    def __init__(
        self,
        cfg: BridgeConfig,
        slurm: SlurmClient,
        clock: Clock,
        slurm_state: SlurmState,
        report: Reporter,
        metrics: SchedulerMetrics,
    ) -> None:
        self.cfg = cfg
        self.slurm = slurm
        self.clock = clock
        self.slurm_state = slurm_state
        self.report = report
        self.metrics = metrics
        # Per partition, which a pod names (tenant text, checked by Slurm only later):
        # bounded. A window dropped while in use only restarts its probe at one.
        self._windows: BoundedMap[str, AllocationWindow] = BoundedMap(
            "scheduler-allocation-windows", PARTITIONS_MAX
        )

    @contextlib.asynccontextmanager
    async def allocation_turn(self, partition: str) -> AsyncIterator[AllocationTurn]:
        """Wait for a turn to try ``job/allocate`` in ``partition`` (the window's size of
        tries in flight at once)."""
        window = self._windows.setdefault(partition, AllocationWindow())
        async with window.cond:
            if window.in_flight == 0 and (
                self.clock.monotonic() - window.last > PROBE_AFTER_IDLE_SECONDS
            ):
                window.size = 1
            await window.cond.wait_for(lambda: window.in_flight < window.size)
            window.in_flight += 1
        turn = AllocationTurn()
        try:
            yield turn
        finally:
            async with window.cond:
                window.in_flight -= 1
                window.last = self.clock.monotonic()
                if turn.started is not None:
                    cap = self.cfg.scheduler.workers
                    window.size = min(window.size * 2, cap) if turn.started else 1
                window.cond.notify_all()

    async def allocate(
        self,
        d: Submit,
        pods: list[KubeObject],
        turn: AllocationTurn,
        alongside: Alongside | None = None,
    ) -> Started | None:
        """Try to start the job now (in ``turn``): None when Slurm refused or rejected it
        (queue it instead: :meth:`submit`). ``alongside``: what the cycle does with the id
        of a job started at once while its nodes are read."""
        t0 = time.monotonic()
        stamped = with_hash_in_comment(d.spec, d.spec_hash, started_now=True)
        try:
            outcome = await self.slurm.allocate(stamped)
        except SlurmRejected as e:
            # Refused for a reason the rule does not know (a hold, a dependency, licenses):
            # queue it, and job/submit gives Slurm's verdict on the job itself.
            log.info("allocation_rejected", error=str(e))
            turn.started = False
            return None
        except SlurmError as e:
            started = await self._failed(e, pods)
            turn.started = None if started.uncertain else True
            return started
        if not isinstance(outcome, Allocated):
            # Refused: a FAILED record stays in Slurm (never taken for the group's job,
            # SlurmJob.refused_allocation); the same shape is not tried again for a while.
            self.metrics.allocations_refused.inc()
            self.slurm_state.refused(d.spec.partition or "", shape_of(d.spec))
            log.info("allocation_refused", error=outcome.error_number, why=outcome.message)
            turn.started = False
            return None
        self.metrics.jobs_allocated.inc()
        # RUNNING already: one read for its nodes, then bound in this same cycle. Should
        # the read fail, the job is known by id and the poller reads it.
        known = self._created(d.spec, stamped, outcome.job_id, t0)
        beside = asyncio.ensure_future(alongside(outcome.job_id)) if alongside else None
        try:
            job = await self._allocated_job(known, d.spec, len(pods))
        except SlurmError as e:
            return Started(failed(e, forget=True), known, d.spec)
        finally:
            if beside is not None:
                await _settled(beside)
        log.info("job_allocated", job_id=outcome.job_id, pods=len(pods), nodes=len(job.nodes))
        turn.started = True
        return Started(Outcome(NOW.requeue, forget=True), job, d.spec)

    async def _allocated_job(self, known: SlurmJob, spec: JobSpec, pods: int) -> SlurmJob:
        """The job Slurm just started at once, as binding needs it: its nodes and, for a
        group, the CPUs it holds on each (how many pods go there). Read from
        ``GET /resources/{id}`` (what it holds per node) where that says it all, else from
        the job's whole record: a 256-task job's record took slurmrestd 24-115 ms against
        2 ms for its resources (measured on the bench sandbox, docs/benchmarks.md), and
        the binding waits for it."""
        if not spec.heterogeneous:  # a hetjob's components are read with its record
            held = await self.slurm.get_job_resources(known.job_id)
            job = held_job(known, spec, held, self.slurm_state.node_cpus, pods)
            if job is not None:
                return job
        return await self.slurm.get_job(known.job_id)

    async def _failed(self, e: SlurmError, pods: list[KubeObject]) -> Started:
        """Slurm did not take the job: unreachable (the answer may be lost: the job may
        exist, so it is looked up by identity before a new submit, see docs/scheduler.md,
        "Restart safety"), or refused it (said to the pods, retried after the reject
        backoff)."""
        if isinstance(e, SlurmUnavailable):
            return Started(failed(e), uncertain=True)
        await self.report.unschedulable(
            pods, REASON_UNSCHEDULABLE, f"Slurm rejected the job: {e}", warning=True
        )
        return Started(REFUSED)

    async def submit(self, d: Submit, pods: list[KubeObject]) -> Started:
        """Queue the job (``job/submit``)."""
        log.debug("job_queued", why=d.why)
        t0 = time.monotonic()
        stamped = with_hash_in_comment(d.spec, d.spec_hash)
        try:
            job_id = await self.slurm.submit(stamped)
        except SlurmError as e:
            return await self._failed(e, pods)
        self.metrics.jobs_submitted.inc()
        if d.spec.heterogeneous:
            self.metrics.hetjobs_submitted.inc()
            self.metrics.hetjob_components_submitted.inc(len(d.spec.components))
        log.info("job_submitted", job_id=job_id, pods=len(pods), components=len(d.spec.components))
        # No GET here: slurmctld starts an external job at its next scheduling pass, never
        # in the submit RPC (docs/benchmarks.md), so the job is pending now. The poller's
        # next tick sees it start (one GET then) or reads its reason.
        job = self._created(d.spec, stamped, job_id, t0)
        return Started(Outcome(NOW.requeue, forget=True), job, d.spec)

    def _created(self, spec: JobSpec, stamped: JobSpec, job_id: int, t0: float) -> SlurmJob:
        """Slurm gave the group the job ``job_id`` (submitted or allocated): known by id
        and taken as pending until it is read."""
        self.metrics.submit_seconds.observe(time.monotonic() - t0)
        return SlurmJob(
            job_id=job_id,
            name=spec.name,
            state=JobState(primary="PENDING"),
            partition=spec.partition or "",
            comment=stamped.comment,
            admin_comment=spec.admin_comment,
        )
