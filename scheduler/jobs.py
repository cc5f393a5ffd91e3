"""The groups' Slurm jobs: found (from the submit, the pods' job-id label, the start-up
sweep of Slurm's admin_comments, the poller), followed (the poller's callbacks, the
bridge's jobs pending per partition) and, for one cycle, the group's snapshot: its
Kubernetes facts, translated, and its Slurm facts, for the pure decide step.

Restart safety: the pod<->job link is written on both sides (pod label + Slurm
admin_comment); a group whose submit answer was lost is looked up by its identity before
submitting again; until the start-up sweep ends only a group no earlier scheduler can have
seen may get a new job.

Trust: a job becomes a group's only when its admin_comment proves it. Adopted without a
pod naming it (the sweep, a lost submit): the back-link names this bridge's mcs label and
the group's kind, namespace, name and uid, never an empty uid
(:func:`bridge.translate.link_names_group`). Named by a pod's job-id label: the job is
read, and its back-link names this cluster, the group and one of its pods
(:meth:`SlurmJobs.read_job`). A job restored from the pods' record is used for nothing
but leaving it pending until it is read that way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from bridge.bounded import BoundedSet
from bridge.clock import Clock
from bridge.errors import BridgeError, InvalidInput, SlurmNotFound
from bridge.kube.client import KubeClient
from bridge.kube.resources import PODS, KubeObject
from bridge.loops import LoopCounter, LoopGuard
from bridge.models import GroupId, JobSpec
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import JobState, SlurmJob, SlurmNode
from bridge.translate import (
    Waiting,
    back_link,
    check_source,
    expected_size,
    group_of_link,
    kobj,
    link_names_group,
    missing_source,
    names_any_pod,
    order_pods,
    parse_admin_comment,
    pod_job_id,
    translate_group,
)
from bridge.translate.policy import resolve_policy
from bridge.wellknown import ANNOTATION_SLURM_NODE, ANNOTATION_SPEC_HASH, LABEL_JOB_ID
from bridge.workqueue import WorkQueue
from scheduler.decide import (
    GroupSnapshot,
    JobPart,
    JobView,
    PartitionView,
    PodView,
    het_state,
    pending_reason,
)
from scheduler.dra import DraAllocator
from scheduler.outage import SlurmReachability
from scheduler.poller import JobPoller
from scheduler.state import GroupState, KubeState, scheduled_condition

log = structlog.get_logger("scheduler")

SPEC_MARK = " spec="
# Slurm's reasons of a job held at priority 0 (by its user, by an admin).
HELD_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin"})
# The start-up sweep reads the active jobs no pod names by id up to this many, else it
# streams Slurm's job table once.
SWEEP_READS_MAX = 1000
SWEEP_READ_CONCURRENCY = 16
# Job ids remembered as not to be used again (purged, or not the group's), at most.
GONE_MAX = 10_000


def spec_hash_of(job: SlurmJob) -> str | None:
    """The spec hash the job's comment carries (``spec=<hash>``), if any."""
    _, sep, rest = job.comment.rpartition(SPEC_MARK)
    return rest.split()[0] if sep and rest else None


def _group_of_active(job: SlurmJob, mcs_label: str) -> GroupId | None:
    """The group an ACTIVE job of this bridge (its back-link names ``mcs_label``) is for,
    when it has a uid; else None (:func:`bridge.translate.group_of_link`)."""
    return group_of_link(job.admin_comment, mcs_label) if job.state.active else None


def _shares(job: SlurmJob) -> bool:
    return bool(job.shared) and "none" not in job.shared


def job_view(job: SlurmJob) -> JobView:
    if job.het_components:
        return _het_view(job)
    return JobView(
        job_id=job.job_id,
        state=job.state.primary,
        reason=job.state_reason or None,
        nodes=job.nodes,
        spec_hash=spec_hash_of(job),
        shared=_shares(job),
        cpus=tuple((a.name, a.cpus or 0) for a in job.allocation),
        cpus_per_task=job.cpus_per_task,
    )


