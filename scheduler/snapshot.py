"""Steps 2 and 3 of a cycle, the snapshot and the job lookup: one group's facts for the
pure decide step, read and never acted on.

The snapshot (:meth:`Snapshots.take`) is an in-memory copy, as kueue's is: no await, no
read of the API or of Slurm. Its Kubernetes facts come from the watch caches: the group
object and the related objects its kind reads (:mod:`scheduler.related`), its pods in
group order, the DRA objects they name (:mod:`scheduler.dra`), their translation to one
JobSpec (or the reason there is none). Its Slurm facts are what the scheduler holds: the
group's job, whether a new job may be made yet, whether Slurm answers, what the start
rule knows of the partition.

The lookup (:meth:`Snapshots.find`), only for a group that holds no job, is the one step
that reads (Slurm): the job found (:class:`JobLookup`: the start-up sweep's index, the
pods' record of a pending job, the job a pod's label names read by id and checked to be
the group's, the job of a lost submit found by identity) joins the snapshot
(:meth:`Snapshots.with_lookup`).

Trust: a job becomes a group's only when its admin_comment proves it. Adopted without a
pod naming it (the sweep, a lost submit): the back-link names this bridge's mcs label and
the group's kind, namespace, name and uid, never an empty uid
(:func:`bridge.translate.link_names_group`). Named by a pod's job-id label: the job is
read, and its back-link names this cluster, the group and one of its pods
(:meth:`Snapshots.proves`). A job restored from the pods' record is used for nothing but
leaving it pending until it is read that way.

Nothing here writes: no group state, no following, no event. What a lookup found
travels in the snapshot, and the cycle keeps it (:meth:`scheduler.cycle.Scheduler.process`)
and the act step says what needs saying (a label naming another group's job).
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import structlog

from bridge.config import BridgeConfig
from bridge.devices.allocation import slices_fingerprint
from bridge.errors import InvalidInput, SlurmNotFound
from bridge.expected import job_start
from bridge.kube.resources import KubeObject
from bridge.models import GroupId, JobSpec
from bridge.queueplan import NO_QUEUE_PLAN, QueueStart
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import JobState, SlurmJob
from bridge.translate import (
    Waiting,
    back_link,
    check_source,
    expected_size,
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
from bridge.wellknown import ANNOTATION_SLURM_NODE, ANNOTATION_SPEC_HASH
from bridge.workloads import kind_named, with_object
from scheduler.decide import (
    GroupSnapshot,
    JobPart,
    JobSnapshot,
    PodView,
    het_state,
    pending_reason,
)
from scheduler.dra import DraAllocator
from scheduler.outage import SlurmReachability
from scheduler.slurm_state import SlurmState, whole_jobs
from scheduler.state import GroupState, KubeState, scheduled_condition

log = structlog.get_logger("scheduler")

SPEC_MARK = " spec="


def spec_hash_of(job: SlurmJob) -> str | None:
    """The spec hash the job's comment carries (``spec=<hash>``), if any."""
    _, sep, rest = job.comment.rpartition(SPEC_MARK)
    return rest.split()[0] if sep and rest else None


def _shares(job: SlurmJob) -> bool:
    return bool(job.shared) and "none" not in job.shared


def job_view(job: SlurmJob, queue: QueueStart | None = NO_QUEUE_PLAN) -> JobSnapshot:
    """What the decision needs of ``job``; ``queue``: the bridge's plan of it
    (:mod:`bridge.queueplan`; None: not made yet)."""
    if job.het_components:
        return replace(_het_view(job), queue=queue)
    return JobSnapshot(
        queue=queue,
        job_id=job.job_id,
        state=job.state.primary,
        reason=job.state_reason or None,
        nodes=job.nodes,
        spec_hash=spec_hash_of(job),
        shared=_shares(job),
        cpus=tuple((a.name, a.cpus or 0) for a in job.allocation),
        cpus_per_task=job.cpus_per_task,
        start_time=job.start_time,
    )


