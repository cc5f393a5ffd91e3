"""The scheduling cycle: pending pods -> one Slurm placeholder job per group -> bound pods.

One sequential worker per group (:mod:`bridge.workqueue`); :meth:`Scheduler.process` is
one group's cycle, in numbered steps, one call each:

1. the group's unbound pods, from the watch-fed cache (:mod:`scheduler.state`); a group
   with none left is dropped;
2. snapshot: its Kubernetes facts, translated, and its Slurm facts (:mod:`scheduler.jobs`);
3. decide, once, purely (:mod:`scheduler.decide`);
4. act on what the decision says and nothing else: start a job (:mod:`scheduler.start`),
   bind (:mod:`scheduler.bind`), update or cancel in Slurm, tell the pods why they wait
   (:mod:`scheduler.report`), and requeue.

The worker requeues a group whose cycle failed, with backoff. The parts are objects the
Scheduler holds, each with one job; it wires them and runs the loops.
"""

from __future__ import annotations

import asyncio

import structlog

from bridge.clock import Clock
from bridge.config import BridgeConfig
from bridge.errors import BridgeError, KubeError, SlurmError, SlurmUnavailable
from bridge.kube.client import KubeClient
from bridge.kube.events import EventRecorder
from bridge.kube.resources import KubeObject
from bridge.loops import LoopGuard
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import SlurmJob
from bridge.translate import TranslateSettings
from bridge.workqueue import WorkQueue, run_worker
from scheduler.bind import Binder
from scheduler.decide import (
    REASON_UNSCHEDULABLE,
    AwaitSweep,
    Bind,
    Cancel,
    Decision,
    Ended,
    Pending,
    ReadJob,
    Reject,
    Submit,
    Unreachable,
    Update,
    Wait,
    decide,
)
from scheduler.dra import DraAllocator
from scheduler.jobs import SlurmJobs, Snapshot, spec_hash_of
from scheduler.metrics import SchedulerMetrics
from scheduler.outage import SlurmReachability
from scheduler.report import Reporter
from scheduler.start import Starter, with_hash_in_comment
from scheduler.state import GroupState, KubeState

log = structlog.get_logger("scheduler")

# A failed cycle is retried after 0.05 s, doubling up to scheduler.rejectBackoffMaxSeconds.
RETRY_BASE_SECONDS = 0.05
# A job in a state the poller does not follow (not PENDING) that cannot be bound yet is
# read again after this long, doubling per try (the work queue's backoff, capped).
UNSETTLED_REREAD_SECONDS = 1.0


