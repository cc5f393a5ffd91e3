"""The scheduling cycle: pending pods -> one Slurm placeholder job per group -> bound pods.

A group is processed by one worker at a time; ``scheduler.workers`` workers process
different groups at once (:mod:`bridge.workqueue`). :meth:`Scheduler.process` is one
group's cycle, in numbered steps, one call each, as kueue's ``schedule()``:

1. the group's unbound pods, from the watch-fed cache (:mod:`scheduler.state`); a group
   with none left is dropped;
2. snapshot: its Kubernetes facts from the watch caches, translated, and the Slurm facts
   held, an in-memory copy with no await (:meth:`~scheduler.snapshot.Snapshots.take`);
3. for a group that holds no job, the lookup of its job in Slurm (the one read before
   deciding, :meth:`~scheduler.snapshot.Snapshots.find`); what it found becomes the
   group's;
4. decide, purely (:mod:`scheduler.decide`);
5. act on the decision: start a job (:mod:`scheduler.start`), bind (:mod:`scheduler.bind`),
   update it in Slurm or end the group's hold on it (:meth:`Scheduler.release`), tell the
   pods why they wait (:mod:`scheduler.report`). Each act answers an
   :class:`~scheduler.outcome.Outcome`; none touches the work queue;
6. requeue the group, once, from the outcome (:meth:`Scheduler._requeue`); a failed cycle
   is retried with backoff from the same place.

The group's hold on its Slurm job (``GroupState.job``) is written here only: kept from the
snapshot's lookup or the Starter's answer (:meth:`Scheduler._hold`), updated from the
poller's news, ended by :meth:`Scheduler.release`. Besides the cycle's requeue, groups are
woken here by events: a pod's (:meth:`Scheduler.on_pod_event`), an object's a workload kind
reads (:meth:`Scheduler.on_related_event`: a PodGroup's Workload that came regroups its
pods), a DRA claim's that came, the poller's, the end of the start-up sweep, Slurm going
away and coming back. The parts are objects the Scheduler holds, each with one job; it
wires them. The Slurm poll loop is :mod:`scheduler.polling` (its news reach the cycle
through :meth:`Scheduler._job_changed`, an outage and the end of one); the workers run
:meth:`Scheduler.process`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import replace

import structlog

from bridge.clock import Clock
from bridge.config import BridgeConfig
from bridge.errors import BridgeError, KubeError, SlurmError, SlurmUnavailable
from bridge.expected import rfc3339
from bridge.kube.client import KubeClient
from bridge.kube.events import EventRecorder
from bridge.kube.resources import KubeObject
from bridge.loops import LoopGuard
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import SlurmJob
from bridge.translate import TranslateSettings, kobj, slurm_node_name
from bridge.wellknown import LABEL_EXTERNAL_NODE, MANAGED_NODE_TAINT
from bridge.workloads import Api
from bridge.workqueue import WorkQueue, run_worker
from scheduler.bind import KEEP, Binder
from scheduler.decide import (
    ALLOCATE,
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
    decide_start,
)
from scheduler.dra import DraAllocator
from scheduler.metrics import SchedulerMetrics
from scheduler.outage import SlurmReachability
from scheduler.outcome import NOTHING, NOW, REFUSED, Outcome, Requeue, failed
from scheduler.poller import JobPoller
from scheduler.polling import SlurmPolling
from scheduler.report import Reporter
from scheduler.slurm_state import HELD_REASONS, SlurmState
from scheduler.snapshot import JobLookup, Snapshot, Snapshots, job_view, recorded_pending
from scheduler.start import Started, Starter, with_hash_in_comment
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
        self.state = KubeState(cfg, TranslateSettings.from_config(cfg), clock=clock)
        self.dra = DraAllocator(
            kube,
            slurm,
            device_class_gres=cfg.scheduler.device_class_gres,
            gres_mapping=cfg.scheduler.gres_table(),
            node_ok=self._dra_node,
        )
        self.poller = JobPoller(slurm, self._job_changed, self._job_vanished)
        self.slurm_state = SlurmState(
            kube, slurm, clock, self.state, self.poller, self.metrics.loop_failed
        )
        self.snapshots = Snapshots(
            cfg, slurm, self.state, self.slurm_state, self.dra, self.slurm_outage
        )
        self.report = Reporter(
            kube,
            events or EventRecorder(kube, cfg.scheduler_name),
            self.state,
            self.metrics,
            clock,
        )
        self.starter = Starter(cfg, slurm, clock, self.slurm_state, self.report, self.metrics)
        self.binder = Binder(cfg, kube, self.dra, self.state, self.report, self.metrics, clock)
        self.polling = SlurmPolling(
            cfg,
            slurm,
            clock,
            self.poller,
            self.slurm_state,
            self.slurm_outage,
            self.metrics,
            self.guard("scheduler-poll"),
            on_job=self._job_changed,
            on_unreachable=lambda e: self._slurm_unreachable(e, None),
            on_reachable=self._slurm_back,
        )

    # ------------------------------------------------------------------ entry points
    @property
    def groups(self) -> dict[str, GroupState]:
        return self.state.groups

    @property
    def swept(self) -> bool:
        return self.slurm_state.swept

    @property
    def jobs_by_group_uid(self) -> dict[tuple[str, str], SlurmJob]:
        return self.slurm_state.jobs_by_group_uid

    async def on_pod_event(self, kind: str, pod: KubeObject) -> None:
        key = await self.state.on_pod_event(kind, pod)
        if key is not None and self._restored_held(pod):
            # Its job is held in Slurm (priority 0) and the pods record it: its first cycle
            # would only follow it (a Pending, no write), and a held job holds no
            # partition back (the start rule's count). A restart lists thousands of these:
            # looked at after the start-up sweep, in the idle lane, they no longer take the
            # workers (and the CPU) from the sweep, the groups that waited for it, and the
            # pods created since. Any event of the group (a pod's, Slurm's outage) queues
            # it at once as before.
            if self.slurm_state.swept:
                self.queue.add_idle(key)
            else:
                self.slurm_state.restored_held.add(key)
            return
        self._wake([key])

    def _restored_held(self, pod: KubeObject) -> bool:
        """``pod`` came with the pod watch's initial list, is ours, and records a pending
        job that Slurm holds (:func:`scheduler.snapshot.recorded_pending`)."""
        if self.state.pods_listed or kobj.pod_key(pod) not in self.state.pods:
            return False
        record = recorded_pending(pod)
        return record is not None and record[2] in HELD_REASONS

    def on_related_event(self, api: Api, event: str, obj: KubeObject) -> None:
        """An object a workload kind reads changed: the groups it regrouped or may change
        are processed again."""
        self._wake(self.state.on_related_event(api, event, obj))

    def on_claim_event(self, event: str, obj: KubeObject) -> None:
        """A ResourceClaim (or template) changed: one that came wakes the groups without
        a job whose pods name it (they were told it was not found)."""
        self.dra.cache.on_claim_event(event, obj)
        if event == "ADDED":
            self._wake(self.state.naming_claim(obj))

    def on_claim_template_event(self, event: str, obj: KubeObject) -> None:
        self.dra.cache.on_template_event(event, obj)
        if event == "ADDED":
            self._wake(self.state.naming_claim(obj, template=True))

    def initial_pods_listed(self) -> None:
        self.state.initial_pods_listed()

    def on_node_event(self, kind: str, node: KubeObject) -> None:
        self.state.on_node_event(kind, node)

    def on_namespace_event(self, kind: str, ns: KubeObject) -> None:
        self.state.on_namespace_event(kind, ns)

    async def sweep(self, lists_done: asyncio.Event | None = None) -> None:
        """The start-up sweep (:meth:`SlurmState.sweep`); then the groups that waited for
        it are processed."""
        await self.slurm_state.sweep(lists_done)
        self._wake(self.slurm_state.waited_for_sweep())
        for key in self.slurm_state.restored_after_sweep():
            g = self.state.groups.get(key)
            if g is not None and g.job is None:  # not processed meanwhile
                self.queue.add_idle(key)

    async def refresh_slurm_nodes(self) -> None:
        await self.slurm_state.refresh_slurm_nodes()

    def update_gauges(self) -> None:
        self.report.update_gauges()

    def _wake(self, keys: Iterable[str | None]) -> None:
        """Process these groups again: something they wait on changed."""
        for key in keys:
            if key is not None:
                self.queue.add(key)

    # ------------------------------------------------------------------ one group
    async def process(self, gkey: str) -> None:
        """One cycle of the group ``gkey``, requeued at its end from its outcome."""
        try:
            outcome = await self._cycle(gkey)
        except Exception as e:  # anything a step raised: the group is retried
            outcome = failed(e)
        if outcome.error is not None:
            await self._failed(gkey, outcome.error)
        self._requeue(gkey, outcome)

    async def _cycle(self, gkey: str) -> Outcome:
        g = self.state.groups.get(gkey)
        if g is None:
            return NOTHING
        # 1. the group's unbound pods
        pods = self.state.pods_of(g)
        if not pods:
            self._drop(g)
            return NOTHING
        if self.dra.wants(pods):
            # the group's CEL work follows in the snapshot: one group's a pass of the loop
            await self.dra.cel_turn()
        # 2. snapshot: Kubernetes facts and the Slurm facts held, in memory (no await)
        snap = self.snapshots.take(g, pods)
        # 3. the lookup of a job the group does not hold; what it found becomes the group's
        snap = await self.snapshots.find(g, snap)
        if snap.lookup is not None:
            self._keep(g, snap.lookup)
        # 4. decide
        decision = decide(snap.group)
        # 5. act
        if not isinstance(decision, AwaitSweep):
            self.metrics.attempts.labels(type(decision).__name__.lower()).inc()
        with structlog.contextvars.bound_contextvars(group=gkey):
            if snap.lookup is not None and snap.lookup.foreign:
                assert snap.lookup.not_ours is not None
                await self.report.foreign_label(snap.pods, snap.lookup.not_ours)
            return await self._act(g, decision, snap)

    def _requeue(self, gkey: str, outcome: Outcome) -> None:
        """6. The one place a cycle requeues its group, from the act step's outcome."""
        if gkey not in self.state.groups:
            return  # dropped
        if outcome.forget:
            self.queue.forget(gkey)
        if outcome.pods_bound:
            g = self.state.groups[gkey]
            if not self.state.pods_of(g):
                self._drop(g)  # what the next cycle would do: none of its pods is left
                return
            self.queue.add(gkey)
        match outcome.requeue:
            case Requeue.NOW:
                self.queue.add(gkey)
            case Requeue.AFTER:
                self.queue.add_after(gkey, outcome.after)
            case Requeue.RETRY:
                self.queue.add_rate_limited(gkey, base=outcome.after or None)
            case Requeue.REFUSED:
                self.queue.add_rate_limited(gkey, base=self.cfg.scheduler.reject_backoff_seconds)
            case Requeue.AFTER_SWEEP:
                self.slurm_state.after_sweep.add(gkey)
            case Requeue.NONE:
                pass

    async def _failed(self, gkey: str, error: Exception) -> None:
        """A cycle step failed: counted, logged, and an unreachable Slurm noted."""
        if not isinstance(error, BridgeError | AssertionError):
            # a bug or an input nobody foresaw: logged, counted; the group backs off
            self.metrics.loop_failed("scheduler-worker")
            log.exception("cycle_crashed", group=gkey, exc_info=error)
            return
        if isinstance(error, SlurmError):
            self.metrics.rest_errors.labels(error.endpoint or "?", str(error.status or 0)).inc()
            if isinstance(error, SlurmUnavailable):
                await self._slurm_unreachable(error, gkey)
        elif isinstance(error, KubeError):
            self.metrics.kube_errors.labels("process", error.reason or str(error.status)).inc()
        log.warning("cycle_failed", group=gkey, error=str(error), kind=type(error).__name__)

    def _drop(self, g: GroupState) -> None:
        """No pod of the group is left: forget it (and its job, no longer followed)."""
        if g.job is not None:
            self.slurm_state.unwatch(g.job.job_id)
        self.state.drop_group(g.ref.key)
        self.queue.forget(g.ref.key)

    # ------------------------------------------------------------------ the group's job
    def _hold(
        self,
        g: GroupState,
        job: SlurmJob | None,
        *,
        unread: bool = False,
        made: Started | None = None,
    ) -> None:
        """``job`` is the group's now (None: it has none), followed while it is pending."""
        g.job, g.unread = job, unread
        if made is not None and made.spec is not None:
            g.job_spec = made.spec
        if job is not None and job.state.primary == "PENDING":
            self.slurm_state.watch(g, job)

    def _keep(self, g: GroupState, found: JobLookup) -> None:
        """What the snapshot's lookup found becomes the group's."""
        if found.from_sweep is not None:
            self.slurm_state.jobs_by_group_uid.pop(found.from_sweep, None)
        if found.not_ours is not None:
            self.slurm_state.gone.add(found.not_ours)
        if found.identity_checked:
            g.uncertain_submit = False
        self._hold(g, found.job, unread=found.unread)

    def _dra_node(self, name: str) -> bool:
        """Whether DRA selectors may see the ResourceSlices of node ``name``: a node that
        exists and that the bridge schedules on (Slurm knows it, or it is tainted managed,
        or labelled an external node to register); a slice naming any other node (a
        forged one) must not change what a claim resolves to."""
        node = self.state.nodes.get(name)
        if node is None:
            return False
        known = self.slurm_state.slurm_nodes
        return (
            not known
            or slurm_node_name(node) in known
            or LABEL_EXTERNAL_NODE in kobj.labels(node)
            or any(
                kobj.text(t, "key") == MANAGED_NODE_TAINT
                for t in kobj.sequence(node, "spec", "taints")
            )
        )

    def _job_changed(self, job: SlurmJob) -> None:
        """The poller read a followed job (its state changed, or a reason came)."""
        gkey = self.slurm_state.changed(job)
        g = self.state.groups.get(gkey) if gkey is not None else None
        if g is not None and g.job is not None and g.job.job_id == job.job_id:
            # A job restored from the pods' record is trusted once this read proves it
            # the group's; otherwise it stays unread, and the ReadJob decision's read
            # drops it as foreign.
            g.job = job
            if g.unread and self.snapshots.proves(g, job):
                g.unread = False
            self._wake([g.ref.key])

    def _job_vanished(self, job_id: int) -> None:
        """Slurm no longer knows a followed job (purged): its group gets a new one."""
        gkey = self.slurm_state.vanished(job_id)
        g = self.state.groups.get(gkey) if gkey is not None else None
        if g is not None and g.job is not None and g.job.job_id == job_id:
            g.job, g.unread = None, False
            self._wake([g.ref.key])

    async def release(
        self,
        g: GroupState,
        job_id: int,
        pods: list[KubeObject],
        *,
        reason: str,
        message: str,
        warning: bool,
    ) -> None:
        """End the group's hold on ``job_id`` before its pods run, on every path (a member
        lost before allocation, a job given back after failed binds): taken off the pods
        (job-id label, node annotation, finalizer), cancelled in Slurm, no longer followed,
        no longer the group's, and the pods told why (``reason``, ``message``). The pods
        are unlinked first: the controller fails the pods still linked to a job that
        ended, and a pod given back must stay schedulable (a job left without pods, if the
        cancel fails, is a stray the controller's sweep cancels)."""
        unlinked = await asyncio.gather(
            *(self.binder.unlink(p) for p in pods), return_exceptions=True
        )
        errors = [r for r in unlinked if isinstance(r, BaseException)]
        if errors:
            log.warning("unlink_failed", job_id=job_id, pods=len(errors), first=str(errors[0]))
        await self.slurm.cancel(job_id)
        self.slurm_state.unwatch(job_id)
        g.job = None
        (log.warning if warning else log.info)("job_released", job_id=job_id, why=message)
        await self.report.unschedulable(pods, reason, message, warning=warning)

    # ------------------------------------------------------------------ 5. act
    async def _act(self, g: GroupState, d: Decision, snap: Snapshot) -> Outcome:
        pods = snap.pods
        match d:
            case Wait(reason=reason, message=message):
                return await self.report.waiting(g, pods, reason, message)
            case Reject(message=message):
                await self.report.unschedulable(pods, REASON_UNSCHEDULABLE, message, warning=True)
                return REFUSED
            case Submit():
                return await self._start(g, d, snap)
            case Update(job_id=job_id, spec=spec, spec_hash=h, component_ids=ids):
                stamped = with_hash_in_comment(spec, h)
                if ids:  # a pending hetjob: each component by its own id
                    for cid, part in zip(ids, stamped.components, strict=True):
                        await self.slurm.update_job(cid, part)
                else:
                    await self.slurm.update_job(job_id, stamped)
                log.info("job_updated", job_id=job_id)
                g.job = await self.slurm.get_job(job_id)
                return NOW
            case Cancel(job_id=job_id, message=message):
                await self.release(
                    g, job_id, pods, reason=REASON_UNSCHEDULABLE, message=message, warning=False
                )
                return NOTHING
            case Pending(job_id=job_id, message=message) if (
                snap.group.job is not None and snap.group.job.state != "PENDING"
            ):
                # Not pending, not bindable yet (RUNNING without its nodes, SUSPENDED ...):
                # the poller follows PENDING jobs only, so no tick would ever queue this
                # group again (a silent stall). Read it again after a backoff instead.
                log.info("job_not_settled", job_id=job_id, state=snap.group.job.state)
                g.unread = True
                await self.report.unschedulable(pods, REASON_UNSCHEDULABLE, message)
                return Outcome(Requeue.RETRY, after=UNSETTLED_REREAD_SECONDS)
            case Pending(
                job_id=job_id, message=message, spec_hash=made_from, quiet=quiet, plan=plan
            ):
                # Quiet until Slurm has looked at a new job (a restart in between finds
                # it by its admin_comment); a job that stays pending gets its pods linked
                # and Slurm's reason and plan shown (written again when they change).
                if not quiet:
                    now = snap.group.now
                    told = self.report.stale_pods(pods, message, plan, now)
                    expected: str | None = KEEP
                    if plan is not None and now is not None:
                        expected = rfc3339(plan.start) if plan.start else None
                    stale = {id(p) for p in told}
                    await asyncio.gather(
                        *(
                            self.binder.link_pod_to_job(
                                p,
                                job_id,
                                None,
                                made_from,
                                expected if id(p) in stale else KEEP,
                                plan.by if plan is not None else None,
                            )
                            for p in pods
                        )
                    )
                    await self.report.unschedulable(told, REASON_UNSCHEDULABLE, message)
                    if told:
                        self.report.expected_shown(g, plan, now)
                return NOTHING
            case Ended(job_id=job_id, message=message):
                self.slurm_state.unwatch(job_id)
                await self.report.unschedulable(pods, REASON_UNSCHEDULABLE, message, warning=True)
                return NOTHING
            case Bind():
                if g.job is not None and g.job.job_id == d.job.job_id:
                    self.report.started(g, g.job.start_time)
                bound = await self.binder.bind_group(g, d, pods)
                if bound.give_back is None:
                    return bound.outcome
                give = bound.give_back
                if give.node is not None:
                    # Slurm's devices and the node's disagree: not that node again for the
                    # group until its ResourceSlices change (scheduler.snapshot)
                    g.device_excluded[give.node] = give.fingerprint
                await self.release(
                    g, give.job_id, pods, reason=give.reason, message=give.message, warning=True
                )
                return bound.outcome.then(REFUSED)
            case ReadJob(job_id=job_id):
                found = await self.snapshots.read_job(g, job_id)
                self._keep(g, found)
                if found.foreign:
                    await self.report.foreign_label(pods, job_id)
                return NOW
            case AwaitSweep():
                return Outcome(Requeue.AFTER_SWEEP)
            case Unreachable(message=message):
                await self.report.unschedulable(pods, REASON_UNSCHEDULABLE, message, warning=True)
                return NOTHING

    async def _start(self, g: GroupState, d: Submit, snap: Snapshot) -> Outcome:
        """A new job for the group, started as ``d`` says; bound in this same cycle when
        Slurm started it at once."""
        started: Started | None = None
        linked: list[KubeObject] = []

        async def link_alone(job_id: int) -> None:
            # a lone pod is linked to its job while Slurm is asked for its node
            linked.append(await self.binder.link_pod_to_job(snap.pods[0], job_id, None))

        if d.start == ALLOCATE:
            part = d.spec.partition or ""
            async with self.starter.allocation_turn(part) as turn:
                # Decided again on the partition as it is now: a try that ended while this
                # one waited for its turn may have been refused (only how it starts changes).
                d = decide_start(d, snap.group, self.slurm_state.partition_view(part))
                if d.start == ALLOCATE:
                    alone = link_alone if len(snap.pods) == 1 else None
                    started = await self.starter.allocate(d, snap.pods, turn, alone)
        if started is None:  # queued, or refused at once: queued
            started = await self.starter.submit(d, snap.pods)
        if started.uncertain:
            g.uncertain_submit = True
        if started.job is not None:
            self._hold(g, started.job, made=started)
        if not started.running or started.outcome.error is not None:
            return started.outcome
        # Slurm started it at once: decided again on the job as it runs (a Bind)
        assert started.job is not None
        running = decide(replace(snap.group, job=job_view(started.job)))
        bound = await self._act(g, running, replace(snap, pods=linked or snap.pods))
        return started.outcome.then(bound)

    # ------------------------------------------------------------------ workers, Slurm outages
    def guard(self, loop: str) -> LoopGuard:
        """The failure policy of one of the scheduler's loops (logged, counted, backed off)."""
        return LoopGuard(loop, self.clock, self.metrics.loop_failed)

    async def worker(self) -> None:
        # process() never raises: a failed step is an outcome, requeued by _requeue
        await run_worker(self.queue, self.process)

    async def _slurm_unreachable(self, error: SlurmUnavailable, gkey: str | None) -> None:
        """A Slurm call found slurmrestd (or slurmctld) unreachable."""
        if self.slurm_outage.failed(error):
            log.warning("slurm_unreachable", error=str(error), outage=self.slurm_outage.outages)
            self._wake(list(self.state.groups))  # every pending pod learns of the outage
        g = self.state.groups.get(gkey) if gkey else None
        if g is not None:
            await self.report.unschedulable(
                self.state.pods_of(g),
                REASON_UNSCHEDULABLE,
                self.slurm_outage.message,
                warning=True,
            )

    def _slurm_back(self) -> None:
        """slurmctld answers again (the poll loop's probe): every group is processed at
        once, its backoff forgotten."""
        log.info("slurm_reachable_again", groups=len(self.state.groups))
        for key in list(self.state.groups):
            self.queue.forget(key)
        self._wake(list(self.state.groups))
