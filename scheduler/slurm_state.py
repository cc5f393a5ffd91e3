"""What the scheduler knows of Slurm between cycles (:class:`SlurmState`, the Slurm-side
counterpart of :class:`scheduler.state.KubeState`): the start-up sweep's index of the
bridge's active jobs by group uid, the pending jobs it follows (with the poller, and per
partition for the start rule), the shapes Slurm refused to start at once lately, Slurm's
nodes and partitions, and the jobs Slurm no longer knows.

Restart safety: the pod<->job link is written on both sides (pod label + Slurm
admin_comment); until the start-up sweep ends only a group no earlier scheduler can have
seen may get a new job (:meth:`SlurmState.may_create`).

Nothing here touches a group's state or the work queue: the poller's news comes back to
the cycle as the key of the group it concerns (:meth:`SlurmState.changed`,
:meth:`SlurmState.vanished`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

import structlog

from bridge.bounded import BoundedMap, BoundedSet
from bridge.clock import Clock
from bridge.errors import BridgeError
from bridge.expected import Plan, job_start, replanned
from bridge.kube.client import KubeClient
from bridge.kube.resources import PODS, KubeObject
from bridge.loops import LoopCounter, LoopGuard
from bridge.models import GroupId
from bridge.queueplan import NO_QUEUE_PLAN, PLANNABLE_REASONS, QueueStart, plan_queue
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import JobStateItem, SlurmJob, SlurmNode, fold_hetjobs
from bridge.translate import group_of_link, pod_job_id
from bridge.wellknown import LABEL_JOB_ID
from bridge.workloads import kind_named
from scheduler.decide import PartitionView, Shape, plan_shown
from scheduler.poller import JobPoller
from scheduler.state import GroupState, KubeState

log = structlog.get_logger("scheduler")

# Slurm's reasons of a job held at priority 0 (by its user, by an admin).
HELD_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin"})
# The start-up sweep reads the active jobs no pod names by id up to this many, else it
# streams Slurm's job table once.
SWEEP_READS_MAX = 1000
SWEEP_READ_CONCURRENCY = 16
# A shape Slurm refused to start at once is not tried again in its partition for this
# long (a group refused now is queued, and then its pending job holds the others back).
REFUSED_MEMORY_SECONDS = 2.0
# Job ids remembered as not to be used again (purged, or not the group's), at most.
GONE_MAX = 10_000
# Partitions (named by pods) the start rule remembers refusals of, at most.
PARTITIONS_MAX = 1024
# Jobs that hold or may take nodes: what the bridge's plan of Slurm's queue reads.
ACTIVE_STATES = frozenset({"PENDING", "RUNNING", "COMPLETING", "SUSPENDED"})
# A new pending job awaiting the bridge's plan brings the next plan refresh forward to
# this long after the last one (a burst of new jobs: one read), not sooner.
PLAN_NEW_JOBS_AFTER_SECONDS = 5.0


def _group_of_active(job: SlurmJob, mcs_label: str) -> GroupId | None:
    """The group an ACTIVE job of this bridge (its back-link names ``mcs_label``) is for,
    when it has a uid; else None (:func:`bridge.translate.group_of_link`)."""
    return group_of_link(job.admin_comment, mcs_label) if job.state.active else None


def partition_sizes(nodes: tuple[SlurmNode, ...]) -> dict[str, PartitionView]:
    """Per partition: how many nodes, and the largest node's CPUs and memory."""
    members: dict[str, list[SlurmNode]] = {}
    for n in nodes:
        for p in n.partitions:
            members.setdefault(p, []).append(n)
    return {
        p: PartitionView(
            nodes=len(ns),
            max_node_cpus=max(n.cpus for n in ns) or None,
            max_node_memory_mib=max(n.real_memory_mib for n in ns) or None,
        )
        for p, ns in members.items()
    }


async def whole_jobs(slurm: SlurmClient, jobs: Iterable[SlurmJob]) -> list[SlurmJob]:
    """``jobs`` with every hetjob as its leader carrying all its components (a component
    read alone, or a leader from Slurm's flat job list, is read again by the leader's id,
    once per hetjob)."""
    out: list[SlurmJob] = []
    leaders: set[int] = set()
    for job in jobs:
        if job.het_job_id is None or job.het_components:
            out.append(job)
        else:
            leaders.add(job.het_job_id)
    leaders -= {j.job_id for j in out}
    if leaders:
        out += await slurm.get_jobs(sorted(leaders), concurrency=SWEEP_READ_CONCURRENCY)
    return out