class Scheduler:
    def __init__(
        self,
        cfg: BridgeConfig,
        kube: KubeClient,
        slurm: SlurmClient,
        clock: Clock,
        *,
        metrics: SchedulerMetrics | None = None,
        events: EventRecorder | None = None,
    ) -> None:
        self.cfg = cfg
        self.kube = kube
        self.slurm = slurm
        self.clock = clock
        self.metrics = metrics or SchedulerMetrics()
        self.queue: WorkQueue[str] = WorkQueue(
            clock,
            base_backoff=RETRY_BASE_SECONDS,
            max_backoff=cfg.scheduler.reject_backoff_max_seconds,
        )
        self.slurm_outage = SlurmReachability()
        self.state = KubeState(
            cfg, kube, TranslateSettings.from_config(cfg), self.queue, clock=clock
        )
        self.dra = DraAllocator(
            kube,
            slurm,
            device_class_gres=cfg.scheduler.device_class_gres,
            gres_mapping=cfg.scheduler.gres_table(),
        )
        self.jobs = SlurmJobs(
            kube, slurm, clock, self.state, self.dra, self.slurm_outage, self.queue
        )
        self.poller = self.jobs.poller
        self.report = Reporter(
            kube,
            events or EventRecorder(kube, cfg.scheduler_name),
            self.state,
            self.metrics,
            clock,
            self.queue,
        )
        self.jobs.on_foreign_label = self.report.foreign_label
        self.jobs.on_loop_failure = self.metrics.loop_failed
        self.starter = Starter(cfg, slurm, clock, self.jobs, self.report, self.queue, self.metrics)
        self.binder = Binder(
            cfg, kube, self.dra, self.state, self.report, self.queue, self.metrics, clock
        )

    # ------------------------------------------------------------------ entry points
    @property
    def groups(self) -> dict[str, GroupState]:
        return self.state.groups

    @property
    def swept(self) -> bool:
        return self.jobs.swept

    @property
    def jobs_by_group_uid(self) -> dict[tuple[str, str], SlurmJob]:
        return self.jobs.jobs_by_group_uid

    async def on_pod_event(self, kind: str, pod: KubeObject) -> None:
        await self.state.on_pod_event(kind, pod)

    def initial_pods_listed(self) -> None:
        self.state.initial_pods_listed()

    def on_node_event(self, kind: str, node: KubeObject) -> None:
        self.state.on_node_event(kind, node)

    def on_namespace_event(self, kind: str, ns: KubeObject) -> None:
        self.state.on_namespace_event(kind, ns)

    async def sweep(self, lists_done: asyncio.Event | None = None) -> None:
        await self.jobs.sweep(lists_done)

    async def refresh_slurm_nodes(self) -> None:
        await self.jobs.refresh_slurm_nodes()

    def update_gauges(self) -> None:
        self.report.update_gauges()

    # ------------------------------------------------------------------ one group
    async def process(self, gkey: str) -> None:
        """One cycle of the group ``gkey``."""
        g = self.state.groups.get(gkey)
        if g is None:
            return
        # 1. the group's unbound pods
        pods = self.state.pods_of(g)
        if not pods:
            self._drop(g)
            return
        # 2. snapshot: Kubernetes and Slurm facts
        snap = await self.jobs.snapshot(g, pods)
        # 3. decide
        decision = decide(snap.group)
        # 4. act
        if not isinstance(decision, AwaitSweep):
            self.metrics.attempts.labels(type(decision).__name__.lower()).inc()
        with structlog.contextvars.bound_contextvars(group=gkey):
            await self._act(g, decision, snap)

    def _drop(self, g: GroupState) -> None:
        """No pod of the group is left: forget it (and its job, no longer followed)."""
        if g.job is not None:
            self.jobs.unwatch(g.job.job_id)
        self.state.drop_group(g.ref.key)

    async def _bind(self, g: GroupState, d: Bind, pods: list[KubeObject]) -> None:
        """Bind; a job whose pods cannot be bound is given back to Slurm past the bound
        (scheduler.bindGiveUp*, :mod:`scheduler.giveback`): cancelled, taken off the pods
        (PodScheduled reason naming the failed step, a Warning event), the group queued
        afresh after the reject backoff."""
        give = await self.binder.bind(g, d, pods)
        if give is None:
            return
        await self.slurm.cancel(give.job_id)
        self.jobs.unwatch(give.job_id)
        g.job = None
        log.warning("job_given_back", job_id=give.job_id, step=give.step)
        await asyncio.gather(*(self.binder.unlink(p) for p in pods), return_exceptions=True)
        await self.report.unschedulable(pods, give.reason, give.message, warning=True)
        self.queue.add_rate_limited(g.ref.key, base=self.cfg.scheduler.reject_backoff_seconds)

    async def _act(self, g: GroupState, d: Decision, snap: Snapshot) -> None:
        pods, key = snap.pods, g.ref.key
        match d:
            case Wait(reason=reason, message=message):
                await self.report.waiting(g, pods, reason, message)
            case Reject(message=message):
                await self.report.unschedulable(pods, REASON_UNSCHEDULABLE, message, warning=True)
                self.queue.add_rate_limited(key, base=self.cfg.scheduler.reject_backoff_seconds)
            case Submit():
                linked: list[KubeObject] = []

                async def link_alone(job_id: int) -> None:
                    # a lone pod is linked to its job while Slurm is asked for its node
                    linked.append(await self.binder.link_pod_to_job(pods[0], job_id, None))

                alone = link_alone if len(pods) == 1 else None
                started = await self.starter.start(g, d, pods, snap.group.pods, alone)
                if started is not None:
                    await self._bind(g, started, linked or pods)
            case Update(job_id=job_id, spec=spec, spec_hash=h, component_ids=ids):
                stamped = with_hash_in_comment(spec, h)
                if ids:  # a pending hetjob: each component by its own id
                    for cid, part in zip(ids, stamped.components, strict=True):
                        await self.slurm.update_job(cid, part)
                else:
                    await self.slurm.update_job(job_id, stamped)
                log.info("job_updated", job_id=job_id)
                g.job = await self.slurm.get_job(job_id)
                self.queue.add(key)
            case Cancel(job_id=job_id, message=message):
                await self.slurm.cancel(job_id)
                self.jobs.unwatch(job_id)
                log.info("job_cancelled", job_id=job_id, why=message)
                g.job = None
                await asyncio.gather(*(self.binder.unlink(p) for p in pods))
                await self.report.unschedulable(pods, REASON_UNSCHEDULABLE, message)
            case Pending(job_id=job_id, message=message) if snap.group.job is not None and (
                snap.group.job.state != "PENDING"
            ):
                # Not pending, not bindable yet (RUNNING without its nodes, SUSPENDED ...):
                # the poller follows PENDING jobs only, so no tick would ever queue this
                # group again (a silent stall). Read it again after a backoff instead.
                log.info("job_not_settled", job_id=job_id, state=snap.group.job.state)
                g.unread = True
                self.queue.add_rate_limited(key, base=UNSETTLED_REREAD_SECONDS)
                await self.report.unschedulable(pods, REASON_UNSCHEDULABLE, message)
            case Pending(job_id=job_id, message=message):
                # Until Slurm has looked at a new job (its reason is still "None"), the
                # pods are left alone: most jobs start at that first scheduling pass,
                # and their pods are then linked and bound in one go (a restart in
                # between finds the job by its admin_comment). A job that stays
                # pending gets its pods linked and Slurm's reason shown.
                if not self.poller.awaits_reason(job_id):
                    made_from = spec_hash_of(g.job) if g.job is not None else None
                    await asyncio.gather(
                        *(self.binder.link_pod_to_job(p, job_id, None, made_from) for p in pods)
                    )
                    await self.report.unschedulable(pods, REASON_UNSCHEDULABLE, message)
            case Ended(job_id=job_id, message=message):
                self.jobs.unwatch(job_id)
                await self.report.unschedulable(pods, REASON_UNSCHEDULABLE, message, warning=True)
            case Bind():
                await self._bind(g, d, pods)
            case ReadJob(job_id=job_id):
                await self.jobs.read_job(g, job_id)
                self.queue.add(key)
            case AwaitSweep():
                self.jobs.after_sweep.add(key)
            case Unreachable(message=message):
                await self.report.unschedulable(pods, REASON_UNSCHEDULABLE, message, warning=True)

    # ------------------------------------------------------------------ loops
    def guard(self, loop: str) -> LoopGuard:
        """The failure policy of one of the scheduler's loops (logged, counted, backed off)."""
        return LoopGuard(loop, self.clock, self.metrics.loop_failed)

    async def worker(self) -> None:
        await run_worker(self.queue, self.process, self._cycle_failed)

    async def _cycle_failed(self, key: str, e: Exception, retry_in: float) -> None:
        """A group's cycle raised; it is retried after ``retry_in`` seconds."""
        if not isinstance(e, BridgeError | AssertionError):
            # a bug or an input nobody foresaw: logged, counted; the group backs off
            self.metrics.loop_failed("scheduler-worker")
            log.exception("cycle_crashed", group=key, exc_info=e, retry_in=retry_in)
            return
        if isinstance(e, SlurmError):
            self.metrics.rest_errors.labels(e.endpoint or "?", str(e.status or 0)).inc()
            if isinstance(e, SlurmUnavailable):
                await self._slurm_unreachable(e, key)
        elif isinstance(e, KubeError):
            self.metrics.kube_errors.labels("process", e.reason or str(e.status)).inc()
        log.warning("cycle_failed", group=key, error=str(e), kind=type(e).__name__)

    async def _slurm_unreachable(self, error: SlurmUnavailable, gkey: str | None) -> None:
        """A Slurm call found slurmrestd (or slurmctld) unreachable."""
        if self.slurm_outage.failed(error):
            log.warning("slurm_unreachable", error=str(error))
            for key in list(self.state.groups):
                self.queue.add(key)  # every pending pod learns of the outage
        g = self.state.groups.get(gkey) if gkey else None
        if g is not None:
            await self.report.unschedulable(
                self.state.pods_of(g),
                REASON_UNSCHEDULABLE,
                self.slurm_outage.message,
                warning=True,
            )

    async def _probe_slurm(self) -> None:
        """During an outage: one cheap call per tick; when slurmctld answers again every
        group is processed at once, its backoff forgotten."""
        pings = await self.slurm.ping()
        if not any(p.responding for p in pings):
            return
        if self.slurm_outage.answered():
            log.info("slurm_reachable_again", groups=len(self.state.groups))
            for key in list(self.state.groups):
                self.queue.forget(key)
                self.queue.add(key)

    async def poll_forever(self) -> None:
        last_resync = self.clock.monotonic()
        base = self.cfg.slurm_poll_interval_seconds
        guard = self.guard("scheduler-poll")
        while True:
            async with guard:  # anything but a SlurmError: logged, counted, backed off
                try:
                    if self.slurm_outage.down is not None:
                        await self._probe_slurm()
                    await self.poller.run_once()
                    resync = self.cfg.slurm_resync_interval_seconds
                    if self.clock.monotonic() - last_resync >= resync:
                        last_resync = self.clock.monotonic()
                        await self.jobs.refresh_slurm_nodes()
                except SlurmError as e:
                    self.metrics.rest_errors.labels(e.endpoint or "?", str(e.status or 0)).inc()
                    # One warning per outage (slurm_unreachable), not one per tick.
                    quiet = self.slurm_outage.down is not None and isinstance(e, SlurmUnavailable)
                    (log.debug if quiet else log.warning)("poll_failed", error=str(e))
                    if isinstance(e, SlurmUnavailable):
                        await self._slurm_unreachable(e, None)
            # Idle back-off (see JobPoller), cut short when a job is newly watched.
            interval, slept = self.poller.next_interval(base), 0.0
            while True:
                await self.clock.sleep(base)
                slept += base
                if slept >= interval or self.poller.has_news:
                    break