def _het_view(job: SlurmJob) -> JobView:
    """A heterogeneous job read by its leader's id: every component a part; its state
    and reason those of :func:`scheduler.decide.het_state`'s component."""
    parts = []
    for offset, c in enumerate(job.components):
        link = parse_admin_comment(c.admin_comment)
        parts.append(
            JobPart(
                job_id=c.job_id,
                offset=c.het_job_offset if c.het_job_offset is not None else offset,
                state=c.state.primary,
                reason=c.state_reason or None,
                nodes=c.nodes,
                pods=link[1] if link is not None else (),
                shared=_shares(c),
                cpus=tuple((a.name, a.cpus or 0) for a in c.allocation),
                cpus_per_task=c.cpus_per_task,
            )
        )
    shown = het_state(tuple(parts))
    return JobView(
        job_id=job.job_id,
        state=shown.state,
        reason=shown.reason,
        nodes=tuple(n for p in parts for n in p.nodes),
        spec_hash=spec_hash_of(job),
        parts=tuple(parts),
        shown=shown.offset,
    )


def names_a_pod(job: SlurmJob, pods: list[KubeObject], mcs: str | None) -> bool:
    """The job (any component of a hetjob: each back-links its own pods) is this
    cluster's and names one of ``pods``."""
    return any(names_any_pod(c.admin_comment, c.mcs_label, pods, mcs) for c in job.components)


def pod_view(pod: Mapping[str, Any]) -> PodView:
    return PodView(
        kobj.pod_key(pod),
        kobj.uid(pod),
        pod_job_id(pod),
        kobj.annotations(pod).get(ANNOTATION_SLURM_NODE),
    )


def restored_job(pods: Iterable[Mapping[str, Any]], spec: JobSpec | None) -> SlurmJob | None:
    """The pending job a group's pods record, without asking Slurm: a pod labelled with
    the job's id, annotated with its spec hash, and showing Slurm's pending reason for
    that job (written by a scheduler before a restart). None when no pod records all
    three (the job is then read by id)."""
    for pod in pods:
        job_id = pod_job_id(pod)
        h = kobj.annotations(pod).get(ANNOTATION_SPEC_HASH)
        cond = scheduled_condition(pod)
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


@dataclass(frozen=True)
class Snapshot:
    """One cycle's facts of one group: what decide reads, and the pods (in group order
    once the group is complete) the acting step writes to."""

    group: GroupSnapshot
    pods: list[KubeObject]


