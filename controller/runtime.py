"""The running controller: watches and a Slurm poller feed a keyed work queue; workers
run the pure plans (:mod:`controller.jobs`, :mod:`controller.pods`, :mod:`controller.nodes`)
and apply them; a periodic sweep handles dangling jobs (:mod:`controller.dangling`).

Keys: ``("job", id)`` and ``("node", name)``. Caches are rebuilt by listing on start:
nothing is lost by a restart (the pod label and the job's admin_comment are the links).

Only pods of the bridge's ``schedulerName`` are watched, and a pod's job-id label is never
believed on its own: before a job is cancelled or its pods failed or finalized, the job is
read once and its admin_comment must name this cluster and the pod
(:func:`bridge.translate.job_names_pod`). A pod whose label names a job that is not its
own is ignored (a Warning Event where its namespace is managed). Pods of namespaces that
left the managed set are still the bridge's when their jobs say so, and are ended.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable
from typing import Literal, Protocol

from bridge.clock import Clock, SystemClock, idle_backoff, idle_cap
from bridge.config import BridgeConfig
from bridge.errors import BridgeError, KubeNotFound, SlurmError, SlurmNotFound
from bridge.kube.client import KubeClient
from bridge.kube.events import EventRecorder
from bridge.kube.namespaces import CachedNamespaceLabels, kube_namespace_fetch
from bridge.kube.resources import NODES, PODS, KubeObject, slim
from bridge.kube.watch import Watcher, WatchEvent
from bridge.logging import get_logger
from bridge.slurm.client import SlurmClient
from bridge.slurm.fetching import state_requests
from bridge.slurm.models import JobState, JobStateItem, SlurmJob, SlurmNode
from bridge.translate import (
    BackLink,
    TranslateSettings,
    back_link,
    foreign_label_message,
    job_names_pod,
    kobj,
    link_is_ours,
    pod_job_id,
)
from bridge.wellknown import LABEL_JOB_ID, REASON_FOREIGN_JOB_LABEL
from bridge.workqueue import WorkQueue
from controller import claims, dangling, jobs, nodes, pods, preemption
from controller.apply import Applier
from controller.model import (
    UNKNOWN,
    Action,
    CancelJob,
    DeleteClaim,
    DeleteSlurmNode,
    DrainSlurmNode,
    JobKind,
    JobView,
    JoinPartition,
    MarkExternalNode,
    RegisterExternalNode,
    ReleaseClaim,
    ResumeSlurmNode,
    SetNodeTopology,
    pod_done,
    pod_ns_name,
    slim_pod,
)
from controller.slurm_metrics import JobFactsTable, JobsSummary, JobTally

log = get_logger("controller")

Key = tuple[Literal["job", "node"], str]
# New active jobs no pod names that the dangling sweep reads (by id) per sweep, at most.
SWEEP_READS_MAX = 256
# Of those, the bridge's own jobs read for the polled job metrics (partition, reason) per
# sweep: few, so that following 10,000 jobs adds <= 0.3 requests/s at a 30 s resync
# (issue #14's steady budget is 2 a component); a new job is read within minutes.
METRIC_READS_MAX = 8
SWEEP_READ_CONCURRENCY = 8
RETRY_BASE_SECONDS = 0.5
RETRY_MAX_SECONDS = 30.0
# How long a namespace's labels are trusted (managedNamespaceSelector, for the Warning on
# a forged label and the pods of a job Slurm no longer knows).
NAMESPACE_CACHE_SECONDS = 30.0
# Actions after which the controller reads the Slurm node again (not waiting for a sweep).
SLURM_NODE_CHANGES = (
    DrainSlurmNode,
    ResumeSlurmNode,
    RegisterExternalNode,
    MarkExternalNode,
    JoinPartition,
    SetNodeTopology,
    DeleteSlurmNode,
)


class SlurmReadObserver(Protocol):
    """Told what the sweep read (the Slurm-side metrics: :mod:`controller.slurm_metrics`)."""

    def jobs_summarized(self, summary: JobsSummary) -> None: ...

    def nodes_listed(self, nodes: Iterable[SlurmNode]) -> None: ...


def _running(state: JobState | None) -> bool:
    return state is not None and state.primary == "RUNNING"


def _node_of(pod: KubeObject) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


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
    ) -> None:
        self.cfg = cfg
        self.slurm_observer = slurm_observer
        self.slurm = slurm
        self.kube = kube
        self.clock: Clock = clock or SystemClock()
        self.events = events
        self.applier = Applier(slurm, kube, events, on_applied)
        self.queue: WorkQueue[Key] = WorkQueue(
            self.clock, base_backoff=RETRY_BASE_SECONDS, max_backoff=RETRY_MAX_SECONDS
        )
        self.pods: dict[str, KubeObject] = {}
        self.by_job: dict[int, set[str]] = {}
        # node name -> keys of the labelled pods bound to it (a node event looks up its
        # pods here: a scan of every pod per node event was O(pods x nodes) at start-up)
        self.by_node: dict[str, set[str]] = {}
        # Pods deleted before their claims were released: job -> key -> last state.
        self.deleted: dict[int, dict[str, KubeObject]] = {}
        self.released: set[str] = set()  # uids of existing pods whose claims were released
        self.nodes: dict[str, KubeObject] = {}
        self.slurm_nodes: dict[str, SlurmNode] = {}
        self.slurm_nodes_known = False  # the node list was read at least once
        # Partitions the bridge's jobs were seen in (managed-node taints); only grows.
        self.job_partitions: set[str] = set()
        self._policy: nodes.NodePolicy | None = None  # cached; dropped when inputs change
        self.views: dict[int, JobView] = {}
        self.synced = asyncio.Event()
        # Set to poll Slurm before the interval is up (a new job id appeared).
        self.poll_now = asyncio.Event()
        self.slurm_ok = False
        self.slurm_failures = 0  # failed Slurm polls/sweeps in a row (readiness, tests)
        self._listed = 0
        # Slurm's job states for the first sweep, asked while the watches list (both take
        # seconds at a busy site; the sweep waited for the lists, then for Slurm).
        self._first_states: asyncio.Task[tuple[JobStateItem, ...]] | None = None
        # Active Slurm jobs read once by the dangling sweep: id -> pods named (None: not
        # ours). Pruned to the active jobs every sweep.
        self._job_pods: dict[int, tuple[str, ...] | None] = {}
        # What those reads (and the poller's) said, for the job metrics ("polled" mode):
        # kept while Slurm lists the job, ended or not (controller/slurm_metrics.py).
        self.job_facts = JobFactsTable(cfg.mcs_label)
        # job id -> its back-link when it is ours (None: read, and not ours). Read once,
        # the first time an action on the job's pods is planned.
        self.links: dict[int, BackLink | None] = {}
        # job id -> the labelled pods that left (deleted): what "all pods deleted" is
        # proven against. Dropped with the job.
        self.departed: dict[int, dict[str, KubeObject]] = {}
        # managedNamespaceSelector: the labels of the namespaces of labelled pods
        self._namespaces = CachedNamespaceLabels(
            kube_namespace_fetch(kube), self.clock, NAMESPACE_CACHE_SECONDS
        )
        # Read RUNNING jobs' records for a preemption (a bridge partition has a GraceTime:
        # controller/preemption.py); the last job id read, for the next poll's turn.
        self.preempt_watch = False
        self._preempt_cursor = 0
        self._grace_warned: tuple[str, ...] = ()

    # ------------------------------------------------------------------ caches
    def _track(self, key: str, pod: KubeObject | None) -> None:
        old = self.pods.pop(key, None)
        if old is not None and (j := pod_job_id(old)) is not None:
            self.by_job.get(j, set()).discard(key)
            if pod is None or pod_job_id(pod) != j:
                self.departed.setdefault(j, {})[key] = old
            self.queue.add(("job", str(j)))
        if old is not None and (node := _node_of(old)):
            keys = self.by_node.get(node)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self.by_node[node]
        if pod is not None:
            self.pods[key] = pod
            if node := _node_of(pod):
                self.by_node.setdefault(node, set()).add(key)
            if (j := pod_job_id(pod)) is not None:
                if j not in self.views:
                    self.poll_now.set()  # a job never asked about: ask now, not next tick
                self.by_job.setdefault(j, set()).add(key)
                self.queue.add(("job", str(j)))

    async def on_pod(self, ev: WatchEvent) -> None:
        if ev.type == "DELETED":
            uid = kobj.uid(ev.object)
            if uid in self.released:
                self.released.discard(uid)
            elif (j := pod_job_id(ev.object)) is not None and claims.pod_claims(ev.object)[0]:
                self.deleted.setdefault(j, {})[ev.key] = ev.object
                self.queue.add(("job", str(j)))
        self._track(ev.key, None if ev.type == "DELETED" else ev.object)

    async def on_node(self, ev: WatchEvent) -> None:
        name = ev.key
        old = self.nodes.get(name)
        if nodes.is_external(ev.object) or (old is not None and nodes.is_external(old)):
            self._policy = None  # the partitions external nodes name may have changed
        if ev.type == "DELETED":
            self.nodes.pop(name, None)
            if self.events is not None:
                self.events.forget(ev.object)
        else:
            self.nodes[name] = ev.object
            self.queue.add(("node", name))
        # Pods on this node may now count as stuck Terminating.
        for key in self.by_node.get(name, ()):
            if (j := pod_job_id(self.pods[key])) is not None:
                self.queue.add(("job", str(j)))

    # ------------------------------------------------------------------ Slurm poller
    def _poll_ids(self) -> list[int]:
        return sorted(j for j in self.by_job if not self.views.get(j, UNKNOWN).finished)

    async def poll_once(self) -> int:
        """Ask Slurm about every job our pods name that is not known to be over; returns
        how many of them changed."""
        ids = self._poll_ids()
        if not ids:
            return 0
        changed = 0
        try:
            states = {s.job_id: s.state for s in await self.slurm.list_job_states(ids)}
        except SlurmError as e:
            self.slurm_ok = False
            self.slurm_failures += 1
            log.warning("slurm_poll_failed", error=str(e), jobs=len(ids))
            return 0  # unknown is not gone: nothing changes
        self.slurm_ok = True
        self.slurm_failures = 0
        preempted = await self._preempted(sorted(j for j in ids if _running(states.get(j))))
        for j in ids:
            st = states.get(j)
            if st is not None and st.active:
                was = self.views.get(j, UNKNOWN).preempted and st.primary == "RUNNING"
                view = JobView(JobKind.ACTIVE, st.primary, preempted=was or j in preempted)
            else:
                # Ended, or not listed: one GET for Slurm's reason (or a definite 404).
                try:
                    job = await self.slurm.get_job(j)
                except SlurmNotFound:
                    view = JobView(JobKind.GONE)
                except SlurmError as e:
                    log.warning("slurm_job_get_failed", job_id=j, error=str(e))
                    continue
                else:
                    self._remember(job)
                    self.links[j] = self._link_of(job)
                    kind = JobKind.ACTIVE if job.state.active else JobKind.ENDED
                    view = JobView(kind, job.state.primary, job.state_reason)
            if self.views.get(j) != view:
                log.info("slurm_job_state", job_id=j, state=view.state, kind=view.kind.value)
                self.views[j] = view
                self.queue.add(("job", str(j)))
                changed += 1
        return changed

    async def _preempted(self, running: list[int]) -> set[int]:
        """Which of the next few RUNNING jobs (in turn) Slurm selected for preemption;
        none read while no bridge partition has a GraceTime."""
        if not self.preempt_watch:
            return set()
        running = [j for j in running if not self.views.get(j, UNKNOWN).preempted]
        batch, self._preempt_cursor = preemption.next_reads(running, self._preempt_cursor)
        try:
            read = await self.slurm.get_jobs(batch, concurrency=SWEEP_READ_CONCURRENCY)
        except SlurmError as e:
            log.warning("slurm_preempt_read_failed", error=str(e))
            return set()
        out = {job.job_id for job in read if preemption.selected_for_preemption(job)}
        for j in out:
            log.info("slurm_job_preempting", job_id=j)
        return out

    async def _check_grace(self) -> None:
        """Whether to watch for preemption, and the grace contract's warnings (said once
        per change)."""
        try:
            parts = await self.slurm.list_partitions()
        except SlurmError as e:
            log.warning("slurm_partitions_failed", error=str(e))
            return
        mine = nodes.bridge_partitions(self.cfg.partition, self.job_partitions, self.nodes.values())
        self.preempt_watch = preemption.watch(parts, mine)
        warnings = tuple(
            preemption.grace_warnings(parts, mine, self.cfg.slurm_poll_interval_seconds)
        )
        if warnings != self._grace_warned:
            self._grace_warned = warnings
            for w in warnings:
                log.warning("grace_contract_at_risk", message=w)

    # ------------------------------------------------------------------ sweeps
    @property
    def _polled_job_metrics(self) -> bool:
        """The job metrics come from what the controller reads anyway (the default)."""
        return self.slurm_observer is not None and self.cfg.controller.slurm_job_metrics == "polled"

    def _remember(self, job: SlurmJob) -> None:
        if self._polled_job_metrics:
            self.job_facts.learn(job)

    async def sweep_once(self) -> None:
        """Dangling jobs, Slurm node states, the job metrics, and a resync of every key."""
        states: tuple[JobStateItem, ...] | None = None
        try:
            # The first sweep takes the states asked while the watches listed.
            first, self._first_states = self._first_states, None
            states = await (first if first is not None else self._scan_states())
            named = await self._active_jobs_of_ours(states)
            found: dict[str, KubeObject | None] = {}
            for keys in named.values():
                for k in keys:
                    if k in found:
                        continue
                    found[k] = self.pods.get(k) or await self._get_pod(k)
            actions = dangling.plan(named, found)
            if actions:
                # The cache may predate an update of the job: confirm with a fresh read.
                ids = [a.job_id for a in actions if isinstance(a, CancelJob)]
                read = await self.slurm.get_jobs(ids, concurrency=SWEEP_READ_CONCURRENCY)
                for job in read:
                    self._remember(job)
                fresh = dangling.candidates(read, self.cfg.mcs_label)
                actions = dangling.plan(fresh, found | await self._pods_of(fresh, found))
            await self.applier.apply(actions)
        except SlurmError as e:
            log.warning("slurm_sweep_failed", error=str(e))
        await self._job_metrics(states)
        await self._check_grace()
        try:
            self.slurm_nodes = {n.name: n for n in await self.slurm.list_nodes()}
        except SlurmError as e:
            log.warning("slurm_nodes_failed", error=str(e))
        else:
            if self.slurm_observer is not None:
                self.slurm_observer.nodes_listed(self.slurm_nodes.values())
            self.slurm_nodes_known = True
            orphans = nodes.orphans(
                self.slurm_nodes.values(), self.nodes.values(), self.node_policy()
            )
            try:
                await self.applier.apply(orphans)
            except BridgeError as e:
                # Retried next sweep; the node and job keys below still get queued.
                log.warning("orphan_nodes_failed", error=str(e))
        for name in self.nodes:
            self.queue.add(("node", name))
        for j in list(self.by_job):
            self.queue.add(("job", str(j)))

    async def _scan_states(self) -> tuple[JobStateItem, ...]:
        """Every job's state, streamed: the active rows kept (all of them for the polled
        job metrics), never the whole decoded answer of Slurm's table."""
        polled = self._polled_job_metrics
        return await self.slurm.scan_job_states(lambda s: polled or s.state.active)

    async def _job_metrics(self, states: tuple[JobStateItem, ...] | None) -> None:
        """Summarize Slurm's jobs for the observer, as ``controller.slurmJobMetrics`` says:
        ``polled`` from this sweep's state list (``states``; None: it failed) and the jobs'
        reads, ``table`` from a streamed read of the whole job table, ``off`` not at all."""
        mode = self.cfg.controller.slurm_job_metrics
        if self.slurm_observer is None or mode == "off":
            return
        if mode == "polled":
            if states is not None:
                summary = self.job_facts.summary(states, self.by_job.keys() | self.views.keys())
                self.slurm_observer.jobs_summarized(summary)
            return
        try:
            tally = JobTally(self.cfg.mcs_label)
            await self.slurm.scan_jobs(tally.add)  # streamed, counted, nothing held
        except SlurmError as e:
            log.warning("slurm_job_metrics_failed", error=str(e))
        else:
            self.slurm_observer.jobs_summarized(tally.summary())

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
        active = {s.job_id for s in states if s.state.active}
        for job_id in self._job_pods.keys() - active:
            del self._job_pods[job_id]
        if self._polled_job_metrics:
            self.job_facts.keep_only({s.job_id for s in states})
        unread = active - self._job_pods.keys()
        new = sorted(unread - self.by_job.keys())[:SWEEP_READS_MAX]
        if self._polled_job_metrics:
            room = min(METRIC_READS_MAX, SWEEP_READS_MAX - len(new))
            new += sorted(unread & self.by_job.keys())[:room]
        for job in await self.slurm.get_jobs(new, concurrency=SWEEP_READ_CONCURRENCY):
            self._learn(job)
        for job_id in set(new) - self._job_pods.keys():
            self._job_pods[job_id] = None  # gone meanwhile: pruned next sweep
        return {
            j: pods
            for j, pods in self._job_pods.items()
            if pods is not None and j not in self.by_job
        }

    def _learn(self, job: SlurmJob) -> None:
        pods = dangling.ours(job, self.cfg.mcs_label)
        self._job_pods[job.job_id] = pods
        self._remember(job)
        if pods is not None:
            new = {p for p in job.partition.split(",") if p} - self.job_partitions
            if new:
                self.job_partitions |= new
                self._policy = None

    async def _pods_of(
        self, named: dict[int, tuple[str, ...]], known: dict[str, KubeObject | None]
    ) -> dict[str, KubeObject | None]:
        """The pods ``named`` names that ``known`` lacks."""
        out: dict[str, KubeObject | None] = {}
        for keys in named.values():
            for k in keys:
                if k not in known and k not in out:
                    out[k] = self.pods.get(k) or await self._get_pod(k)
        return out

    # ------------------------------------------------------------------ nodes
    def node_policy(self) -> nodes.NodePolicy:
        if self._policy is not None:
            return self._policy
        c = self.cfg
        self._policy = nodes.NodePolicy(
            scheduler_name=c.scheduler_name,
            mcs_label=c.mcs_label,
            default_partition=c.partition,
            bridge_partitions=nodes.bridge_partitions(
                c.partition, self.job_partitions, self.nodes.values()
            ),
            sync_state=c.controller.sync_node_state,
            cordon_on_slurm_drain=c.controller.cordon_on_slurm_drain,
            topology=TranslateSettings.from_config(c).topology,
        )
        return self._policy

    async def _reconcile_node(self, name: str) -> None:
        node = self.nodes.get(name)
        if node is None:
            return
        sname = nodes.slurm_name(node)
        before = self.slurm_nodes.get(sname)
        actions = nodes.plan(node, before, self.node_policy(), self.slurm_nodes_known)
        try:
            await self.applier.apply(actions)
        finally:
            if any(isinstance(a, SLURM_NODE_CHANGES) for a in actions):
                # Read the node again now: the next step (mark, join, delete, taint)
                # should not wait for the next sweep.
                await self._refresh_slurm_node(sname)
                if self.slurm_nodes.get(sname) != before:
                    self.queue.add(("node", name))

    async def _refresh_slurm_node(self, sname: str) -> None:
        try:
            self.slurm_nodes[sname] = await self.slurm.get_node(sname)
        except SlurmNotFound:
            self.slurm_nodes.pop(sname, None)
        except SlurmError as e:
            log.warning("slurm_node_get_failed", node=sname, error=str(e))

    async def _get_pod(self, key: str) -> KubeObject | None:
        ns, _, name = key.partition("/")
        try:
            return await self.kube.get_pod(ns, name)
        except KubeNotFound:
            return None
        except BridgeError:
            # Unknown is not gone: pretend it exists.
            return {"metadata": {"namespace": ns, "name": name}}

    # ------------------------------------------------------------------ reconcile
    async def reconcile(self, key: Key) -> None:
        kind, ident = key
        if kind == "node":
            await self._reconcile_node(ident)
            return
        job_id = int(ident)
        keys = self.by_job.get(job_id, set())
        job_pods = [self.pods[k] for k in sorted(keys) if k in self.pods]
        view = self.views.get(job_id, UNKNOWN)
        gone = dict(self.deleted.get(job_id, {}))
        # Claims first; a failed release never holds up the rest (the key is retried).
        actions = claims.plan(job_pods, list(gone.values()), self.released)
        if view.kind is not JobKind.UNKNOWN and (
            job_id in self.links
            or self.departed.get(job_id)
            or any(pod_done(p) for p in job_pods)
            or self._job_actions(job_id, job_pods, view)
        ):
            # Something is, or soon may be, done on the pods' label's word (a pod ended or
            # left: a forged pod that runs must not keep the job alive either): only the
            # pods the job's admin_comment names count (none when the job is not ours).
            mine = await self._named_pods(job_id, job_pods, view)
            named = {id(p) for p in mine}
            await self._warn_foreign(job_id, [p for p in job_pods if id(p) not in named])
            if mine or self._departed_named(job_id):
                actions += self._job_actions(job_id, mine, view)
        self._recheck_stuck(job_id, job_pods)
        await self.applier.apply(actions)
        # Remembered for pods that still exist (forgotten with them); a pod deleted
        # meanwhile is dropped here, after its one more (no-op) plan.
        planned = {a.pod_uid for a in actions if isinstance(a, ReleaseClaim | DeleteClaim)}
        self.released = (self.released | planned) - {kobj.uid(p) for p in gone.values()}
        left = self.deleted.get(job_id, {})
        for k in gone:
            left.pop(k, None)
        if not left:
            self.deleted.pop(job_id, None)
        if not job_pods and (view.finished or (job_id in self.links and not self.links[job_id])):
            # Nothing left to watch for this job (ended, or not ours and no pod names it).
            self.by_job.pop(job_id, None)
            self.views.pop(job_id, None)
            self.links.pop(job_id, None)
            self.departed.pop(job_id, None)

    # ------------------------------------------------------------------ ownership
    def _job_actions(self, job_id: int, job_pods: list[KubeObject], view: JobView) -> list[Action]:
        """What the job and pod reconcilers would do with ``job_pods`` (pure)."""
        c = self.cfg.controller
        return [
            *jobs.plan(job_id, job_pods, view, c.job_ended_pod_policy),
            *pods.plan(
                job_id,
                job_pods,
                view,
                self.nodes,
                self.clock.now(),
                c.stuck_terminating_grace_seconds,
            ),
        ]

    def _link_of(self, job: SlurmJob) -> BackLink | None:
        link = back_link(job.admin_comment)
        return (
            link
            if link is not None and link_is_ours(link, job.mcs_label, self.cfg.mcs_label)
            else None
        )

    async def _named_pods(
        self, job_id: int, job_pods: list[KubeObject], view: JobView
    ) -> list[KubeObject]:
        """The pods of ``job_pods`` the job's back-link names. A job Slurm no longer knows
        (GONE) and was never read cannot be proven: only pods of managed namespaces count
        then (the webhook keeps their job-id label to the bridge), and nothing is
        cancelled for them (the job is gone)."""
        if job_id not in self.links and view.kind is JobKind.GONE:
            return [p for p in job_pods if await self._namespace_managed(pod_ns_name(p)[0])]
        if job_id not in self.links:
            try:
                self.links[job_id] = self._link_of(await self.slurm.get_job(job_id))
            except SlurmNotFound:
                return []  # the poller will call it GONE
        link = self.links[job_id]
        return [p for p in job_pods if link is not None and job_names_pod(link, p)]

    def _departed_named(self, job_id: int) -> bool:
        """A pod the job's back-link names was labelled with it and is gone."""
        link = self.links.get(job_id)
        left = self.departed.get(job_id, {})
        return link is not None and any(job_names_pod(link, p) for p in left.values())

    async def _warn_foreign(self, job_id: int, strangers: list[KubeObject]) -> None:
        for pod in strangers:
            ns, name = pod_ns_name(pod)
            log.warning("foreign_job_label_ignored", pod=f"{ns}/{name}", job_id=job_id)
            if self.events is not None and await self._namespace_managed(ns):
                await self.events.record_change(
                    pod, "Warning", REASON_FOREIGN_JOB_LABEL, foreign_label_message(job_id)
                )

    async def _namespace_managed(self, ns: str) -> bool:
        cfg = self.cfg
        if ns in cfg.managed_namespaces:
            return True
        if cfg.managed_namespace_selector is None:
            return False
        return cfg.namespace_is_managed(ns, await self._namespaces.labels(ns))

    def _recheck_stuck(self, job_id: int, job_pods: list[KubeObject]) -> None:
        """Look at the job again when a Terminating pod on a dead node comes due (its
        grace period plus ``stuckTerminatingGraceSeconds``): no event would say so."""
        grace = self.cfg.controller.stuck_terminating_grace_seconds
        dues = [d for p in job_pods if (d := pods.release_due(p, self.nodes, grace)) is not None]
        if dues:
            wait = (min(dues) - self.clock.now()).total_seconds()
            if wait > 0:
                self.queue.add_after(("job", str(job_id)), wait)

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            if key is None:
                return
            try:
                await self.reconcile(key)
            except BridgeError as e:
                delay = self.queue.add_rate_limited(key)
                log.warning("reconcile_failed", key="/".join(key), error=str(e), retry_in=delay)
            else:
                self.queue.forget(key)
            finally:
                self.queue.done(key)

    # ------------------------------------------------------------------ loops
    async def _every(self, seconds: float, step: Callable[[], Awaitable[None]]) -> None:
        while True:
            try:
                await step()
            except BridgeError as e:
                log.warning("loop_step_failed", error=str(e))
            await self.clock.sleep(seconds)

    async def _poll_loop(self) -> None:
        """Poll Slurm every ``slurmPollIntervalSeconds`` while job states change, backing off
        to :data:`~bridge.clock.IDLE_INTERVAL_MAX` while none does (a quiet cluster: one
        request a second); a new job id pokes it at once."""
        idle = 0
        while True:
            self.poll_now.clear()
            try:
                idle = 0 if await self.poll_once() else idle + 1
            except BridgeError as e:
                log.warning("loop_step_failed", error=str(e))
            # Idle: 1.5 requests a second at most (idle_cap), however many ids a poll lists.
            cap = idle_cap(state_requests(len(self._poll_ids())))
            interval = idle_backoff(self.cfg.slurm_poll_interval_seconds, idle, cap)
            sleeper = asyncio.ensure_future(self.clock.sleep(interval))
            poked = asyncio.ensure_future(self.poll_now.wait())
            try:
                await asyncio.wait({sleeper, poked}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for t in (sleeper, poked):
                    t.cancel()

    async def _watch(
        self, watcher: Watcher, handler: Callable[[WatchEvent], Awaitable[None]]
    ) -> None:
        async with watcher:
            for ev in await watcher.relist():
                await handler(ev)
            self._listed += 1
            if self._listed == 2:
                self.synced.set()
            async for ev in watcher.events():
                await handler(ev)

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
            asyncio.create_task(self._watch(pod_watch, self.on_pod)),
            asyncio.create_task(self._watch(node_watch, self.on_node)),
        ]
        # Not among ``tasks``: the first sweep awaits it (and sees its error, if any).
        self._first_states = asyncio.create_task(self._scan_states())
        try:
            await self.synced.wait()
            log.info("controller_synced", pods=len(self.pods), nodes=len(self.nodes))
            tasks += [
                asyncio.create_task(self._worker()) for _ in range(self.cfg.controller.workers)
            ]
            tasks.append(asyncio.create_task(self.queue.run_timers()))
            tasks.append(asyncio.create_task(self._poll_loop()))
            tasks.append(
                asyncio.create_task(
                    self._every(self.cfg.slurm_resync_interval_seconds, self.sweep_once)
                )
            )
            await asyncio.gather(*tasks)
        finally:
            first, self._first_states = self._first_states, None
            for t in [*tasks, *([first] if first is not None else [])]:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError, BridgeError):
                    await t
            if first is not None:
                with contextlib.suppress(asyncio.CancelledError, BridgeError):
                    await first
            # The queue stays open: a controller that leads again (re-election) runs on it.
