"""Starting a group's job: at once (``job/allocate``, immediate) when the start rule
(:func:`scheduler.decide.start_how`) says Slurm can, else (or when Slurm refuses) queued
(``job/submit``). Immediate tries per partition go through an allocation window, so a
burst on a full partition costs ONE refused try, not one per worker.

Figures behind these choices (start latency, refused tries, read costs):
docs/benchmarks.md, "The scheduler's measured choices".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import structlog

from bridge.bounded import BoundedMap
from bridge.clock import Clock
from bridge.config import BridgeConfig
from bridge.errors import KubeError, SlurmError, SlurmRejected, SlurmUnavailable
from bridge.kube.resources import KubeObject
from bridge.models import JobSpec
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import ALLOCATE_MARK, Allocated, JobState, SlurmJob
from bridge.workqueue import WorkQueue
from scheduler.decide import (
    ALLOCATE,
    REASON_UNSCHEDULABLE,
    Bind,
    PartitionView,
    PodView,
    Shape,
    Submit,
    bind,
    shape_of,
    start_how,
)
from scheduler.jobs import SPEC_MARK, SlurmJobs, job_view
from scheduler.metrics import SchedulerMetrics
from scheduler.report import Reporter
from scheduler.state import GroupState

log = structlog.get_logger("scheduler")

# A shape Slurm refused to start at once is not tried again in its partition for this
# long (a group refused now is queued, and then its pending job holds the others back).
REFUSED_MEMORY_SECONDS = 2.0
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


# Work on a job started at once that needs only its id (a lone pod's link), done while
# Slurm is asked for its nodes.
Alongside = Callable[[int], Awaitable[object]]


async def _settled(work: asyncio.Future[object]) -> None:
    """``work`` ended; a failed write is only logged: the binding step writes it again."""
    try:
        await work
    except KubeError as e:
        log.info("early_link_failed", error=str(e))


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
        jobs: SlurmJobs,
        report: Reporter,
        queue: WorkQueue[str],
        metrics: SchedulerMetrics,
    ) -> None:
        self.cfg = cfg
        self.slurm = slurm
        self.clock = clock
        self.jobs = jobs
        self.report = report
        self.queue = queue
        self.metrics = metrics
        # Per partition, which a pod names (tenant text, checked by Slurm only later):
        # bounded. A window dropped while in use only restarts its probe at one.
        self._refused: BoundedMap[str, list[tuple[float, Shape]]] = BoundedMap(
            "scheduler-refused-shapes", PARTITIONS_MAX
        )  # partition -> (when, shape)
        self._windows: BoundedMap[str, AllocationWindow] = BoundedMap(
            "scheduler-allocation-windows", PARTITIONS_MAX
        )

    def partition_view(self, part: str) -> PartitionView:
        """What the start rule knows of ``part``: the bridge's jobs pending there, shapes
        refused lately, its size."""
        now = self.clock.monotonic()
        refused = self._refused.get(part)
        if refused:
            refused[:] = [(t, sh) for t, sh in refused if now - t < REFUSED_MEMORY_SECONDS]
        size = self.jobs.partition_size.get(part, PartitionView())
        return PartitionView(
            pending=len(self.jobs.pending_in.get(part, ())),
            refused=tuple(sh for _, sh in refused or ()),
            nodes=size.nodes,
            max_node_cpus=size.max_node_cpus,
            max_node_memory_mib=size.max_node_memory_mib,
        )

    async def start(
        self,
        g: GroupState,
        d: Submit,
        pods: list[KubeObject],
        views: tuple[PodView, ...],
        alongside: Alongside | None = None,
    ) -> Bind | None:
        """A new job for the group; a Bind when Slurm started it at once (the cycle binds
        it now), else None (queued, or failed and said to the pods). ``alongside``: what
        the cycle does with the id of a job started at once while its nodes are read."""
        part, shape = d.spec.partition or "", shape_of(d.spec)
        mode = self.cfg.scheduler.immediate_allocation
        how, why = start_how(mode, shape, self.partition_view(part))
        # job/allocate (Slurm 26.05) runs the job as the token's user whatever user_id
        # and group_id say: a job with an identity (namespacePolicies) is always queued.
        spec = d.spec
        if how == ALLOCATE and spec.external and spec.user_id is None and spec.group_id is None:
            window = self._windows.setdefault(part, AllocationWindow())
            async with window.cond:
                if window.in_flight == 0 and (
                    self.clock.monotonic() - window.last > PROBE_AFTER_IDLE_SECONDS
                ):
                    window.size = 1
                await window.cond.wait_for(lambda: window.in_flight < window.size)
                window.in_flight += 1
            # True: started (or failed, said to the pods); False: refused or rejected,
            # so it is queued and job/submit gives Slurm's verdict.
            started: bool | None = None
            running: Bind | None = None
            try:
                # Decided again: a try that ended while this one waited may have been refused.
                how, why = start_how(mode, shape, self.partition_view(part))
                if how == ALLOCATE:
                    started, running = await self._allocate(g, d, pods, views, alongside)
            finally:
                async with window.cond:
                    window.in_flight -= 1
                    window.last = self.clock.monotonic()
                    if started is not None:
                        cap = self.cfg.scheduler.workers
                        window.size = min(window.size * 2, cap) if started else 1
                    window.cond.notify_all()
            if started:
                return running
        log.debug("job_queued", why=why)
        await self._submit(g, d, pods)
        return None

    async def _allocate(
        self,
        g: GroupState,
        d: Submit,
        pods: list[KubeObject],
        views: tuple[PodView, ...],
        alongside: Alongside | None,
    ) -> tuple[bool, Bind | None]:
        """Try to start the job now: (False, None) when Slurm refused or rejected it (queue
        it instead); (True, a Bind) when it runs; (True, None) when it is known otherwise."""
        t0 = time.monotonic()
        stamped = with_hash_in_comment(d.spec, d.spec_hash, started_now=True)
        try:
            outcome = await self.slurm.allocate(stamped)
        except SlurmRejected as e:
            # Refused for a reason the rule does not know (a hold, a dependency, licenses):
            # queue it, and job/submit gives Slurm's verdict on the job itself.
            log.info("allocation_rejected", error=str(e))
            return False, None
        except SlurmError as e:
            await self._submit_failed(g, e, pods)
            return True, None
        if not isinstance(outcome, Allocated):
            # Refused: a FAILED record stays in Slurm (never taken for the group's job,
            # SlurmJob.refused_allocation); the same shape is not tried again for a while.
            self.metrics.allocations_refused.inc()
            self._refused.setdefault(d.spec.partition or "", []).append(
                (self.clock.monotonic(), shape_of(d.spec))
            )
            log.info("allocation_refused", error=outcome.error_number, why=outcome.message)
            return False, None
        self.metrics.jobs_allocated.inc()
        # RUNNING already: one read for its nodes, then bound in this same cycle. Should
        # the read fail, the job is known by id and the poller reads it.
        known = self._created(g, d.spec, stamped, outcome.job_id, t0)
        beside = asyncio.ensure_future(alongside(outcome.job_id)) if alongside else None
        try:
            g.job = await self._allocated_job(known, len(pods))
        except SlurmError:
            self.jobs.watch(g, known)
            raise
        finally:
            if beside is not None:
                await _settled(beside)
        log.info("job_allocated", job_id=outcome.job_id, pods=len(pods), nodes=len(g.job.nodes))
        if g.job.state.primary == "RUNNING" and g.job.nodes:
            return True, bind(job_view(g.job), views)
        if g.job.state.primary == "PENDING":
            self.jobs.watch(g, g.job)
        self.queue.add(g.ref.key)
        return True, None

    async def _allocated_job(self, known: SlurmJob, pods: int) -> SlurmJob:
        """The job Slurm just started at once, as binding needs it. One pod: only its node,
        from ``GET /resources/{id}`` (about half the cost of a whole record, see
        docs/benchmarks.md); more pods: the record (how many CPUs each node holds decides
        how many pods go there)."""
        if pods == 1:
            nodes = tuple(r.node for r in await self.slurm.get_job_resources(known.job_id))
            if nodes:
                running = JobState(primary="RUNNING")
                return known.model_copy(update={"state": running, "nodes": nodes})
        return await self.slurm.get_job(known.job_id)

    async def _submit_failed(self, g: GroupState, e: SlurmError, pods: list[KubeObject]) -> None:
        if isinstance(e, SlurmUnavailable):
            # The job may exist: never submit blindly again (see DESIGN: known traps).
            g.uncertain_submit = True
            raise e
        await self.report.unschedulable(
            pods, REASON_UNSCHEDULABLE, f"Slurm rejected the job: {e}", warning=True
        )
        self.queue.add_rate_limited(g.ref.key, base=self.cfg.scheduler.reject_backoff_seconds)

    async def _submit(self, g: GroupState, d: Submit, pods: list[KubeObject]) -> None:
        t0 = time.monotonic()
        stamped = with_hash_in_comment(d.spec, d.spec_hash)
        try:
            job_id = await self.slurm.submit(stamped)
        except SlurmError as e:
            await self._submit_failed(g, e, pods)
            return
        self.metrics.jobs_submitted.inc()
        if d.spec.heterogeneous:
            self.metrics.hetjobs_submitted.inc()
            self.metrics.hetjob_components_submitted.inc(len(d.spec.components))
        log.info("job_submitted", job_id=job_id, pods=len(pods), components=len(d.spec.components))
        # No GET here: slurmctld starts an external job at its next scheduling pass, never
        # in the submit RPC (docs/benchmarks.md), so the job is pending now. The poller's
        # next tick sees it start (one GET then) or reads its reason.
        self.jobs.watch(g, self._created(g, d.spec, stamped, job_id, t0))
        self.queue.add(g.ref.key)

    def _created(
        self, g: GroupState, spec: JobSpec, stamped: JobSpec, job_id: int, t0: float
    ) -> SlurmJob:
        """Slurm gave ``g`` the job ``job_id`` (submitted or allocated): known by id and
        taken as pending until it is read. Returns that job, now ``g.job``."""
        self.metrics.submit_seconds.observe(time.monotonic() - t0)
        g.job_spec = spec
        self.queue.forget(g.ref.key)
        g.job = SlurmJob(
            job_id=job_id,
            name=spec.name,
            state=JobState(primary="PENDING"),
            partition=spec.partition or "",
            comment=stamped.comment,
            admin_comment=spec.admin_comment,
        )
        return g.job
