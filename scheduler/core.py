"""The scheduling loop: pending pods -> one Slurm placeholder job per group -> bound pods.

Phases of one group's cycle (:meth:`Scheduler.process`), one sequential worker per group:

1. snapshot: the group's unbound pods from the watch-fed cache, its group object, the
   node list, its Slurm job (known from the submit, the pods' job-id label, the start-up
   sweep of Slurm's admin_comments, or the poller);
2. translate (pure, bridge.translate) and decide (pure, scheduler.decide);
3. act: submit / update / cancel in Slurm, annotate and bind pods, write conditions and
   events;
4. requeue: rate-limited on errors, immediately when an action moved the group forward.

Restart safety: the pod<->job link is written on both sides (pod label + Slurm
admin_comment), node choices are annotated on every pod before any pod is bound, and a
group whose submit answer was lost is looked up by its identity before submitting again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Coroutine, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import structlog

from bridge.clock import Clock, capped_backoff
from bridge.config import BridgeConfig
from bridge.errors import (
    BridgeError,
    DeviceAllocationError,
    InvalidInput,
    KubeError,
    KubeNotFound,
    SlurmError,
    SlurmNotFound,
    SlurmRejected,
    SlurmUnavailable,
)
from bridge.kube.client import KubeClient
from bridge.kube.events import EventRecorder
from bridge.kube.resources import (
    JOBS,
    JOBSETS,
    LEADERWORKERSETS,
    PODGROUPS,
    PODS,
    KubeObject,
    Resource,
    slim,
)
from bridge.models import GroupId, JobSpec
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import ALLOCATE_MARK, Allocated, JobState, SlurmJob, SlurmNode
from bridge.translate import (
    GroupRef,
    NodeSet,
    TranslateSettings,
    Waiting,
    expected_size,
    foreign_label_message,
    group_of,
    names_any_pod,
    order_pods,
    parse_admin_comment,
    pod_job_id,
    translate_group,
)
from bridge.translate.policy import resolve_policy
from bridge.wellknown import (
    ANNOTATION_SLURM_NODE,
    ANNOTATION_SPEC_HASH,
    CONDITION_POD_SCHEDULED,
    FINALIZER,
    LABEL_JOB_ID,
    MANAGED_NODE_TAINT,
    REASON_FOREIGN_JOB_LABEL,
)
from scheduler.assign import AssignmentError, assign, network_order, tasks_per_node_even
from scheduler.decide import (
    ALLOCATE,
    REASON_SCHEDULER_ERROR,
    REASON_UNSCHEDULABLE,
    Bind,
    Cancel,
    Decision,
    Ended,
    GroupSnapshot,
    JobView,
    PartitionView,
    Pending,
    PodView,
    Reject,
    Shape,
    Submit,
    Update,
    Wait,
    decide,
    pending_reason,
    shape_of,
    start_how,
)
from scheduler.dra import ClaimsNotReady, DraAllocator
from scheduler.metrics import SchedulerMetrics
from scheduler.outage import SlurmReachability
from scheduler.owners import OwnerCache
from scheduler.poller import JobPoller
from scheduler.queue import WorkQueue

log = structlog.get_logger("scheduler")

_OWNER_KINDS: dict[str, Resource] = {
    "Job": JOBS,
    "JobSet": JOBSETS,
    "LeaderWorkerSet": LEADERWORKERSETS,
    "PodGroup": PODGROUPS,
}
SPEC_MARK = " spec="
WAITING_REFRESH_SECONDS = 1.0
# Slurm's reasons of a job held at priority 0 (by its user, by an admin).
HELD_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin"})
# An incomplete group is told it waits only once it has waited this long: a gang whose
# members arrive in one burst (a controller creating them) is then complete before any
# "k of n" write, and its binding does not queue behind 2n status writes and events.
WAITING_GRACE_SECONDS = 1.0
# A shape Slurm refused to start at once is not tried again in its partition for this
# long (a group refused now is queued, and then its pending job holds the others back).
REFUSED_MEMORY_SECONDS = 2.0
# Immediate allocations in flight per partition: a window that starts at 1 (a probe),
# doubles with each success up to the workers, falls back to 1 on a refusal and after this
# long without a try (the partition may have filled meanwhile). So a burst on a full
# partition costs ONE refused try, not one per worker.
PROBE_AFTER_IDLE_SECONDS = 1.0
# The start-up sweep reads the active jobs no pod names by id up to this many, else it
# streams Slurm's job table once.
SWEEP_READS_MAX = 1000
SWEEP_READ_CONCURRENCY = 16


@dataclass
class _Tries:
    """The allocation window of one partition (see PROBE_AFTER_IDLE_SECONDS)."""

    cond: asyncio.Condition = field(default_factory=asyncio.Condition)
    window: int = 1
    in_flight: int = 0
    last: float = float("-inf")


def pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def _meta(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return pod.get("metadata") or {}


def _scheduled_condition(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == CONDITION_POD_SCHEDULED:
            return dict(c)
    return None


def _spec_hash_of(job: SlurmJob) -> str | None:
    _, sep, rest = job.comment.rpartition(SPEC_MARK)
    return rest.split()[0] if sep and rest else None


def _group_uid_of_active(job: SlurmJob) -> str | None:
    """The group uid an ACTIVE job of the bridge names in its admin_comment, else None."""
    if not job.state.active:
        return None
    parsed = parse_admin_comment(job.admin_comment)
    return parsed[0].uid if parsed is not None and parsed[0] is not None else None


def unlink_patch(pod: KubeObject) -> KubeObject | None:
    """The merge patch taking a pod off a cancelled job: no job-id label, no finalizer of
    the bridge's (None: nothing to change)."""
    meta = _meta(pod)
    patch: dict[str, Any] = {}
    if LABEL_JOB_ID in (meta.get("labels") or {}):
        patch["labels"] = {LABEL_JOB_ID: None}
    finalizers = list(meta.get("finalizers") or [])
    if FINALIZER in finalizers:
        patch["finalizers"] = [f for f in finalizers if f != FINALIZER]
    return {"metadata": patch} if patch else None