def _het_view(job: SlurmJob) -> JobSnapshot:
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
    return JobSnapshot(
        job_id=job.job_id,
        state=shown.state,
        reason=shown.reason,
        nodes=tuple(n for p in parts for n in p.nodes),
        spec_hash=spec_hash_of(job),
        parts=tuple(parts),
        shown=shown.offset,
        start_time=job_start(job),
    )


def names_a_pod(job: SlurmJob, pods: list[KubeObject], mcs: str | None) -> bool:
    """The job (any component of a hetjob: each back-links its own pods) is this
    cluster's and names one of ``pods``."""
    return any(names_any_pod(c.admin_comment, c.mcs_label, pods, mcs) for c in job.components)


def known_excluded(spec: JobSpec, known: Container[str]) -> JobSpec:
    """``spec`` excluding only the nodes Slurm knows (Slurm refuses a job that names a
    node it does not know). ``spec`` itself when it knows them all: a JobSpec is frozen,
    and a copy per pod was about 4% of a lone pod's snapshot, profiled."""
    excluded = tuple(n for n in spec.excluded_nodes if n in known)
    if len(excluded) == len(spec.excluded_nodes):
        return spec
    return spec.model_copy(update={"excluded_nodes": excluded})


def with_nodes_excluded(spec: JobSpec, nodes: Sequence[str]) -> JobSpec:
    """``spec`` (and each hetjob component) excluding ``nodes`` (Slurm names) too."""
    if not nodes:
        return spec

    def more(part: JobSpec) -> JobSpec:
        added = tuple(n for n in nodes if n not in part.excluded_nodes)
        return part.model_copy(update={"excluded_nodes": part.excluded_nodes + added})

    return more(spec).model_copy(
        update={"het_components": tuple(more(c) for c in spec.het_components)}
    )


def pod_view(pod: Mapping[str, Any]) -> PodView:
    return PodView(
        kobj.pod_key(pod),
        kobj.uid(pod),
        pod_job_id(pod),
        kobj.annotations(pod).get(ANNOTATION_SLURM_NODE),
    )


def recorded_pending(pod: Mapping[str, Any]) -> tuple[int, str, str] | None:
    """(job id, spec hash, Slurm's reason) of the pending job the pod records: labelled
    with the job's id, annotated with its spec hash, and showing Slurm's pending reason
    for that job (written by a scheduler before a restart); None when it lacks any."""
    job_id = pod_job_id(pod)
    h = kobj.annotations(pod).get(ANNOTATION_SPEC_HASH)
    cond = scheduled_condition(pod)
    if job_id is None or not h or cond is None:
        return None
    reason = pending_reason(str(cond.get("message") or ""), job_id)
    return (job_id, h, reason) if reason is not None else None


def restored_job(pods: Iterable[Mapping[str, Any]], spec: JobSpec | None) -> SlurmJob | None:
    """The pending job a group's pods record (:func:`recorded_pending`), without asking
    Slurm. None when no pod records it (the job is then read by id)."""
    for pod in pods:
        record = recorded_pending(pod)
        if record is None:
            continue
        job_id, h, reason = record
        return SlurmJob(
            job_id=job_id,
            name="",
            state=JobState(primary="PENDING"),
            state_reason=reason,
            partition=(spec.partition or "") if spec is not None else "",
            comment=f"{SPEC_MARK}{h}",
        )
    return None


@dataclass(frozen=True)
class JobLookup:
    """What looking for a group's job found in one cycle (the cycle keeps it)."""

    job: SlurmJob | None = None  # the group's job (None: it has none)
    unread: bool = False  # ``job`` is the pods' record of it, not read from Slurm
    # found in the start-up sweep's index, under this (namespace, uid)
    from_sweep: tuple[str, str] | None = None
    # a job id the pods name that is not the group's job: Slurm no longer knows it, or
    # (``foreign``) it is another's (a forged or stale label: never acted on, the pods are
    # warned)
    not_ours: int | None = None
    foreign: bool = False
    identity_checked: bool = False  # a lost submit's job was looked up by identity


@dataclass(frozen=True)
class Snapshot:
    """One cycle's facts of one group: what decide reads, the pods (in group order once
    the group is complete) the act step writes to, and what a lookup found (None: the
    group held its job already, or none was looked for). ``findable``: a job may be
    looked up for the group (its pods do not name their owner falsely); ``gid`` the
    group's identity when known (what a lookup by identity needs)."""

    group: GroupSnapshot
    pods: list[KubeObject]
    lookup: JobLookup | None = None
    findable: bool = False
    gid: GroupId | None = None