class SlurmState:
    def __init__(
        self,
        kube: KubeClient,
        slurm: SlurmClient,
        clock: Clock,
        state: KubeState,
        poller: JobPoller,
        on_loop_failure: LoopCounter | None = None,
    ) -> None:
        self.kube = kube
        self.slurm = slurm
        self.clock = clock
        self.state = state
        self.poller = poller
        # From the start-up sweep: (namespace, group uid) -> job; taken only by the group
        # its back-link names whole (kind, namespace, name, uid).
        self.jobs_by_group_uid: dict[tuple[str, str], SlurmJob] = {}
        self.swept = False
        # Groups that waited for the sweep (:class:`scheduler.decide.AwaitSweep`): processed
        # again once it ends.
        self.after_sweep: set[str] = set()
        # Groups of the initial pod list whose pods record a held pending job
        # (:meth:`scheduler.cycle.Scheduler.on_pod_event`): not processed before the sweep
        # ends, then in the work queue's idle lane, behind every group that needs action.
        self.restored_held: set[str] = set()
        # Job ids Slurm no longer knows, or that are not the group's: pod labels name them,
        # so they are tenant input and remembered at most GONE_MAX (a dropped one is read
        # once more when a label names it again).
        self.gone: BoundedSet[int] = BoundedSet("scheduler-gone-jobs", GONE_MAX)
        # Told of a step of the start-up sweep that raised something unforeseen (a metric).
        self.on_loop_failure = on_loop_failure
        self._job_group: dict[int, str] = {}  # followed job id -> group key
        # The bridge's jobs pending per partition ("" = the default), for the start rule.
        self.pending_in: dict[str, set[int]] = {}
        self._job_partition: dict[int, str] = {}
        # Per partition, which a pod names (tenant text, checked by Slurm only later):
        # bounded. partition -> (when, shape)
        self._refused: BoundedMap[str, list[tuple[float, Shape]]] = BoundedMap(
            "scheduler-refused-shapes", PARTITIONS_MAX
        )
        self.slurm_nodes: frozenset[str] = frozenset()
        # name -> CPUs, from the same list: whether a node runs one thread per core
        # (scheduler.start, a gang's allocation read from its cores)
        self.node_cpus: dict[str, int] = {}
        self.partition_size: dict[str, PartitionView] = {}  # from Slurm's node list
        self.nodes: tuple[SlurmNode, ...] = ()  # the same list (the bridge's plan's)
        # The bridge's plan of the followed pending jobs (bridge.queueplan), by job id,
        # from the last refresh (replaced whole each time).
        self.queue_plans: dict[int, QueueStart] = {}
        self._awaiting: set[int] = set()  # followed jobs that may await the bridge's plan

    # ------------------------------------------------------------------ following
    def watch(self, g: GroupState, job: SlurmJob) -> None:
        """Let the poller follow ``job`` (pending) for group ``g``."""
        self._job_group[job.job_id] = g.ref.key
        self._job_partition.setdefault(job.job_id, job.partition)
        held = g.job_spec is not None and g.job_spec.priority == 0
        self._count_pending(job, held=held)
        self._awaiting.add(job.job_id)
        self.poller.watch(job)

    def _count_pending(self, job: SlurmJob, *, held: bool = False) -> None:
        """Count a followed pending job as holding its partition back, unless it is held:
        Slurm starts an immediate job ahead of a held one (on 26.05 a job at priority 0,
        JobHeldUser, did not stop job/allocate in its partition)."""
        part = self._job_partition.get(job.job_id)
        if part is None:
            return
        if held or job.state_reason in HELD_REASONS:
            self.pending_in.get(part, set()).discard(job.job_id)
        else:
            self.pending_in.setdefault(part, set()).add(job.job_id)

    def _not_pending(self, job_id: int) -> None:
        self._awaiting.discard(job_id)
        part = self._job_partition.pop(job_id, None)
        if part is not None:
            self.pending_in.get(part, set()).discard(job_id)

    def unwatch(self, job_id: int) -> None:
        self._job_group.pop(job_id, None)
        self._not_pending(job_id)
        self.poller.unwatch(job_id)

    def changed(self, job: SlurmJob) -> str | None:
        """The poller read ``job`` (its state changed, or a reason came): the key of the
        group following it, if any."""
        gkey = self._job_group.get(job.job_id)
        if job.state.primary != "PENDING":
            self._job_group.pop(job.job_id, None)  # the poller no longer follows it
            self._not_pending(job.job_id)
        else:
            self._count_pending(job)  # held, or released from its hold
            if job.job_id not in self.queue_plans:
                self._awaiting.add(job.job_id)
        return gkey

    def vanished(self, job_id: int) -> str | None:
        """Slurm no longer knows a followed job (purged): the key of its group, if any."""
        self.gone.add(job_id)
        gkey = self._job_group.pop(job_id, None)
        self._not_pending(job_id)
        return gkey

    async def replanned(self, step: float, since: float) -> list[SlurmJob]:
        """The followed pending jobs whose plan (``start_time``, :mod:`bridge.expected`)
        or reason changed for their pods since their group last read them: one streamed
        ``GET /jobs/`` (only the followed jobs decoded), whatever their number. A plan
        that moved by at most ``step`` seconds is not news; one that came due since the
        monotonic time ``since`` is. A hetjob is read whole (its leader, carrying its
        other components; its plan is the last component's). With only held jobs
        followed, nothing is read (a steady queue of held jobs costs no request)."""
        followed = dict(self._job_group)
        # Slurm plans no start for a held job: with only held jobs followed, nothing is
        # read (their release is seen at the next read that has others to plan)
        if not any(
            (g := self.state.groups.get(gkey)) is None
            or g.job is None
            or g.job.state_reason not in HELD_REASONS
            for gkey in followed.values()
        ):
            return []
        # a hetjob's other components too: its plan is its last component's
        ids = set(followed)
        for gkey in followed.values():
            g = self.state.groups.get(gkey)
            if g is not None and g.job is not None:
                ids.update(c.job_id for c in g.job.het_components)
        # the bridge's plan needs every active job (the same read: the finished ones are
        # skipped before decoding)
        planning = self.plans_queue
        listed = await self.slurm.scan_jobs(
            lambda j: j.state.primary == "PENDING" or (planning and j.state.active),
            job_ids=ids,
            states=ACTIVE_STATES if planning else frozenset(),
            sharing=planning,
        )
        now = self.clock.now()
        then = now - timedelta(seconds=self.clock.monotonic() - since)
        folded = fold_hetjobs(listed)
        old_plans = self.queue_plans
        if planning:
            want = {j.job_id for j in folded if j.job_id in followed}
            min_nodes, whole = self._own_asks(followed)
            known = (await self.slurm.sharing_codec()).reports_shared
            self.queue_plans = await asyncio.to_thread(
                functools.partial(
                    plan_queue,
                    listed,
                    self.nodes,
                    now,
                    want,
                    min_nodes=min_nodes,
                    whole=whole,
                    sharing_known=known,
                )
            )
        out = []
        for job in folded:
            g = self.state.groups.get(followed.get(job.job_id, ""))
            held = g.job if g is not None else None
            if held is None or held.job_id != job.job_id or held.state.primary != "PENDING":
                continue
            if len(job.components) != len(held.components):
                continue  # a component left PENDING: the poller reads the hetjob
            reasons = [c.state_reason for c in job.components]
            old = self._shown(held, old_plans, now)
            new = self._shown(job, self.queue_plans, now)
            if reasons != [c.state_reason for c in held.components] or replanned(
                old, new, then=then, now=now, step=step
            ):
                out.append(job)
        return out

    def _own_asks(self, followed: Mapping[int, str]) -> tuple[dict[int, int], set[int]]:
        """What Slurm's record of a pending job does not say, for the followed plain
        jobs, from their groups' specs: the minimum node count, and which ask whole
        nodes (v0.0.45's records read ``shared: []`` for every job)."""
        min_nodes: dict[int, int] = {}
        whole: set[int] = set()
        for job_id, gkey in followed.items():
            g = self.state.groups.get(gkey)
            spec = g.job_spec if g is not None else None
            if spec is not None and not spec.het_components:
                min_nodes[job_id] = spec.min_nodes
                if spec.exclusive:
                    whole.add(job_id)
        return min_nodes, whole

    @property
    def plans_queue(self) -> bool:
        """The bridge plans Slurm's queue itself (bridge.queueplan): it is on, plans are
        refreshed, and Slurm's nodes are known."""
        sched = self.state.cfg.scheduler
        return (
            sched.expected_start_bridge_plan
            and sched.expected_start_refresh_seconds > 0
            and bool(self.nodes)
        )

    def queue_plan(self, job: SlurmJob) -> QueueStart | None:
        """The bridge's plan of ``job`` from the last refresh (None: not made yet;
        :data:`NO_QUEUE_PLAN` when the bridge does not plan)."""
        if not self.plans_queue:
            return NO_QUEUE_PLAN
        return self.queue_plans.get(job.job_id)

    def _shown(self, job: SlurmJob, plans: Mapping[int, QueueStart], now: datetime) -> Plan:
        """The plan the pods of ``job`` show with the bridge's ``plans``."""
        queue = plans.get(job.job_id) if self.plans_queue else NO_QUEUE_PLAN
        reason = job.components[job.shown_offset].state_reason
        return plan_shown(job_start(job), reason, queue, now)

    def awaits_plan(self) -> bool:
        """A followed pending job (not held) has no plan of the bridge's yet: its pods
        show none until the next refresh, brought forward
        (:data:`PLAN_NEW_JOBS_AFTER_SECONDS`)."""
        if not self.plans_queue:
            return False
        for job_id in list(self._awaiting):
            g = self.state.groups.get(self._job_group.get(job_id, ""))
            if (
                job_id in self.queue_plans
                or g is None
                or g.job is None
                or g.job.job_id != job_id
                or g.job.state.primary != "PENDING"
                or g.job.components[g.job.shown_offset].state_reason not in PLANNABLE_REASONS
            ):
                self._awaiting.discard(job_id)  # planned, or nothing to plan (a held job
                # released is added again when the poller reads it: changed)
            else:
                return True
        return False

    # ------------------------------------------------------------------ the start rule's view
    def refused(self, partition: str, shape: Shape) -> None:
        """Slurm refused to start a job of ``shape`` at once in ``partition`` just now."""
        self._refused.setdefault(partition, []).append((self.clock.monotonic(), shape))

    def partition_view(self, part: str) -> PartitionView:
        """What the start rule knows of ``part``: the bridge's jobs pending there, shapes
        refused lately, its size."""
        now = self.clock.monotonic()
        refused = self._refused.get(part)
        if refused:
            refused[:] = [(t, sh) for t, sh in refused if now - t < REFUSED_MEMORY_SECONDS]
        size = self.partition_size.get(part, PartitionView())
        return PartitionView(
            pending=len(self.pending_in.get(part, ())),
            refused=tuple(sh for _, sh in refused or ()),
            nodes=size.nodes,
            max_node_cpus=size.max_node_cpus,
            max_node_memory_mib=size.max_node_memory_mib,
        )

    # ------------------------------------------------------------------ start-up
    async def sweep(self, lists_done: asyncio.Event | None = None) -> None:
        """:meth:`sweep_once` until it succeeds (the workers run meanwhile: a failed sweep
        is retried, never the end of the scheduler), backing off to 30 s."""
        delay = 1.0
        guard = LoopGuard("scheduler-sweep", self.clock, self.on_loop_failure)
        while True:
            try:
                await self.sweep_once(lists_done)
                return
            except BridgeError as e:
                log.warning("slurm_sweep_failed", error=str(e), retry_in=delay)
            except Exception as e:  # a bug or an unforeseen answer: logged, counted
                guard.failed(e, retry_in=delay)
            await self.clock.sleep(delay)
            delay = min(delay * 2, 30.0)

    async def sweep_once(self, lists_done: asyncio.Event | None = None) -> None:
        """Index the bridge's active jobs by group uid, once, at start, so a restarted
        scheduler never submits a duplicate.

        Only the jobs no pod names yet can matter (a pod's job-id label leads to its job):
        Slurm's compact state list gives the active ids, a paged list of the labelled pods
        the ids to skip, and the rest are read by id (:data:`SWEEP_READS_MAX`), or, when
        more are unknown, in one streamed ``GET /jobs/`` keeping only the bridge's. Slurm's
        whole table is never held, nor read at all in the usual case. With
        ``lists_done`` only the bound labelled pods are paged, at once, beside the state
        list and the watches' initial lists (after the lists they took 11-17 s at 21,000
        bound pods under load, docs/benchmarks.md); the unbound ones are read from the pod
        watch's cache once its initial list is in. Sound in any order: only this
        scheduler takes a job-id label off a pod (after cancelling the job), so a label
        seen at any time since the start still names its job; a pod bound between its
        page and the cache's read, or missed by a failed initial list, only costs its job
        a read by id."""
        started = self.clock.monotonic()
        took: dict[str, float] = {}  # when each part ended, s after the start (logged)

        def done(part: str) -> None:
            took[f"{part}_s"] = round(self.clock.monotonic() - started, 2)

        async def active_states() -> tuple[JobStateItem, ...]:
            states = await self.slurm.scan_job_states(state=lambda s: s.active)
            done("states")
            return states

        async def paged_labelled(*, bound_only: bool) -> set[int]:
            labelled = await self._labelled_jobs(bound_only=bound_only)
            done("labelled")
            return labelled

        async def cached_unbound(lists: asyncio.Event) -> set[int]:
            await lists.wait()
            done("lists")
            return {j for j in map(pod_job_id, self.state.pods.values()) if j is not None}

        if lists_done is None:  # no watch cache to read: every labelled pod is paged
            states, labelled = await asyncio.gather(
                active_states(), paged_labelled(bound_only=False)
            )
        else:
            states, bound, unbound = await asyncio.gather(
                active_states(), paged_labelled(bound_only=True), cached_unbound(lists_done)
            )
            labelled = bound | unbound
        active = {s.job_id for s in states}
        unknown = active - labelled
        mcs = self.state.cfg.mcs_label
        if len(unknown) > SWEEP_READS_MAX:
            jobs: Iterable[SlurmJob] = await self.slurm.scan_jobs(
                lambda j: j.job_id in unknown and _group_of_active(j, mcs) is not None
            )
        else:
            jobs = await self.slurm.get_jobs(sorted(unknown), concurrency=SWEEP_READ_CONCURRENCY)
        for job in await whole_jobs(self.slurm, jobs):
            group = _group_of_active(job, mcs)
            if group is not None:
                self.jobs_by_group_uid[(group.namespace, group.uid)] = job
        self.swept = True
        self.state.sweep_ended()
        log.info(
            "slurm_sweep_done",
            active=len(active),
            read=len(unknown),
            bridge_jobs=len(self.jobs_by_group_uid),
            seconds=round(self.clock.monotonic() - started, 2),
            **took,
        )

    def waited_for_sweep(self) -> set[str]:
        """The groups that waited for the sweep (taken: the caller processes them)."""
        waited, self.after_sweep = self.after_sweep, set()
        return waited

    def restored_after_sweep(self) -> set[str]:
        """The restored held groups put aside until the sweep ended (taken)."""
        restored, self.restored_held = self.restored_held, set()
        return restored

    async def _labelled_jobs(self, *, bound_only: bool) -> set[int]:
        """Job ids the pods' job-id labels name (every namespace, a page at a time of the
        pods' metadata only; ``bound_only``: of the pods bound to a node)."""
        out: set[int] = set()
        fields = f"spec.schedulerName={self.state.cfg.scheduler_name}"
        if bound_only:
            fields += ",spec.nodeName!="
        async for page, _ in self.kube.pages(
            PODS, label_selector=LABEL_JOB_ID, field_selector=fields, metadata_only=True
        ):
            out.update(j for j in map(pod_job_id, page) if j is not None)
        return out

    async def refresh_slurm_nodes(self) -> None:
        """Slurm's node names: ``excluded_nodes`` may only name nodes Slurm knows (an
        unknown name fails the submit with 2018), and Kubernetes has nodes Slurm lacks."""
        listed = await self.slurm.list_nodes()
        self.slurm_nodes = frozenset(n.name for n in listed)
        self.nodes = listed
        self.node_cpus = {n.name: n.cpus for n in listed}
        self.partition_size = partition_sizes(listed)

    def may_create(self, g: GroupState, pods: list[KubeObject]) -> bool:
        """A new job may be made for ``g`` now: the start-up sweep is done, or the group
        is a single pod created after the initial pod list, which no earlier scheduler
        can have seen (a group whose uid outlives its pods, a PodGroup or a Job, waits)."""
        if self.swept:
            return True
        return kind_named(g.ref.kind).identity == "pod" and self.state.created_after_list(pods)
