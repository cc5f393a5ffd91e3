"""The running controller: the rooms wired together, and the loops that drive them.

Two watches feed the caches (:mod:`controller.caches`) and a Slurm poller
(:mod:`controller.poller`) what Slurm says of the jobs the pods name; both queue keys on a
keyed work queue (:mod:`bridge.workqueue`): ``("job", id)`` and ``("node", name)``.
Workers reconcile a job (:mod:`controller.job_reconcile`, which proves a pod is its job's
before acting on its label: :mod:`controller.ownership`) or a node
(:mod:`controller.node_reconcile`). A periodic sweep (:mod:`controller.sweep`) finds what
no event says: dangling jobs, orphaned external nodes, the Slurm-side metrics, and queues
every key again.

Loops (:meth:`Controller.run`): the two watches, ``controller.workers`` workers, the
queue's timers, the poller (``slurmPollIntervalSeconds``, backing off while nothing
changes) and the sweep (every ``slurmResyncIntervalSeconds``). The workers, the poller and
the sweep start once both watches have listed (``synced``). Caches are rebuilt by listing
on start: nothing is lost by a restart (the pod label and the job's admin_comment are the
links).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from bridge.clock import Clock, PollPace, SystemClock, sleep_or_wake
from bridge.config import BridgeConfig
from bridge.errors import BridgeError, KubeError
from bridge.kube.client import KubeClient
from bridge.kube.events import EventRecorder
from bridge.kube.resources import DEVICE_TAINT_RULES, NODES, PODS, RESOURCE_SLICES, slim
from bridge.kube.watch import Watcher, WatchEvent, list_then_watch, served
from bridge.logging import get_logger
from bridge.loops import LoopCounter, LoopGuard
from bridge.slurm.client import SlurmClient
from bridge.slurm.fetching import state_requests
from bridge.translate import pod_job_id
from bridge.wellknown import LABEL_JOB_ID
from bridge.workqueue import WorkQueue, run_worker
from controller.apply import Applier
from controller.caches import WatchCaches
from controller.job_reconcile import JobReconcile
from controller.model import Key, Next, job_key, node_key, slim_pod
from controller.node_reconcile import NodeReconcile
from controller.ownership import Ownership
from controller.poller import SlurmPoller
from controller.slurm_metrics import JobFactsTable
from controller.sweep import SlurmReadObserver, Sweeper

__all__ = ["Controller", "SlurmReadObserver"]

log = get_logger("controller")

RETRY_BASE_SECONDS = 0.5
RETRY_MAX_SECONDS = 30.0


class Controller:
    def __init__(
        self,
        cfg: BridgeConfig,
        slurm: SlurmClient,
        kube: KubeClient,
        *,
        clock: Clock | None = None,
        events: EventRecorder | None = None,
        on_applied: Callable[[str], None] | None = None,
        slurm_observer: SlurmReadObserver | None = None,
        on_loop_failure: LoopCounter | None = None,
    ) -> None:
        self.cfg = cfg
        self.on_loop_failure = on_loop_failure
        self.slurm = slurm
        self.kube = kube
        self.clock: Clock = clock or SystemClock()
        self.events = events
        self.applier = Applier(slurm, kube, events, on_applied)
        self.queue: WorkQueue[Key] = WorkQueue(
            self.clock, base_backoff=RETRY_BASE_SECONDS, max_backoff=RETRY_MAX_SECONDS
        )
        # What the job reads said, for the job metrics ("polled" mode): kept while Slurm
        # lists the job, ended or not (controller/slurm_metrics.py).
        self.job_facts = JobFactsTable(cfg.mcs_label)
        polled = slurm_observer is not None and cfg.controller.slurm_job_metrics == "polled"
        self.caches = WatchCaches()
        self.ownership = Ownership(cfg, slurm, kube, self.clock, self.caches, events)
        self.caches.departs = self.ownership.may_prove  # a forged label departs unremembered
        self.node_reconcile = NodeReconcile(cfg, slurm, self.applier, self.caches)
        self.poller = SlurmPoller(
            cfg,
            slurm,
            self.caches,
            self.ownership,
            self.job_facts if polled else None,
        )
        self.job_reconcile = JobReconcile(
            cfg, self.clock, self.applier, self.caches, self.poller, self.ownership
        )
        self.sweeper = Sweeper(
            cfg,
            slurm,
            kube,
            self.applier,
            self.caches,
            self.poller,
            self.node_reconcile,
            slurm_observer,
        )
        self.synced = asyncio.Event()  # both watches have listed
        self._listed = 0

    # ------------------------------------------------------------------ events
    async def on_pod(self, ev: WatchEvent) -> None:
        if ev.type != "DELETED" and (j := pod_job_id(ev.object)) is not None:
            self.poller.poke(j)  # a job never asked about: ask now, not next tick
        for j in self.caches.on_pod(ev):
            self.queue.add(job_key(j))

    async def on_node(self, ev: WatchEvent) -> None:
        change = self.caches.on_node(ev)
        if change.external:
            self.node_reconcile.external_nodes_changed()
        if ev.type == "DELETED":
            self.node_reconcile.forget(ev.key)
            if self.events is not None:
                self.events.forget(ev.object)
        else:
            self.queue.add(node_key(ev.key))
        for j in change.jobs:  # its pods may now count as stuck Terminating
            self.queue.add(job_key(j))

    async def on_slice(self, ev: WatchEvent) -> None:
        for node in self.caches.on_slice(ev):
            self.queue.add(node_key(node))
            # a device of the node tainted NoExecute ends its pods' hold: their jobs
            for key in self.caches.by_node.get(node, ()):
                if (j := pod_job_id(self.caches.pods[key])) is not None:
                    self.queue.add(job_key(j))

    async def on_taint_rule(self, ev: WatchEvent) -> None:
        """A DeviceTaintRule changed: the GRES condition of the nodes it may touch, and
        the jobs with pods there (a NoExecute taint ends their pods' hold)."""
        for node in self.caches.on_taint_rule(ev):
            self.queue.add(node_key(node))
            for key in self.caches.by_node.get(node, ()):
                if (j := pod_job_id(self.caches.pods[key])) is not None:
                    self.queue.add(job_key(j))

    async def _follow_taint_rules(self) -> None:
        """DeviceTaintRules, only where discovery serves them (Kubernetes 1.37+)."""
        if not await served(self.kube, DEVICE_TAINT_RULES):
            return
        await list_then_watch(
            Watcher(self.kube, DEVICE_TAINT_RULES, clock=self.clock),
            self.on_taint_rule,
            keep_on_list_error=True,
            absent_ok=True,
            guard=self._guard("controller-watch-devicetaintrules"),
        )

    def slices_listed(self) -> None:
        """The node's devices are known from now on: every node is looked at again."""
        self.caches.slices_known = True
        for name in self.caches.nodes:
            self.queue.add(node_key(name))

    async def _follow_slices(self) -> None:
        """The ResourceSlices (for the nodes' GRES). A cluster that serves none (before
        Kubernetes 1.34) ends the watch quietly: every node then has none. A failed first
        list is tried again with backoff: the nodes' devices are known only once one
        list arrived whole."""
        failures = 0
        while True:
            try:
                await list_then_watch(
                    Watcher(self.kube, RESOURCE_SLICES, clock=self.clock),
                    self.on_slice,
                    listed=self.slices_listed,
                    absent_ok=True,
                    guard=self._guard("controller-watch-resourceslices"),
                )
            except KubeError as e:
                failures += 1
                log.warning("initial_list_failed", resource=RESOURCE_SLICES.plural, error=str(e))
                await self.clock.sleep(
                    min(RETRY_MAX_SECONDS, RETRY_BASE_SECONDS * 2 ** min(failures, 10))
                )
                continue
            break
        if not self.caches.slices_known:
            self.slices_listed()

    # ------------------------------------------------------------------ steps
    async def reconcile(self, key: Key) -> None:
        what, ident = key
        if what == "node":
            self._queue(await self.node_reconcile.reconcile(ident))
        else:
            self._queue(await self.job_reconcile.reconcile(int(ident)))

    async def poll_once(self) -> int:
        """One poll of Slurm; how many jobs changed (queued)."""
        changed = await self.poller.poll_once()
        self._queue(changed)
        return len(changed.now)

    async def sweep_once(self) -> None:
        self._queue(await self.sweeper.sweep_once())

    def _queue(self, then: Next) -> None:
        """The one place the rooms' answers reach the work queue."""
        for key in then.now:
            self.queue.add(key)
        for key, seconds in then.later:
            self.queue.add_after(key, seconds)

    # ------------------------------------------------------------------ loops
    async def _reconcile_failed(self, key: Key, error: Exception, retry_in: float) -> None:
        log.warning("reconcile_failed", key="/".join(key), error=str(error), retry_in=retry_in)

    def _guard(self, loop: str) -> LoopGuard:
        """The failure policy of one loop: anything but a BridgeError (a bug, an input
        nobody foresaw) is logged, counted and backed off; the loop goes on."""
        return LoopGuard(loop, self.clock, self.on_loop_failure)

    async def _worker(self) -> None:
        await run_worker(
            self.queue,
            self.reconcile,
            self._reconcile_failed,
            retry=(BridgeError,),
            forget_on_success=True,
            guard=self._guard("controller-worker"),
        )

    async def _every(self, loop: str, seconds: float, step: Callable[[], Awaitable[None]]) -> None:
        guard = self._guard(loop)
        while True:
            async with guard:
                try:
                    await step()
                except BridgeError as e:
                    log.warning("loop_step_failed", loop=loop, error=str(e))
            await self.clock.sleep(seconds)

    async def _poll_loop(self) -> None:
        """Poll Slurm, paced by :class:`~bridge.clock.PollPace`; a new job id pokes it at
        once (:meth:`SlurmPoller.poke`)."""
        pace = PollPace()
        poller = self.poller
        guard = self._guard("controller-poll")
        while True:
            poller.poll_now.clear()
            async with guard:
                try:
                    pace.ticked(await self.poll_once() > 0)
                except BridgeError as e:
                    log.warning("loop_step_failed", loop="controller-poll", error=str(e))
            pace.requests = state_requests(len(poller.ids()))
            interval = pace.interval(self.cfg.slurm_poll_interval_seconds)
            await sleep_or_wake(self.clock, interval, poller.poll_now)

    def _one_listed(self) -> None:
        self._listed += 1
        if self._listed == 2:
            self.synced.set()

    async def run(self) -> None:
        """Run until cancelled."""
        pod_watch = Watcher(
            self.kube,
            PODS,
            label_selector=LABEL_JOB_ID,
            field_selector=f"spec.schedulerName={self.cfg.scheduler_name}",
            clock=self.clock,
            keep=slim_pod,
        )
        node_watch = Watcher(self.kube, NODES, clock=self.clock, keep=slim)
        tasks = [
            asyncio.create_task(
                list_then_watch(
                    pod_watch,
                    self.on_pod,
                    listed=self._one_listed,
                    guard=self._guard("controller-watch-pods"),
                )
            ),
            asyncio.create_task(
                list_then_watch(
                    node_watch,
                    self.on_node,
                    listed=self._one_listed,
                    guard=self._guard("controller-watch-nodes"),
                )
            ),
            asyncio.create_task(self._follow_slices()),
            asyncio.create_task(self._follow_taint_rules()),
        ]
        # Not among ``tasks``: the first sweep awaits it (and sees its error, if any).
        self.sweeper.start_first_scan()
        try:
            await self.synced.wait()
            log.info("controller_synced", pods=len(self.caches.pods), nodes=len(self.caches.nodes))
            tasks += [
                asyncio.create_task(self._worker()) for _ in range(self.cfg.controller.workers)
            ]
            tasks.append(asyncio.create_task(self.queue.run_timers()))
            tasks.append(asyncio.create_task(self._poll_loop()))
            tasks.append(
                asyncio.create_task(
                    self._every(
                        "controller-sweep", self.cfg.slurm_resync_interval_seconds, self.sweep_once
                    )
                )
            )
            await asyncio.gather(*tasks)
        finally:
            first, self.sweeper.first_states = self.sweeper.first_states, None
            for t in [*tasks, *([first] if first is not None else [])]:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError, BridgeError):
                    await t
            if first is not None:
                with contextlib.suppress(asyncio.CancelledError, BridgeError):
                    await first
            # The queue stays open: a controller that leads again (re-election) runs on it.