class Snapshots:
    def __init__(
        self,
        cfg: BridgeConfig,
        slurm: SlurmClient,
        state: KubeState,
        slurm_state: SlurmState,
        dra: DraAllocator,
        outage: SlurmReachability,
    ) -> None:
        self.cfg = cfg
        self.slurm = slurm
        self.state = state
        self.slurm_state = slurm_state
        self.dra = dra
        self.outage = outage

    def _device_excluded(self, g: GroupState) -> list[str]:
        """The Slurm names of the nodes whose devices and Slurm's disagreed for a job of
        ``g`` and whose ResourceSlices have not changed since (those that have changed, or
        are gone, are dropped: the group may go there again)."""
        to_slurm = {kube: slurm for slurm, kube in self.state.node_set.to_kube().items()}
        out: list[str] = []
        for node, then in sorted(g.device_excluded.items()):
            now = slices_fingerprint(self.dra.held_slices_of(node))
            if now != then or node not in to_slurm:
                del g.device_excluded[node]
                log.info("device_exclusion_lifted", group=g.ref.key, node=node)
                continue
            out.append(to_slurm[node])
        return out

    def take(self, g: GroupState, pods: list[KubeObject]) -> Snapshot:
        """The group's Kubernetes facts (its object, its pods in group order, translated
        to a JobSpec or the reason it cannot be) and the Slurm facts held (its job; whether
        a job may be made; whether Slurm answers), from memory only."""
        state = self.state
        kind = kind_named(g.ref.kind)
        gobj = state.group_object(g.ref)
        held = with_object(state.related, gobj)
        # a PodGroup naming a parent Workload that is not there waits for it
        awaits = kind.awaits(g.ref, gobj, held) if gobj is not None else ""
        if awaits:
            gobj = None
        # A gang still filling is processed on each new member: it is known to wait without
        # translating every member each time (O(n) per arrival, O(n^2) per gang).
        want = expected_size(g.ref, gobj, pods, held)
        filling = want is not None and len(pods) < want
        if not filling:
            pods = [dict(p) for p in order_pods(g.ref, gobj, pods, held)]
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
                    state.node_set,
                    state.settings,
                    owners=state.related.owners(g.ref.namespace),
                    dra=self.dra.inputs(pods),
                    policy=resolve_policy(
                        self.cfg,
                        g.ref.namespace,
                        state.namespace_labels.get(g.ref.namespace, {}),
                    ),
                    related=held,
                    templates=state.templates,
                )
            )
            if isinstance(result, Waiting):
                gid = result.group
                expected = result.want if result.want is not None else len(pods) + 1
            else:
                if g.device_excluded:
                    result = with_nodes_excluded(result, self._device_excluded(g))
                spec = known_excluded(result, self.slurm_state.slurm_nodes)
        except InvalidInput as e:
            invalid = e
        if gid is None and g.ref.uid:
            gid = g.ref.group_id(gobj)
        elif gid is None and spec is not None:
            parsed = parse_admin_comment(spec.admin_comment)
            gid = parsed[0] if parsed else None
        unknown = gobj is None and want is None  # its object is not there (yet)
        snap = GroupSnapshot(
            group=gid
            or GroupId(kind=g.ref.kind, namespace=g.ref.namespace, name=g.ref.name, uid=""),
            pods=tuple(pod_view(p) for p in pods),
            expected=expected,
            spec=spec,
            invalid=invalid,
            waiting_for=awaits or (missing_source(g.ref, pods) if unknown else ""),
            may_create=self.slurm_state.may_create(g, pods),
            slurm_unreachable=self.outage.message,
            immediate_allocation=self.cfg.scheduler.immediate_allocation,
        )
        return self._with_job(Snapshot(snap, pods, findable=True, gid=gid), g.job, g.unread)

    def _with_job(
        self, snap: Snapshot, job: SlurmJob | None, unread: bool, lookup: JobLookup | None = None
    ) -> Snapshot:
        """``snap`` with the group's job (None: none) and what Slurm holds of it."""
        spec = snap.group.spec
        group = replace(
            snap.group,
            job=job_view(job, self.slurm_state.queue_plan(job)) if job is not None else None,
            job_unread=unread,
            job_reason_awaited=job is not None
            and self.slurm_state.poller.awaits_reason(job.job_id),
            partition=(
                self.slurm_state.partition_view(spec.partition or "")
                if spec is not None and job is None
                else None
            ),
            # a job known from the pods' record only says nothing of Slurm's plan
            now=None if unread else self.slurm_state.clock.now(),
        )
        return replace(snap, group=group, lookup=lookup)

    async def find(self, g: GroupState, snap: Snapshot) -> Snapshot:
        """3. The lookup of the job of a group that holds none (the cycle's only read
        before deciding: Slurm's), joined to the snapshot; ``snap`` itself when the
        group holds one or may not look (its pods name their owner falsely)."""
        if g.job is not None or not snap.findable:
            return snap
        found = await self._find(g, snap.gid, snap.pods, snap.group.spec)
        return self._with_job(snap, found.job, found.unread, found)

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
            may_create=self.slurm_state.may_create(g, pods),
            slurm_unreachable=self.outage.message,
        )
        return Snapshot(snap, pods)

    async def _find(
        self, g: GroupState, gid: GroupId | None, pods: list[KubeObject], spec: JobSpec | None
    ) -> JobLookup:
        """Look for the job of a group that holds none."""
        mcs = self.cfg.mcs_label
        key = (gid.namespace, gid.uid) if gid else None
        swept = self.slurm_state.jobs_by_group_uid.get(key) if key else None
        if gid and swept and link_names_group(swept.admin_comment, gid, mcs):
            return JobLookup(swept, from_sweep=key)
        found = JobLookup()
        label = next(
            (j for j in map(pod_job_id, pods) if j is not None and j not in self.slurm_state.gone),
            None,
        )
        restored = restored_job(pods, spec) if label is not None else None
        if restored is not None and restored.job_id == label:
            # No read: the poller's state list says whether it is still pending (the usual
            # case) and reads it if it started or ended.
            return JobLookup(restored, unread=True)
        if label is not None:
            found = await self.read_job(g, label)
            if found.job is not None:
                return found
        if g.uncertain_submit and gid is not None:
            # Only a job whose back-link names this very group (a group with no uid has
            # no identity to find: it may get a duplicate, never another group's job).
            jobs: list[SlurmJob] = []
            if gid.uid:
                ours = await self.slurm.scan_jobs(
                    lambda j: j.state.active and link_names_group(j.admin_comment, gid, mcs)
                )
                jobs = await whole_jobs(self.slurm, ours)
            found = replace(found, job=jobs[0] if jobs else None, identity_checked=True)
        return found

    async def read_job(self, g: GroupState, job_id: int) -> JobLookup:
        """The job ``job_id`` read from Slurm, when it is the group's (``job`` None: Slurm
        no longer knows it, or it is another group's)."""
        try:
            job = await self.slurm.get_job(job_id)
        except SlurmNotFound:
            return JobLookup(not_ours=job_id)  # purged after MinJobAge: submit anew
        if not self.proves(g, job):
            # A label names a job that is not this group's (forged, or stale): never act
            # on it (no update, no cancel, no binding); the group gets its own job.
            log.warning("foreign_job_label_ignored", job_id=job_id, group=g.ref.key)
            return JobLookup(not_ours=job_id, foreign=True)
        return JobLookup(job)

    def proves(self, g: GroupState, job: SlurmJob) -> bool:
        """``job`` (as read from Slurm) is ``g``'s: its back-link (each component's, for a
        hetjob) names this cluster and this group (kind, namespace, name), and one names
        one of its pods."""
        pods = [self.state.pods[k] for k in sorted(g.pods) if k in self.state.pods]
        for c in job.components:
            link = back_link(c.admin_comment)
            if link is not None and link.group is not None and link.group.key != g.ref.key:
                return False
        return names_a_pod(job, pods, self.cfg.mcs_label)