def job_view(job: SlurmJob) -> JobView:
    tpn: tuple[tuple[str, int], ...] | None = None
    return JobView(
        job_id=job.job_id,
        state=job.state.primary,
        reason=job.state_reason or None,
        nodes=job.nodes,
        spec_hash=_spec_hash_of(job),
        tasks_per_node=tpn,
    )


@dataclass
class GroupState:
    ref: GroupRef
    pods: set[str] = field(default_factory=set)
    job: SlurmJob | None = None
    job_spec: JobSpec | None = None
    # A submit whose answer was lost: look the job up by identity before submitting again.
    uncertain_submit: bool = False
    first_seen: dict[str, float] = field(default_factory=dict)
    waiting_said_at: float | None = None  # last "waiting for group" write to every member
    waiting_since: float | None = None  # when the group was first found incomplete
    # ``job`` is what the pods record of it (restored, :func:`restored_job`), not read
    # from Slurm: only a Pending decision may act on it (a no-op); any other reads it.
    unread: bool = False


def restored_job(pods: Iterable[Mapping[str, Any]], spec: JobSpec | None) -> SlurmJob | None:
    """The pending job a group's pods record, without asking Slurm: a pod labelled with
    the job's id, annotated with its spec hash, and showing Slurm's pending reason for
    that job (written by a scheduler before a restart). None when no pod records all
    three (the job is then read by id)."""
    for pod in pods:
        job_id = pod_job_id(pod)
        h = (_meta(pod).get("annotations") or {}).get(ANNOTATION_SPEC_HASH)
        cond = _scheduled_condition(pod)
        if job_id is None or not h or cond is None:
            continue
        reason = pending_reason(str(cond.get("message") or ""), job_id)
        if reason is None:
            continue
        return SlurmJob(
            job_id=job_id,
            name="",
            state=JobState(primary="PENDING"),
            state_reason=reason,
            partition=(spec.partition or "") if spec is not None else "",
            comment=f"{SPEC_MARK}{h}",
        )
    return None


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
        self.settings = TranslateSettings.from_config(cfg)
        self.metrics = metrics or SchedulerMetrics()
        self.events = events or EventRecorder(kube, cfg.scheduler_name)
        self.queue = WorkQueue(
            clock, base_backoff=0.05, max_backoff=cfg.scheduler.reject_backoff_max_seconds
        )
        self.poller = JobPoller(slurm, self._on_job_change, self._on_job_gone)
        self.dra = DraAllocator(
            kube,
            slurm,
            device_class_gres=cfg.scheduler.device_class_gres,
            gres_mapping=cfg.scheduler.gres_mapping,
        )
        self.pods: dict[str, KubeObject] = {}  # unbound managed pods, by ns/name
        self.pod_group: dict[str, str] = {}  # pod key -> group key
        self.groups: dict[str, GroupState] = {}
        self.nodes: dict[str, KubeObject] = {}
        # the same nodes, with excluded_nodes memoized per placement (no O(nodes) per group)
        self.node_set = NodeSet()
        self.namespace_labels: dict[str, dict[str, str]] = {}
        self.owners = OwnerCache(self.clock)  # uid -> owner/group object (bounded, fresh)
        self.jobs_by_group_uid: dict[str, SlurmJob] = {}  # from the start-up sweep
        self.swept = False
        # Until the sweep ends only a group that cannot have a job yet is submitted: a
        # single pod absent from the initial pod list (:meth:`_may_submit`). These are
        # processed again once it ends.
        self.pods_listed = False  # the pod watch's initial list was delivered
        self._listed_uids: set[str] = set()  # uids of the pods in it (until the sweep)
        self._after_sweep: set[str] = set()
        self._gone: set[int] = set()  # job ids Slurm no longer knows (labels may name them)
        self._rejects: dict[str, int] = {}
        self.slurm_nodes: frozenset[str] = frozenset()
        self._background: set[asyncio.Task[Any]] = set()
        self.reach = SlurmReachability()
        self._job_group: dict[int, str] = {}  # watched job id -> group key
        # The bridge's jobs pending per partition ("" = the default), for the start rule.
        self._pending_in: dict[str, set[int]] = {}
        self._job_partition: dict[int, str] = {}
        self._refused: dict[str, list[tuple[float, Shape]]] = {}  # partition -> (when, shape)
        self._partition_size: dict[str, PartitionView] = {}  # from Slurm's node list
        self._tries: dict[str, _Tries] = {}
        # Pods this scheduler bound whose leaving the watch has not been seen yet: an event
        # for one that still shows no node is older than the binding and is ignored.
        self._bound_uids: set[str] = set()

    # ------------------------------------------------------------------ feeding
    def managed(self, pod: Mapping[str, Any]) -> bool:
        ns = str(_meta(pod).get("namespace") or "")
        spec = pod.get("spec") or {}
        return (
            spec.get("schedulerName") == self.cfg.scheduler_name
            and not spec.get("nodeName")
            and self.cfg.namespace_is_managed(ns, self.namespace_labels.get(ns, {}))
        )

    async def on_pod_event(self, kind: str, pod: KubeObject) -> None:
        """Apply one watch event (ADDED/MODIFIED/DELETED) of an unscheduled pod."""
        key = pod_key(pod)
        uid = str(_meta(pod).get("uid") or "")
        if kind == "DELETED" or not self.managed(pod) or _meta(pod).get("deletionTimestamp"):
            self._bound_uids.discard(uid)
            self._forget_pod(key)
            return
        if uid in self._bound_uids:
            return  # older than our binding (e.g. our own label patch): it is bound
        if not self.pods_listed and not self.swept:
            self._listed_uids.add(uid)
        first = key not in self.pods
        self.pods[key] = pod
        if first or key not in self.pod_group:
            ref = await self._resolve_group(pod)
            g = self.groups.get(ref.key)
            if g is None:
                g = self.groups[ref.key] = GroupState(ref)
            g.ref = ref
            g.pods.add(key)
            g.first_seen.setdefault(key, time.monotonic())
            self.pod_group[key] = ref.key
        self.queue.add(self.pod_group[key])

    def initial_pods_listed(self) -> None:
        """The pod watch's initial list was delivered whole: a pod seen from now on and
        not in it was created after it (see :meth:`_may_submit`)."""
        self.pods_listed = True

    def _forget_pod(self, key: str) -> None:
        """The pod is no longer this scheduler's (bound, deleted, unmanaged): its group is
        processed again (and dropped once no pod of it is left)."""
        self.pods.pop(key, None)
        gkey = self.pod_group.pop(key, None)
        if gkey and gkey in self.groups:
            self.groups[gkey].pods.discard(key)
            self.queue.add(gkey)

    def on_node_event(self, kind: str, node: KubeObject) -> None:
        name = str(_meta(node).get("name"))
        if kind == "DELETED":
            self.nodes.pop(name, None)
            self.node_set.remove(name)
        else:
            self.nodes[name] = node
            self.node_set.put(node)

    def on_namespace_event(self, kind: str, ns: KubeObject) -> None:
        name = str(_meta(ns).get("name"))
        if kind == "DELETED":
            self.namespace_labels.pop(name, None)
        else:
            self.namespace_labels[name] = dict(_meta(ns).get("labels") or {})

    async def _get_object(self, res: Resource, namespace: str, name: str) -> KubeObject | None:
        try:
            obj = await self.kube.get(res, name, namespace)
        except KubeNotFound:
            return None
        self.owners.put(obj)
        return obj

    async def _resolve_group(self, pod: KubeObject) -> GroupRef:
        """Walk the pod's controller chain, reading the owners grouping needs."""
        ns = str(_meta(pod).get("namespace"))
        current: Mapping[str, Any] = pod
        for _ in range(4):
            ref = next(
                (o for o in (_meta(current).get("ownerReferences") or []) if o.get("controller")),
                None,
            )
            if ref is None or ref.get("kind") not in _OWNER_KINDS:
                break
            owner = self.owners.fresh(str(ref.get("uid")))
            if owner is None:
                try:
                    owner = await self._get_object(_OWNER_KINDS[ref["kind"]], ns, ref["name"])
                except KubeError as e:
                    log.warning("owner_read_failed", pod=pod_key(pod), error=str(e))
                    owner = None
            if owner is None:
                break
            current = owner
        return group_of(pod, self.owners, self.settings)

    def _watch(self, g: GroupState, job: SlurmJob) -> None:
        """Let the poller follow ``job`` (pending) for group ``g``."""
        self._job_group[job.job_id] = g.ref.key
        self._job_partition.setdefault(job.job_id, job.partition)
        held = g.job_spec is not None and g.job_spec.priority == 0
        self._count_pending(job, held=held)
        self.poller.watch(job)

    def _count_pending(self, job: SlurmJob, *, held: bool = False) -> None:
        """Count a followed pending job as holding its partition back, unless it is held:
        Slurm starts an immediate job ahead of a held one (measured on 26.05: a job at
        priority 0, JobHeldUser, did not stop job/allocate in its partition)."""
        part = self._job_partition.get(job.job_id)
        if part is None:
            return
        if held or job.state_reason in HELD_REASONS:
            self._pending_in.get(part, set()).discard(job.job_id)
        else:
            self._pending_in.setdefault(part, set()).add(job.job_id)

    def _not_pending(self, job_id: int) -> None:
        part = self._job_partition.pop(job_id, None)
        if part is not None:
            self._pending_in.get(part, set()).discard(job_id)

    def _unwatch(self, job_id: int) -> None:
        self._job_group.pop(job_id, None)
        self._not_pending(job_id)
        self.poller.unwatch(job_id)

    def _on_job_change(self, job: SlurmJob) -> None:
        gkey = self._job_group.get(job.job_id)
        if job.state.primary != "PENDING":
            self._job_group.pop(job.job_id, None)  # the poller no longer follows it
            self._not_pending(job.job_id)
        else:
            self._count_pending(job)  # held, or released from its hold
        g = self.groups.get(gkey) if gkey is not None else None
        if g is not None and g.job is not None and g.job.job_id == job.job_id:
            g.job = job
            g.unread = False
            self.queue.add(g.ref.key)

    def _on_job_gone(self, job_id: int) -> None:
        """Slurm no longer knows a watched job (purged): its group gets a new one."""
        self._gone.add(job_id)
        gkey = self._job_group.pop(job_id, None)
        self._not_pending(job_id)
        g = self.groups.get(gkey) if gkey is not None else None
        if g is not None and g.job is not None and g.job.job_id == job_id:
            g.job, g.unread = None, False
            self.queue.add(g.ref.key)

    # ------------------------------------------------------------------ start-up
    async def sweep(self, lists_done: asyncio.Event | None = None) -> None:
        """:meth:`sweep_once` until it succeeds (the workers run meanwhile: a failed sweep
        is retried, never the end of the scheduler), backing off to 30 s."""
        delay = 1.0
        while True:
            try:
                await self.sweep_once(lists_done)
                return
            except BridgeError as e:
                log.warning("slurm_sweep_failed", error=str(e), retry_in=delay)
                await self.clock.sleep(delay)
                delay = min(delay * 2, 30.0)

    async def sweep_once(self, lists_done: asyncio.Event | None = None) -> None:
        """Index the bridge's active jobs by group uid, once, at start, so a restarted
        scheduler never submits a duplicate.

        Only the jobs no pod names yet can matter (a pod's job-id label leads to its job):
        Slurm's compact state list gives the active ids, a paged list of the labelled pods
        the ids to skip, and the rest are read by id (:data:`SWEEP_READS_MAX`), or, when
        more are unknown, in one streamed ``GET /jobs/`` keeping only the bridge's. Slurm's
        whole table is never held, nor read at all in the usual case. The labelled pods
        are paged once ``lists_done`` is set (the watches' initial lists first: they
        gate every binding, the sweep only the groups that may have a job)."""
        started = self.clock.monotonic()

        async def labelled_after_lists() -> set[int]:
            if lists_done is not None:
                await lists_done.wait()
            return await self._labelled_jobs()

        states, labelled = await asyncio.gather(
            self.slurm.scan_job_states(lambda s: s.state.active), labelled_after_lists()
        )
        active = {s.job_id for s in states}
        unknown = active - labelled
        if len(unknown) > SWEEP_READS_MAX:
            jobs: Iterable[SlurmJob] = await self.slurm.scan_jobs(
                lambda j: j.job_id in unknown and _group_uid_of_active(j) is not None
            )
        else:
            jobs = await self.slurm.get_jobs(sorted(unknown), concurrency=SWEEP_READ_CONCURRENCY)
        for job in jobs:
            uid = _group_uid_of_active(job)
            if uid is not None:
                self.jobs_by_group_uid[uid] = job
        self.swept = True
        self._listed_uids.clear()
        for gkey in self._after_sweep:
            self.queue.add(gkey)
        self._after_sweep.clear()
        log.info(
            "slurm_sweep_done",
            active=len(active),
            read=len(unknown),
            bridge_jobs=len(self.jobs_by_group_uid),
            seconds=round(self.clock.monotonic() - started, 2),
        )

    async def _labelled_jobs(self) -> set[int]:
        """Job ids the pods' job-id labels name (every namespace, a page at a time)."""
        out: set[int] = set()
        async for page, _ in self.kube.pages(
            PODS,
            label_selector=LABEL_JOB_ID,
            field_selector=f"spec.schedulerName={self.cfg.scheduler_name}",
        ):
            out.update(j for j in map(pod_job_id, page) if j is not None)
        return out

    async def refresh_slurm_nodes(self) -> None:
        """Slurm's node names: ``excluded_nodes`` may only name nodes Slurm knows (an
        unknown name fails the submit with 2018), and Kubernetes has nodes Slurm lacks."""
        listed = await self.slurm.list_nodes()
        self.slurm_nodes = frozenset(n.name for n in listed)
        self._partition_size = partition_sizes(listed)

    # ------------------------------------------------------------------ one group
    async def _group_object(self, ref: GroupRef) -> KubeObject | None:
        src = ref.source
        if src is None:
            return None
        cached = self.owners.fresh(src.uid) if src.uid else None
        if cached is not None and ref.kind != "PodGroup":
            return cached
        res = _OWNER_KINDS.get(src.kind)
        if res is None:
            return None
        return await self._get_object(res, src.namespace, src.name)

    async def _read_job(self, g: GroupState, job_id: int) -> None:
        """``g.job`` read from Slurm (None: Slurm no longer knows it)."""
        g.unread = False
        try:
            g.job = await self.slurm.get_job(job_id)
        except SlurmNotFound:
            g.job = None  # purged after MinJobAge: the pods never ran, submit anew
            self._gone.add(job_id)
            return
        pods = [self.pods[k] for k in sorted(g.pods) if k in self.pods]
        if not names_any_pod(g.job.admin_comment, g.job.mcs_label, pods, self.cfg.mcs_label):
            # A label names a job that is not this group's (forged, or stale): never act
            # on it (no update, no cancel, no binding); the group gets its own job.
            self._gone.add(job_id)
            g.job = None
            log.warning("foreign_job_label_ignored", job_id=job_id, group=g.ref.key)
            for pod in pods:
                await self.events.record(
                    pod, "Warning", REASON_FOREIGN_JOB_LABEL, foreign_label_message(job_id)
                )

    def _may_submit(self, g: GroupState, pods: list[KubeObject]) -> bool:
        """A new job may be made for ``g`` now: the start-up sweep is done, or the group
        is a single pod created after the initial pod list, which no earlier scheduler
        can have seen (a group whose uid outlives its pods, a PodGroup or a Job, waits)."""
        if self.swept:
            return True
        return (
            self.pods_listed
            and g.ref.kind == "Pod"
            and all(str(_meta(p).get("uid") or "") not in self._listed_uids for p in pods)
        )

    async def _known_job(
        self, g: GroupState, gid: GroupId | None, pods: list[KubeObject], spec: JobSpec | None
    ) -> None:
        """Find the group's Slurm job if the scheduler does not hold it yet."""
        if g.job is not None:
            return
        if gid is not None and gid.uid in self.jobs_by_group_uid:
            g.job = self.jobs_by_group_uid.pop(gid.uid)
        else:
            label = next(
                (j for j in map(pod_job_id, pods) if j is not None and j not in self._gone),
                None,
            )
            restored = restored_job(pods, spec) if label is not None else None
            if restored is not None and restored.job_id == label:
                # No read: the poller's state list says whether it is still pending
                # (the usual case) and reads it if it started or ended.
                g.job, g.unread = restored, True
            elif label is not None:
                await self._read_job(g, label)
        if g.job is None and g.uncertain_submit and gid is not None:
            found = await self.slurm.find_jobs_by_admin_comment(f'"uid":"{gid.uid}"')
            if found:
                g.job = found[0]
            g.uncertain_submit = False
        if g.job is not None and g.job.state.primary == "PENDING":
            self._watch(g, g.job)

    async def process(self, gkey: str) -> None:
        g = self.groups.get(gkey)
        if g is None:
            return
        pods: list[KubeObject] = [self.pods[k] for k in g.pods if k in self.pods]
        if not pods:
            if g.job is not None:
                self._unwatch(g.job.job_id)
            self.groups.pop(gkey, None)
            self._rejects.pop(gkey, None)
            return
        gobj = await self._group_object(g.ref)
        # A gang still filling is processed on each new member: it is known to wait without
        # translating every member each time (O(n) per arrival, O(n^2) per gang).
        want = expected_size(g.ref, gobj, pods)
        filling = want is not None and len(pods) < want
        if not filling:
            pods = [dict(p) for p in order_pods(g.ref, gobj, pods)]
        spec: JobSpec | None = None
        invalid: InvalidInput | None = None
        expected = len(pods)
        gid: GroupId | None = None
        try:
            result = (
                Waiting(group=g.ref.group_id(gobj), have=len(pods), want=want)
                if filling
                else translate_group(
                    pods,
                    gobj,
                    self.node_set,
                    self.settings,
                    owners=self.owners,
                    dra=await self.dra.inputs(pods),
                    policy=resolve_policy(
                        self.cfg, g.ref.namespace, self.namespace_labels.get(g.ref.namespace, {})
                    ),
                )
            )
            if isinstance(result, Waiting):
                gid = result.group
                expected = result.want if result.want is not None else len(pods) + 1
            else:
                spec = result.model_copy(
                    update={
                        "excluded_nodes": tuple(
                            n for n in result.excluded_nodes if n in self.slurm_nodes
                        )
                    }
                )
        except InvalidInput as e:
            invalid = e
        if gid is None and g.ref.uid:
            gid = g.ref.group_id(gobj)
        elif gid is None and spec is not None:
            parsed = parse_admin_comment(spec.admin_comment)
            gid = parsed[0] if parsed else None
        await self._known_job(g, gid, pods, spec)
        views = tuple(
            PodView(
                pod_key(p),
                str(_meta(p).get("uid")),
                pod_job_id(p),
                (_meta(p).get("annotations") or {}).get(ANNOTATION_SLURM_NODE),
            )
            for p in pods
        )
        snap = GroupSnapshot(
            group=gid
            or GroupId(kind=g.ref.kind, namespace=g.ref.namespace, name=g.ref.name, uid=""),
            pods=views,
            expected=expected,
            spec=spec,
            invalid=invalid,
            job=job_view(g.job) if g.job is not None else None,
        )
        decision = decide(snap)
        if g.unread and g.job is not None and not isinstance(decision, Pending):
            # The pods' record of the job says something must change (a member gone, a
            # new spec ...): the job may have started since, so read it and decide again.
            await self._read_job(g, g.job.job_id)
            if g.job is not None and g.job.state.primary == "PENDING":
                self._watch(g, g.job)
            decision = decide(replace(snap, job=job_view(g.job) if g.job is not None else None))
        if isinstance(decision, Submit) and not self._may_submit(g, pods):
            self._after_sweep.add(gkey)  # an earlier scheduler's job may exist: see sweep
            return
        self.metrics.attempts.labels(type(decision).__name__.lower()).inc()
        await self._act(g, decision, pods)

    # ------------------------------------------------------------------ acting
    async def _act(self, g: GroupState, d: Decision, pods: list[KubeObject]) -> None:
        bound = structlog.contextvars.bound_contextvars(group=g.ref.key)
        with bound:
            if self.reach.down is not None and isinstance(d, Submit | Update | Cancel | Pending):
                # Slurm is unreachable: no blind submit; say so instead of a stale reason.
                await self._say(pods, REASON_UNSCHEDULABLE, self.reach.message, warning=True)
                return
            match d:
                case Wait(reason=reason, message=message):
                    await self._say_waiting(g, pods, reason, message)
                case Reject(message=message):
                    await self._say(pods, REASON_UNSCHEDULABLE, message, warning=True)
                    self.queue.add_after(g.ref.key, self._reject_delay(g.ref.key))
                case Submit(spec=spec, spec_hash=h):
                    await self._start(g, spec, h, pods)
                case Update(job_id=job_id, spec=spec, spec_hash=h):
                    await self.slurm.update_job(job_id, self._stamp(spec, h))
                    log.info("job_updated", job_id=job_id)
                    g.job = await self.slurm.get_job(job_id)
                    self.queue.add(g.ref.key)
                case Cancel(job_id=job_id, message=message):
                    await self.slurm.cancel(job_id)
                    self._unwatch(job_id)
                    log.info("job_cancelled", job_id=job_id, why=message)
                    g.job = None
                    await asyncio.gather(*(self._unlabel(p) for p in pods))
                    await self._say(pods, REASON_UNSCHEDULABLE, message)
                case Pending(job_id=job_id, message=message):
                    # Until Slurm has looked at a new job (its reason is still "None"), the
                    # pods are left alone: most jobs start at that first scheduling pass,
                    # and their pods are then linked and bound in one go (a restart in
                    # between finds the job by its admin_comment). A job that stays
                    # pending gets its pods linked and Slurm's reason shown.
                    if not self.poller.awaits_reason(job_id):
                        made_from = _spec_hash_of(g.job) if g.job is not None else None
                        await asyncio.gather(
                            *(self._link(p, job_id, None, made_from) for p in pods)
                        )
                        await self._say(pods, REASON_UNSCHEDULABLE, message)
                case Ended(message=message):
                    self._unwatch(d.job_id)
                    await self._say(pods, REASON_UNSCHEDULABLE, message, warning=True)
                case Bind():
                    await self._bind(g, d, pods)

    async def _say_waiting(
        self, g: GroupState, pods: list[KubeObject], reason: str, message: str
    ) -> None:
        """An incomplete group's condition ("k of n pods exist"). New members are told at
        once; the count on the others is refreshed at most every WAITING_REFRESH_SECONDS,
        so a gang of n arriving pod by pod costs O(n) writes, not O(n^2); and nothing is
        said before the group has waited WAITING_GRACE_SECONDS."""
        now = self.clock.monotonic()
        if g.waiting_since is None:
            g.waiting_since = now
        if now - g.waiting_since < WAITING_GRACE_SECONDS:
            self.queue.add_after(g.ref.key, WAITING_GRACE_SECONDS - (now - g.waiting_since))
            return
        if g.waiting_said_at is None or now - g.waiting_said_at >= WAITING_REFRESH_SECONDS:
            g.waiting_said_at = now
            await self._say(pods, reason, message)
            return
        fresh = [p for p in pods if _scheduled_condition(p) is None]
        if fresh:
            await self._say(fresh, reason, message)
        self.queue.add_after(g.ref.key, WAITING_REFRESH_SECONDS - (now - g.waiting_said_at))

    def _reject_delay(self, gkey: str) -> float:
        """Backoff after Slurm (or validation) refused a group: never loop hot."""
        n = self._rejects.get(gkey, 0)
        self._rejects[gkey] = n + 1
        s = self.cfg.scheduler
        return capped_backoff(s.reject_backoff_seconds, n, s.reject_backoff_max_seconds)

    @staticmethod
    def _stamp(spec: JobSpec, h: str, *, now: bool = False) -> JobSpec:
        mark = f" {ALLOCATE_MARK}" if now else ""
        return spec.model_copy(update={"comment": f"{spec.comment}{SPEC_MARK}{h}{mark}"})

    def _partition_view(self, part: str) -> PartitionView:
        now = self.clock.monotonic()
        refused = self._refused.get(part)
        if refused:
            refused[:] = [(t, sh) for t, sh in refused if now - t < REFUSED_MEMORY_SECONDS]
        size = self._partition_size.get(part, PartitionView())
        return PartitionView(
            pending=len(self._pending_in.get(part, ())),
            refused=tuple(sh for _, sh in refused or ()),
            nodes=size.nodes,
            max_node_cpus=size.max_node_cpus,
            max_node_memory_mib=size.max_node_memory_mib,
        )

    async def _start(self, g: GroupState, spec: JobSpec, h: str, pods: list[KubeObject]) -> None:
        """A new job for the group: started at once when the rule says Slurm can
        (:func:`scheduler.decide.start_how`), else (or when Slurm refuses) queued."""
        part, shape = spec.partition or "", shape_of(spec)
        mode = self.cfg.scheduler.immediate_allocation
        how, why = start_how(mode, shape, self._partition_view(part))
        # job/allocate (Slurm 26.05) runs the job as the token's user whatever user_id
        # and group_id say: a job with an identity (namespacePolicies) is always queued.
        if how == ALLOCATE and spec.external and spec.user_id is None and spec.group_id is None:
            tries = self._tries.setdefault(part, _Tries())
            async with tries.cond:
                if tries.in_flight == 0 and (
                    self.clock.monotonic() - tries.last > PROBE_AFTER_IDLE_SECONDS
                ):
                    tries.window = 1
                await tries.cond.wait_for(lambda: tries.in_flight < tries.window)
                tries.in_flight += 1
            # True: started (or failed, said to the pods); False: refused or rejected,
            # so it is queued and job/submit gives Slurm's verdict.
            started: bool | None = None
            try:
                # Decided again: a try that ended while this one waited may have been refused.
                how, why = start_how(mode, shape, self._partition_view(part))
                if how == ALLOCATE:
                    started = await self._allocate(g, spec, h, pods)
            finally:
                async with tries.cond:
                    tries.in_flight -= 1
                    tries.last = self.clock.monotonic()
                    if started is not None:
                        cap = self.cfg.scheduler.workers
                        tries.window = min(tries.window * 2, cap) if started else 1
                    tries.cond.notify_all()
            if started:
                return
        log.debug("job_queued", why=why)
        await self._submit(g, spec, h, pods)

    async def _allocate(self, g: GroupState, spec: JobSpec, h: str, pods: list[KubeObject]) -> bool:
        """Try to start the job now; False: Slurm refused or rejected it (queue it instead)."""
        t0 = time.monotonic()
        stamped = self._stamp(spec, h, now=True)
        try:
            outcome = await self.slurm.allocate(stamped)
        except SlurmRejected as e:
            # Refused for a reason the rule does not know (a hold, a dependency, licenses):
            # queue it, and job/submit gives Slurm's verdict on the job itself.
            log.info("allocation_rejected", error=str(e))
            return False
        except SlurmError as e:
            await self._submit_failed(g, e, pods)
            return True
        if not isinstance(outcome, Allocated):
            # Refused: a FAILED record stays in Slurm (never taken for the group's job,
            # SlurmJob.refused_allocation); the same shape is not tried again for a while.
            self.metrics.allocations_refused.inc()
            self._refused.setdefault(spec.partition or "", []).append(
                (self.clock.monotonic(), shape_of(spec))
            )
            log.info("allocation_refused", error=outcome.error_number, why=outcome.message)
            return False
        self.metrics.jobs_allocated.inc()
        # RUNNING already: one read for its nodes, then bind in this same cycle. Should the
        # read fail, the job is known by id and the poller reads it.
        known = self._created(g, spec, stamped, outcome.job_id, t0)
        try:
            g.job = await self._allocated_job(known, len(pods))
        except SlurmError:
            self._watch(g, known)
            raise
        log.info("job_allocated", job_id=outcome.job_id, pods=len(pods), nodes=len(g.job.nodes))
        if g.job.state.primary == "RUNNING" and g.job.nodes:
            await self._bind(g, Bind(job_view(g.job)), pods)
        else:
            if g.job.state.primary == "PENDING":
                self._watch(g, g.job)
            self.queue.add(g.ref.key)
        return True

    async def _allocated_job(self, known: SlurmJob, pods: int) -> SlurmJob:
        """The job Slurm just started at once, as binding needs it. One pod: only its node,
        from ``GET /resources/{id}`` (measured on 26.05: 1.9 ms of slurmrestd and slurmctld
        CPU, against 3.5 ms for the whole record of ``GET /job/{id}``); more pods: the
        record (how many CPUs each node holds decides how many pods go there)."""
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
        await self._say(pods, REASON_UNSCHEDULABLE, f"Slurm rejected the job: {e}", warning=True)
        self.queue.add_after(g.ref.key, self._reject_delay(g.ref.key))

    async def _submit(self, g: GroupState, spec: JobSpec, h: str, pods: list[KubeObject]) -> None:
        t0 = time.monotonic()
        stamped = self._stamp(spec, h)
        try:
            job_id = await self.slurm.submit(stamped)
        except SlurmError as e:
            await self._submit_failed(g, e, pods)
            return
        self.metrics.jobs_submitted.inc()
        log.info("job_submitted", job_id=job_id, pods=len(pods))
        # No GET here: slurmctld 26.05 starts an external job at its next scheduling pass
        # (0.4-1 s, measured), never in the submit RPC, so the job is pending now. The
        # poller's next tick sees it start (one GET then) or reads its reason.
        self._watch(g, self._created(g, spec, stamped, job_id, t0))
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

    async def _link(
        self, pod: KubeObject, job_id: int, node: str | None, spec_hash: str | None = None
    ) -> None:
        """One patch: job-id label, finalizer, managed-node toleration, node annotation,
        the job's spec hash (see :func:`restored_job`)."""
        meta = _meta(pod)
        ns, name = str(meta.get("namespace")), str(meta.get("name"))
        labels = meta.get("labels") or {}
        annotations = meta.get("annotations") or {}
        tolerations = list((pod.get("spec") or {}).get("tolerations") or [])
        need: dict[str, Any] = {}
        if labels.get(LABEL_JOB_ID) != str(job_id):
            need.setdefault("metadata", {})["labels"] = {LABEL_JOB_ID: str(job_id)}
        if FINALIZER not in (meta.get("finalizers") or []):
            need.setdefault("metadata", {})["finalizers"] = [FINALIZER]
        notes: dict[str, str] = {}
        if node is not None and annotations.get(ANNOTATION_SLURM_NODE) != node:
            notes[ANNOTATION_SLURM_NODE] = node
        if spec_hash is not None and annotations.get(ANNOTATION_SPEC_HASH) != spec_hash:
            notes[ANNOTATION_SPEC_HASH] = spec_hash
        if notes:
            need.setdefault("metadata", {})["annotations"] = notes
        if not any(t.get("key") == MANAGED_NODE_TAINT for t in tolerations):
            toleration = {
                "key": MANAGED_NODE_TAINT,
                "operator": "Equal",
                "value": self.cfg.scheduler_name,
                "effect": "NoExecute",
            }
            need["spec"] = {"tolerations": [*tolerations, toleration]}
        if not need:
            return
        if "metadata" in need:
            need["metadata"]["resourceVersion"] = meta.get("resourceVersion")
        updated = await self.kube.patch_pod(ns, name, need, patch_type="strategic")
        key = pod_key(updated)
        if key in self.pods:
            self.pods[key] = slim(updated)  # as the watch keeps it

    async def _unlabel(self, pod: KubeObject) -> None:
        """The pod's job was cancelled: drop its job-id label and the bridge's finalizer
        (the controller follows labelled pods only, so a finalizer left here would keep
        the pod Terminating forever once deleted; a new job's link adds both again)."""
        meta = _meta(pod)
        if LABEL_JOB_ID not in (meta.get("labels") or {}) and FINALIZER not in (
            meta.get("finalizers") or []
        ):
            return
        with contextlib.suppress(KubeNotFound):
            await self.kube.modify(
                PODS, str(meta.get("name")), unlink_patch, namespace=str(meta.get("namespace"))
            )

    def _to_kube(self) -> dict[str, str]:
        return self.node_set.to_kube()

    async def _bind(self, g: GroupState, d: Bind, pods: list[KubeObject]) -> None:
        job = g.job
        assert job is not None
        keys = [pod_key(p) for p in pods]
        tpn = None
        if (job.shared and "none" not in job.shared) or (len(job.nodes) < len(pods)):
            # pods already bound are not here: spread what is left
            tpn = tasks_per_node_even(job.nodes, max(len(pods), len(job.nodes)))
            if job.allocation and job.cpus_per_task:
                tpn = {a.name: max((a.cpus or 0) // job.cpus_per_task, 1) for a in job.allocation}
        already = {
            k: v
            for k, v in (
                (pod_key(p), (_meta(p).get("annotations") or {}).get(ANNOTATION_SLURM_NODE))
                for p in pods
            )
            if v
        }
        try:
            ranked = network_order(
                job.nodes, self.node_set.topology_of(job.nodes, self.settings.topology)
            )
            plan = assign(
                keys, ranked, to_kube=self._to_kube(), tasks_per_node=tpn, already=already
            )
        except AssignmentError as e:
            await self._say(pods, REASON_SCHEDULER_ERROR, str(e), warning=True)
            self.queue.add_after(g.ref.key, self._reject_delay(g.ref.key))
            return
        by_key = {pod_key(p): p for p in pods}
        t0 = time.monotonic()
        # Phase 1: every pod carries its node before any is bound (restart-safe).
        await asyncio.gather(*(self._link(by_key[a.pod], job.job_id, a.node) for a in plan))
        # Phase 1b: DRA claims allocated to the devices Slurm picked (restart-safe).
        if not await self._allocate_claims(g, job.job_id, [(by_key[a.pod], a.node) for a in plan]):
            return
        t1 = time.monotonic()
        # Phase 2: bind.
        results = await asyncio.gather(
            *(self._bind_one(by_key[a.pod], a.node, g) for a in plan), return_exceptions=True
        )
        # Then the Scheduled events, off the bind path: a gang's bindings never wait
        # behind its own events at the API server.
        bound = [(by_key[a.pod], a.node) for a, r in zip(plan, results, strict=True) if r is None]
        self._later(self._scheduled_events(bound))
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            log.warning("bind_failed", job_id=job.job_id, errors=len(errors), first=str(errors[0]))
            self.queue.add_rate_limited(g.ref.key)
        else:
            self.queue.forget(g.ref.key)
            log.info(
                "group_bound",
                job_id=job.job_id,
                pods=len(plan),
                link_s=round(t1 - t0, 4),
                bind_s=round(time.monotonic() - t1, 4),
            )

    def _later(self, work: Coroutine[Any, Any, None]) -> None:
        """Best-effort work in the background (kept referenced until it ends)."""
        task = asyncio.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _scheduled_events(self, bound: list[tuple[KubeObject, str]]) -> None:
        async def one(pod: KubeObject, node: str) -> None:
            meta = _meta(pod)
            msg = f"Successfully assigned {meta.get('namespace')}/{meta.get('name')} to {node}"
            await self.events.record(pod, "Normal", "Scheduled", msg)

        await asyncio.gather(*(one(p, n) for p, n in bound))

    async def _allocate_claims(
        self, g: GroupState, job_id: int, plan: list[tuple[KubeObject, str]]
    ) -> bool:
        """The pods' ResourceClaims allocated before binding; False (said and requeued)
        when they cannot be yet."""
        pods = [p for p, _ in plan]
        t0 = time.monotonic()
        try:
            n = await self.dra.allocate(job_id, plan, self._to_kube())
        except ClaimsNotReady as e:
            await self._say(pods, REASON_UNSCHEDULABLE, str(e))
            self.queue.add_after(g.ref.key, 0.5)
            return False
        except (DeviceAllocationError, InvalidInput) as e:
            await self._say(pods, REASON_SCHEDULER_ERROR, f"DRA: {e}", warning=True)
            self.queue.add_after(g.ref.key, self._reject_delay(g.ref.key))
            return False
        if n:
            seconds = round(time.monotonic() - t0, 4)
            log.info("claims_allocated", job_id=job_id, claims=n, seconds=seconds)
        return True

    async def _bind_one(self, pod: KubeObject, node: str, g: GroupState) -> None:
        meta = _meta(pod)
        ns, name = str(meta.get("namespace")), str(meta.get("name"))
        await self.kube.bind_pod(ns, name, str(meta.get("uid")), node)
        key = pod_key(pod)
        # Bound: it leaves this scheduler now, not when the watch says so (no second bind);
        # the group is processed once more and dropped when none of its pods is left.
        self._bound_uids.add(str(meta.get("uid")))
        self._forget_pod(key)
        started = g.first_seen.pop(key, None)
        if started is not None:
            self.metrics.bind_seconds.observe(time.monotonic() - started)
        self.metrics.pods_bound.inc()

    async def _say(
        self, pods: list[KubeObject], reason: str, message: str, *, warning: bool = False
    ) -> None:
        """PodScheduled=False with ``message`` on each pod; an event only when it changed."""

        async def one(pod: KubeObject) -> None:
            meta = _meta(pod)
            cond = _scheduled_condition(pod)
            if cond and cond.get("reason") == reason and cond.get("message") == message:
                return
            updated = await self.kube.set_pod_unschedulable(
                str(meta.get("namespace")),
                str(meta.get("name")),
                reason=reason,
                message=message,
                pod=pod,
            )
            if pod_key(updated) in self.pods:
                self.pods[pod_key(updated)] = slim(updated)
            await self.events.record(
                pod,
                "Warning" if warning else "Normal",
                "FailedScheduling" if warning else "Pending",
                message,
            )

        await asyncio.gather(*(one(p) for p in pods), return_exceptions=True)

    # ------------------------------------------------------------------ loops
    async def worker(self) -> None:
        while True:
            key = await self.queue.get()
            if key is None:
                return
            try:
                await self.process(key)
            except (BridgeError, AssertionError) as e:
                if isinstance(e, SlurmError):
                    self.metrics.rest_errors.labels(e.endpoint or "?", str(e.status or 0)).inc()
                    if isinstance(e, SlurmUnavailable):
                        await self._slurm_unreachable(e, key)
                elif isinstance(e, KubeError):
                    self.metrics.kube_errors.labels("process", e.reason or str(e.status)).inc()
                log.warning("cycle_failed", group=key, error=str(e), kind=type(e).__name__)
                self.queue.add_rate_limited(key)
            except Exception:
                log.exception("cycle_crashed", group=key)
                self.queue.add_rate_limited(key)
            finally:
                self.queue.done(key)

    async def _slurm_unreachable(self, error: SlurmUnavailable, gkey: str | None) -> None:
        """A Slurm call found slurmrestd (or slurmctld) unreachable."""
        if self.reach.failed(error):
            log.warning("slurm_unreachable", error=str(error))
            for key in list(self.groups):
                self.queue.add(key)  # every pending pod learns of the outage
        g = self.groups.get(gkey) if gkey else None
        if g is not None:
            pods = [self.pods[k] for k in g.pods if k in self.pods]
            await self._say(pods, REASON_UNSCHEDULABLE, self.reach.message, warning=True)

    async def _probe_slurm(self) -> None:
        """During an outage: one cheap call per tick; when slurmctld answers again every
        group is processed at once, its backoff forgotten."""
        pings = await self.slurm.ping()
        if not any(p.responding for p in pings):
            return
        if self.reach.answered():
            log.info("slurm_reachable_again", groups=len(self.groups))
            for key in list(self.groups):
                self.queue.forget(key)
                self.queue.add(key)

    async def poll_forever(self) -> None:
        last_resync = self.clock.monotonic()
        base = self.cfg.slurm_poll_interval_seconds
        while True:
            try:
                if self.reach.down is not None:
                    await self._probe_slurm()
                await self.poller.run_once()
                if self.clock.monotonic() - last_resync >= self.cfg.slurm_resync_interval_seconds:
                    last_resync = self.clock.monotonic()
                    await self.refresh_slurm_nodes()
            except SlurmError as e:
                self.metrics.rest_errors.labels(e.endpoint or "?", str(e.status or 0)).inc()
                # One warning per outage (slurm_unreachable), not one per tick.
                quiet = self.reach.down is not None and isinstance(e, SlurmUnavailable)
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

    def update_gauges(self) -> None:
        counts: dict[str, int] = {}
        for pod in self.pods.values():
            cond = _scheduled_condition(pod)
            msg = str((cond or {}).get("message") or "")
            reason = (
                msg.rpartition(": ")[2] if "pending" in msg else (cond or {}).get("reason", "New")
            )
            counts[str(reason)] = counts.get(str(reason), 0) + 1
        self.metrics.pending_pods.clear()
        for r, n in counts.items():
            self.metrics.pending_pods.labels(r).set(n)
