"""The sweep, every ``slurmResyncIntervalSeconds``: what no event says.

* dangling jobs (:mod:`controller.dangling`): active jobs of ours whose pods are all gone
  from Kubernetes (deleted while the controller was down) are cancelled;
* the Slurm-side metrics (:mod:`controller.slurm_metrics`), as
  ``controller.slurmJobMetrics`` says;
* the grace contract (:meth:`controller.poller.SlurmPoller.check_grace`);
* Slurm's nodes: listed, and the bridge's external nodes whose Kubernetes node is gone
  (orphans, :func:`controller.nodes.orphans`) drained and deleted;
* a resync: every node and job key is queued.

Of Slurm's jobs, a quiet cluster costs one compact request per sweep (``GET /jobs/state/``,
streamed), whatever the size of Slurm's table: each active job is read by id once in its
life. Besides: ``GET /partitions/`` (the grace contract) and ``GET /nodes/``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Protocol

from bridge.config import BridgeConfig
from bridge.errors import BridgeError, KubeNotFound, SlurmError
from bridge.kube.client import KubeClient
from bridge.kube.resources import KubeObject
from bridge.logging import get_logger
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import JobStateItem, SlurmJob, SlurmNode
from controller import dangling, nodes
from controller.apply import Applier
from controller.caches import WatchCaches
from controller.model import CancelJob, Next, job_key, node_key
from controller.node_reconcile import NodeReconcile
from controller.poller import READ_CONCURRENCY, SlurmPoller
from controller.slurm_metrics import JobsSummary, JobTally

log = get_logger("controller")

# New active jobs no pod names that the dangling sweep reads (by id) per sweep, at most.
SWEEP_READS_MAX = 256
# Of those, the bridge's own jobs read for the polled job metrics (partition, reason) per
# sweep: few, so that following 10,000 jobs adds <= 0.3 requests/s at a 30 s resync
# (issue #14's steady budget is 2 a component); a new job is read within minutes.
METRIC_READS_MAX = 8


class SlurmReadObserver(Protocol):
    """Told what the sweep read (the Slurm-side metrics: :mod:`controller.slurm_metrics`)."""

    def jobs_summarized(self, summary: JobsSummary) -> None: ...

    def nodes_listed(self, nodes: Iterable[SlurmNode]) -> None: ...


class Sweeper:
    def __init__(
        self,
        cfg: BridgeConfig,
        slurm: SlurmClient,
        kube: KubeClient,
        applier: Applier,
        caches: WatchCaches,
        poller: SlurmPoller,
        node_reconcile: NodeReconcile,
        observer: SlurmReadObserver | None,
    ) -> None:
        self.cfg = cfg
        self.slurm = slurm
        self.kube = kube
        self.applier = applier
        self.caches = caches
        self.poller = poller
        self.node_reconcile = node_reconcile
        self.observer = observer
        # Slurm's job states for the first sweep, asked while the watches list (both take
        # seconds at a busy site; the sweep waited for the lists, then for Slurm).
        self.first_states: asyncio.Task[tuple[JobStateItem, ...]] | None = None
        # Active Slurm jobs read once by the dangling sweep: id -> pods named (None: not
        # ours). Pruned to the active jobs every sweep.
        self._job_pods: dict[int, tuple[str, ...] | None] = {}

    @property
    def _polled_job_metrics(self) -> bool:
        """The job metrics come from what the controller reads anyway (the default)."""
        return self.poller.facts is not None

    def start_first_scan(self) -> None:
        """Ask Slurm for the first sweep's job states now (while the watches list)."""
        self.first_states = asyncio.create_task(self.scan_states())

    async def sweep_once(self) -> Next:
        """Dangling jobs, Slurm node states, the job metrics; answers a resync of every
        key."""
        states: tuple[JobStateItem, ...] | None = None
        try:
            # The first sweep takes the states asked while the watches listed.
            first, self.first_states = self.first_states, None
            states = await (first if first is not None else self.scan_states())
            named = await self._active_jobs_of_ours(states)
            found: dict[str, KubeObject | None] = {}
            for keys in named.values():
                for k in keys:
                    if k in found:
                        continue
                    found[k] = self.caches.pods.get(k) or await self._get_pod(k)
            actions = dangling.plan(named, found)
            if actions:
                # The cache may predate an update of the job: confirm with a fresh read.
                ids = [a.job_id for a in actions if isinstance(a, CancelJob)]
                read = await self.slurm.get_jobs(ids, concurrency=READ_CONCURRENCY)
                for job in read:
                    self.poller.remember(job)
                fresh = dangling.candidates(read, self.cfg.mcs_label)
                actions = dangling.plan(fresh, found | await self._pods_of(fresh, found))
            await self.applier.apply(actions)
        except SlurmError as e:
            log.warning("slurm_sweep_failed", error=str(e))
        await self._job_metrics(states)
        await self.poller.check_grace(self.node_reconcile.bridge_partitions())
        await self._slurm_nodes()
        return Next(
            (
                *(node_key(name) for name in self.caches.nodes),
                *(job_key(j) for j in self.caches.by_job),
            )
        )

    async def _slurm_nodes(self) -> None:
        """Every Slurm node, read; the bridge's orphaned external nodes, ended."""
        try:
            listed = await self.slurm.list_nodes()
        except SlurmError as e:
            log.warning("slurm_nodes_failed", error=str(e))
            return
        nr = self.node_reconcile
        nr.slurm_nodes_listed(listed)
        if self.observer is not None:
            self.observer.nodes_listed(nr.slurm_nodes.values())
        orphans = nodes.orphans(nr.slurm_nodes.values(), self.caches.nodes.values(), nr.policy())
        try:
            await self.applier.apply(orphans)
        except BridgeError as e:
            # Retried next sweep; the node and job keys still get queued.
            log.warning("orphan_nodes_failed", error=str(e))

    async def scan_states(self) -> tuple[JobStateItem, ...]:
        """Every job's state, streamed: the active rows kept (all of them for the polled
        job metrics), never the whole decoded answer of Slurm's table."""
        polled = self._polled_job_metrics
        return await self.slurm.scan_job_states(state=lambda s: polled or s.active)

    async def _job_metrics(self, states: tuple[JobStateItem, ...] | None) -> None:
        """Summarize Slurm's jobs for the observer, as ``controller.slurmJobMetrics`` says:
        ``polled`` from this sweep's state list (``states``; None: it failed) and the jobs'
        reads, ``table`` from a streamed read of the whole job table, ``off`` not at all."""
        mode = self.cfg.controller.slurm_job_metrics
        if self.observer is None or mode == "off":
            return
        if mode == "polled":
            facts = self.poller.facts
            if states is not None and facts is not None:
                summary = facts.summary(
                    states, self.caches.by_job.keys() | self.poller.views.keys()
                )
                self.observer.jobs_summarized(summary)
            return
        try:
            tally = JobTally(self.cfg.mcs_label)
            await self.slurm.scan_jobs(tally.add)  # streamed, counted, nothing held
        except SlurmError as e:
            log.warning("slurm_job_metrics_failed", error=str(e))
        else:
            self.observer.jobs_summarized(tally.summary())

    async def _active_jobs_of_ours(
        self, states: tuple[JobStateItem, ...]
    ) -> dict[int, tuple[str, ...]]:
        """job id -> pods named, for every active job of ours no pod is labelled with.

        A job a live pod's job-id label names is not dangling, so is not read for that.
        Of the others, the sweep's compact ``GET /jobs/state/`` (``states``) finds the
        active ones, and each is read by id once in its life (ours or not:
        :attr:`_job_pods`), at most :data:`SWEEP_READS_MAX` per sweep (the rest at the
        next). With the ``polled`` job metrics, the jobs pods name are read once too, for
        their partition and reason, after the others, at most :data:`METRIC_READS_MAX`
        a sweep. A quiet cluster costs one small request per sweep, whatever the size of
        Slurm's table; the whole table is never asked for (``GET /jobs/`` at 30,000 jobs
        grows slurmrestd by GBs)."""
        by_job = self.caches.by_job
        active = {s.job_id for s in states if s.state.active}
        for job_id in self._job_pods.keys() - active:
            del self._job_pods[job_id]
        facts = self.poller.facts
        if facts is not None:
            facts.keep_only({s.job_id for s in states})
        unread = active - self._job_pods.keys()
        new = sorted(unread - by_job.keys())[:SWEEP_READS_MAX]
        if facts is not None:
            room = min(METRIC_READS_MAX, SWEEP_READS_MAX - len(new))
            new += sorted(unread & by_job.keys())[:room]
        for job in await self.slurm.get_jobs(new, concurrency=READ_CONCURRENCY):
            self._learn(job)
        for job_id in set(new) - self._job_pods.keys():
            self._job_pods[job_id] = None  # gone meanwhile: pruned next sweep
        return {
            j: pods for j, pods in self._job_pods.items() if pods is not None and j not in by_job
        }

    def _learn(self, job: SlurmJob) -> None:
        pods = dangling.ours(job, self.cfg.mcs_label)
        self._job_pods[job.job_id] = pods
        self.poller.remember(job)
        if pods is not None:
            self.node_reconcile.job_partitions_seen(p for p in job.partition.split(",") if p)

    async def _pods_of(
        self, named: dict[int, tuple[str, ...]], known: dict[str, KubeObject | None]
    ) -> dict[str, KubeObject | None]:
        """The pods ``named`` names that ``known`` lacks."""
        out: dict[str, KubeObject | None] = {}
        for keys in named.values():
            for k in keys:
                if k not in known and k not in out:
                    out[k] = self.caches.pods.get(k) or await self._get_pod(k)
        return out

    async def _get_pod(self, key: str) -> KubeObject | None:
        ns, _, name = key.partition("/")
        try:
            return await self.kube.get_pod(ns, name)
        except KubeNotFound:
            return None
        except BridgeError:
            # Unknown is not gone: pretend it exists.
            return {"metadata": {"namespace": ns, "name": name}}