class SlurmJobs:
    def __init__(
        self,
        kube: KubeClient,
        slurm: SlurmClient,
        clock: Clock,
        state: KubeState,
        dra: DraAllocator,
        outage: SlurmReachability,
        queue: WorkQueue[str],
    ) -> None:
        self.kube = kube
        self.slurm = slurm
        self.clock = clock
        self.state = state
        self.dra = dra
        self.outage = outage
        self.queue = queue
        self.poller = JobPoller(slurm, self.on_job_change, self.on_job_gone)
        # From the start-up sweep: (namespace, group uid) -> job; taken only by the group
        # its back-link names whole (kind, namespace, name, uid).
        self.jobs_by_group_uid: dict[tuple[str, str], SlurmJob] = {}
        self.swept = False
        # Groups that waited for the sweep (:class:`scheduler.decide.AwaitSweep`): processed
        # again once it ends.
        self.after_sweep: set[str] = set()
        # Job ids Slurm no longer knows, or that are not the group's: pod labels name them,
        # so they are tenant input and remembered at most GONE_MAX (a dropped one is read
        # once more when a label names it again).
        self.gone: BoundedSet[int] = BoundedSet("scheduler-gone-jobs", GONE_MAX)
        self._job_group: dict[int, str] = {}  # watched job id -> group key
        # The bridge's jobs pending per partition ("" = the default), for the start rule.
        self.pending_in: dict[str, set[int]] = {}
        self._job_partition: dict[int, str] = {}
        self.slurm_nodes: frozenset[str] = frozenset()
        self.partition_size: dict[str, PartitionView] = {}  # from Slurm's node list
        # Told of pods whose job-id label names a job that is not theirs (a Warning).
        self.on_foreign_label: Callable[[list[KubeObject], int], Awaitable[None]] | None = None
        # Told of a step of the start-up sweep that raised something unforeseen (a metric).
        self.on_loop_failure: LoopCounter | None = None

    # ------------------------------------------------------------------ following
    def watch(self, g: GroupState, job: SlurmJob) -> None:
        """Let the poller follow ``job`` (pending) for group ``g``."""
        self._job_group[job.job_id] = g.ref.key
        self._job_partition.setdefault(job.job_id, job.partition)
        held = g.job_spec is not None and g.job_spec.priority == 0
        self._count_pending(job, held=held)
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
        part = self._job_partition.pop(job_id, None)
        if part is not None:
            self.pending_in.get(part, set()).discard(job_id)

    def unwatch(self, job_id: int) -> None:
        self._job_group.pop(job_id, None)
        self._not_pending(job_id)
        self.poller.unwatch(job_id)

    def on_job_change(self, job: SlurmJob) -> None:
        gkey = self._job_group.get(job.job_id)
        if job.state.primary != "PENDING":
            self._job_group.pop(job.job_id, None)  # the poller no longer follows it
            self._not_pending(job.job_id)
        else:
            self._count_pending(job)  # held, or released from its hold
        g = self.state.groups.get(gkey) if gkey is not None else None
        if g is not None and g.job is not None and g.job.job_id == job.job_id:
            # A job restored from the pods' record is trusted once this read proves it
            # the group's; otherwise it stays unread, and the ReadJob decision's read
            # (read_job) drops it as foreign.
            g.job = job
            if g.unread and self.proves(g, job):
                g.unread = False
            self.queue.add(g.ref.key)

    def on_job_gone(self, job_id: int) -> None:
        """Slurm no longer knows a watched job (purged): its group gets a new one."""
        self.gone.add(job_id)
        gkey = self._job_group.pop(job_id, None)
        self._not_pending(job_id)
        g = self.state.groups.get(gkey) if gkey is not None else None
        if g is not None and g.job is not None and g.job.job_id == job_id:
            g.job, g.unread = None, False
            self.queue.add(g.ref.key)

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
        whole table is never held, nor read at all in the usual case. The labelled pods
        are paged once ``lists_done`` is set (the watches' initial lists first: they
        gate every binding, the sweep only the groups that may have a job); then only the
        bound ones are paged: the unbound ones are in the pod watch's cache already. A
        labelled pod missed there (a failed initial list) only costs its job a read."""
        started = self.clock.monotonic()

        async def labelled_after_lists() -> set[int]:
            if lists_done is None:
                return await self._labelled_jobs(bound_only=False)
            await lists_done.wait()
            cached = {j for j in map(pod_job_id, self.state.pods.values()) if j is not None}
            return cached | await self._labelled_jobs(bound_only=True)

        states, labelled = await asyncio.gather(
            self.slurm.scan_job_states(lambda s: s.state.active), labelled_after_lists()
        )
        active = {s.job_id for s in states}
        unknown = active - labelled
        mcs = self.state.cfg.mcs_label
        if len(unknown) > SWEEP_READS_MAX:
            jobs: Iterable[SlurmJob] = await self.slurm.scan_jobs(
                lambda j: j.job_id in unknown and _group_of_active(j, mcs) is not None
            )
        else:
            jobs = await self.slurm.get_jobs(sorted(unknown), concurrency=SWEEP_READ_CONCURRENCY)
        for job in await self._whole(jobs):
            group = _group_of_active(job, mcs)
            if group is not None:
                self.jobs_by_group_uid[(group.namespace, group.uid)] = job
        self.swept = True
        self.state.sweep_ended()
        for gkey in self.after_sweep:
            self.queue.add(gkey)
        self.after_sweep.clear()
        log.info(
            "slurm_sweep_done",
            active=len(active),
            read=len(unknown),
            bridge_jobs=len(self.jobs_by_group_uid),
            seconds=round(self.clock.monotonic() - started, 2),
        )

    async def _whole(self, jobs: Iterable[SlurmJob]) -> list[SlurmJob]:
        """``jobs`` with every hetjob as its leader carrying all its components (a
        component read alone, or a leader from Slurm's flat job list, is read again by
        the leader's id, once per hetjob)."""
        out: list[SlurmJob] = []
        leaders: set[int] = set()
        for job in jobs:
            if job.het_job_id is None or job.het_components:
                out.append(job)
            else:
                leaders.add(job.het_job_id)
        leaders -= {j.job_id for j in out}
        if leaders:
            out += await self.slurm.get_jobs(sorted(leaders), concurrency=SWEEP_READ_CONCURRENCY)
        return out

    async def _labelled_jobs(self, *, bound_only: bool) -> set[int]:
        """Job ids the pods' job-id labels name (every namespace, a page at a time;
        ``bound_only``: of the pods bound to a node)."""
        out: set[int] = set()
        fields = f"spec.schedulerName={self.state.cfg.scheduler_name}"
        if bound_only:
            fields += ",spec.nodeName!="
        async for page, _ in self.kube.pages(
            PODS, label_selector=LABEL_JOB_ID, field_selector=fields
        ):
            out.update(j for j in map(pod_job_id, page) if j is not None)
        return out

    async def refresh_slurm_nodes(self) -> None:
        """Slurm's node names: ``excluded_nodes`` may only name nodes Slurm knows (an
        unknown name fails the submit with 2018), and Kubernetes has nodes Slurm lacks."""
        listed = await self.slurm.list_nodes()
        self.slurm_nodes = frozenset(n.name for n in listed)
        self.partition_size = partition_sizes(listed)

    # ------------------------------------------------------------------ lookup
    async def read_job(self, g: GroupState, job_id: int) -> None:
        """``g.job`` read from Slurm (None: Slurm no longer knows it); followed while it
        is pending."""
        g.unread = False
        try:
            g.job = await self.slurm.get_job(job_id)
        except SlurmNotFound:
            g.job = None  # purged after MinJobAge: the pods never ran, submit anew
            self.gone.add(job_id)
            return
        pods = [self.state.pods[k] for k in sorted(g.pods) if k in self.state.pods]
        if not self.proves(g, g.job, pods):
            # A label names a job that is not this group's (forged, or stale): never act
            # on it (no update, no cancel, no binding); the group gets its own job.
            self.gone.add(job_id)
            g.job = None
            log.warning("foreign_job_label_ignored", job_id=job_id, group=g.ref.key)
            if self.on_foreign_label is not None:
                await self.on_foreign_label(pods, job_id)
            return
        if g.job is not None and g.job.state.primary == "PENDING":
            self.watch(g, g.job)

    def proves(self, g: GroupState, job: SlurmJob, pods: list[KubeObject] | None = None) -> bool:
        """``job`` (as read from Slurm) is ``g``'s: its back-link (each component's, for a
        hetjob) names this cluster and this group (kind, namespace, name), and one names
        one of its pods."""
        if pods is None:
            pods = [self.state.pods[k] for k in sorted(g.pods) if k in self.state.pods]
        for c in job.components:
            link = back_link(c.admin_comment)
            if link is not None and link.group is not None and link.group.key != g.ref.key:
                return False
        return names_a_pod(job, pods, self.state.cfg.mcs_label)

    def may_create(self, g: GroupState, pods: list[KubeObject]) -> bool:
        """A new job may be made for ``g`` now: the start-up sweep is done, or the group
        is a single pod created after the initial pod list, which no earlier scheduler
        can have seen (a group whose uid outlives its pods, a PodGroup or a Job, waits)."""
        if self.swept:
            return True
        return g.ref.kind == "Pod" and self.state.created_after_list(pods)

    async def _find(
        self, g: GroupState, gid: GroupId | None, pods: list[KubeObject], spec: JobSpec | None
    ) -> None:
        """Find the group's Slurm job if the scheduler does not hold it yet."""
        if g.job is not None:
            return
        mcs = self.state.cfg.mcs_label
        swept = self.jobs_by_group_uid.get((gid.namespace, gid.uid)) if gid else None
        if gid and swept and link_names_group(swept.admin_comment, gid, mcs):
            del self.jobs_by_group_uid[(gid.namespace, gid.uid)]
            g.job = swept
        else:
            label = next(
                (j for j in map(pod_job_id, pods) if j is not None and j not in self.gone),
                None,
            )
            restored = restored_job(pods, spec) if label is not None else None
            if restored is not None and restored.job_id == label:
                # No read: the poller's state list says whether it is still pending
                # (the usual case) and reads it if it started or ended.
                g.job, g.unread = restored, True
            elif label is not None:
                await self.read_job(g, label)
                if g.job is not None:
                    return  # followed by read_job when pending
        if g.job is None and g.uncertain_submit and gid is not None:
            # Only a job whose back-link names this very group (a group with no uid has
            # no identity to find: it may get a duplicate, never another group's job).
            if gid.uid:
                found = await self._whole(
                    await self.slurm.scan_jobs(
                        lambda j: j.state.active and link_names_group(j.admin_comment, gid, mcs)
                    )
                )
                if found:
                    g.job = found[0]
            g.uncertain_submit = False
        if g.job is not None and g.job.state.primary == "PENDING":
            self.watch(g, g.job)

    # ------------------------------------------------------------------ snapshot
    async def snapshot(self, g: GroupState, pods: list[KubeObject]) -> Snapshot:
        """The group's Kubernetes facts (its object, its pods in group order, translated
        to a JobSpec or the reason it cannot be) and Slurm facts (its job, found if not
        held yet; whether a job may be made; whether Slurm answers)."""
        gobj = await self.state.group_object(g.ref)
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
            # A pod naming an owner that does not exist, or by a uid that is not the
            # owner's: refused, and never given a job it did not make itself.
            check_source(g.ref, gobj, pods)
        except InvalidInput as e:
            return self._refused(g, pods, expected, e)
        try:
            result = (
                Waiting(group=g.ref.group_id(gobj), have=len(pods), want=want)
                if filling
                else translate_group(
                    pods,
                    gobj,
                    self.state.node_set,
                    self.state.settings,
                    owners=self.state.owners.in_namespace(g.ref.namespace),
                    dra=await self.dra.inputs(pods),
                    policy=resolve_policy(
                        self.state.cfg,
                        g.ref.namespace,
                        self.state.namespace_labels.get(g.ref.namespace, {}),
                    ),
                )
            )
            if isinstance(result, Waiting):
                gid = result.group
                expected = result.want if result.want is not None else len(pods) + 1
            else:
                known = self.slurm_nodes
                excluded = tuple(n for n in result.excluded_nodes if n in known)
                spec = result.model_copy(update={"excluded_nodes": excluded})
        except InvalidInput as e:
            invalid = e
        if gid is None and g.ref.uid:
            gid = g.ref.group_id(gobj)
        elif gid is None and spec is not None:
            parsed = parse_admin_comment(spec.admin_comment)
            gid = parsed[0] if parsed else None
        await self._find(g, gid, pods, spec)
        snap = GroupSnapshot(
            group=gid
            or GroupId(kind=g.ref.kind, namespace=g.ref.namespace, name=g.ref.name, uid=""),
            pods=tuple(pod_view(p) for p in pods),
            expected=expected,
            spec=spec,
            invalid=invalid,
            job=job_view(g.job) if g.job is not None else None,
            job_unread=g.unread,
            waiting_for=missing_source(g.ref, pods) if gobj is None and want is None else "",
            may_create=self.may_create(g, pods),
            slurm_unreachable=self.outage.message,
        )
        return Snapshot(snap, pods)

    def _refused(
        self, g: GroupState, pods: list[KubeObject], expected: int, invalid: InvalidInput
    ) -> Snapshot:
        """The snapshot of a group whose pods name their owner falsely: no job is looked
        for (none adopted); the one it holds, if any, was proven its own before."""
        snap = GroupSnapshot(
            group=GroupId(kind=g.ref.kind, namespace=g.ref.namespace, name=g.ref.name, uid=""),
            pods=tuple(pod_view(p) for p in pods),
            expected=expected,
            invalid=invalid,
            job=job_view(g.job) if g.job is not None else None,
            job_unread=g.unread,
            may_create=self.may_create(g, pods),
            slurm_unreachable=self.outage.message,
        )
        return Snapshot(snap, pods)
