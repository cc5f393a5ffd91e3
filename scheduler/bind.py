"""Binding a running job's pods, as the Bind decision says: each pod's node (pods in
group order to Slurm's nodes in Slurm's order, :mod:`scheduler.assign`), then in order:

1. every pod carries its job and node (one patch: job-id label, finalizer, managed-node
   toleration, node annotation) before any is bound, so an interrupted bind resumes
   exactly;
2. the pods' DRA claims are allocated to the devices Slurm picked (:mod:`scheduler.dra`);
3. the Bindings;
4. the Scheduled events, in the background.

:meth:`Binder.bind_group` answers what came of it (:class:`Bound`); it never requeues. A
step that keeps failing is counted (:mod:`scheduler.giveback`): past the bound, the answer
carries a :class:`~scheduler.giveback.GiveBack` and the cycle gives the job back to Slurm
(:meth:`scheduler.cycle.Scheduler.release`).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any

import structlog

from bridge.clock import Clock
from bridge.config import BridgeConfig
from bridge.devices.allocation import slices_fingerprint
from bridge.errors import (
    DeviceAllocationError,
    DeviceMismatch,
    InvalidInput,
    KubeError,
    KubeNotFound,
)
from bridge.kube.client import KubeClient
from bridge.kube.resources import PODS, KubeObject
from bridge.loops import gather
from bridge.translate import kobj
from bridge.wellknown import (
    ANNOTATION_EXPECTED_START,
    ANNOTATION_EXPECTED_START_BY,
    ANNOTATION_SLURM_NODE,
    ANNOTATION_SPEC_HASH,
    FINALIZER,
    LABEL_JOB_ID,
    MANAGED_NODE_TAINT,
)
from bridge.workloads import kind_named, kind_of_object
from bridge.workloads.builtin import scheduled_condition
from scheduler.assign import Assignment, AssignmentError, assign, network_order
from scheduler.decide import REASON_SCHEDULER_ERROR, REASON_UNSCHEDULABLE, Bind, BindPart
from scheduler.dra import ClaimsNotReady, DraAllocator
from scheduler.giveback import REASON_DEVICE_MISMATCH, BindFailures, GiveBack, Step
from scheduler.metrics import SchedulerMetrics
from scheduler.outcome import NOTHING, REFUSED, Outcome, Requeue, after, failed
from scheduler.report import Reporter
from scheduler.state import GroupState, KubeState

log = structlog.get_logger("scheduler")

# link_pod_to_job's ``expected_start`` when the pod's expected start is left as it is
KEEP = "keep"

# A pod's claim from a template does not exist yet: looked at again this soon.
CLAIMS_NOT_READY_RETRY_SECONDS = 0.5


@dataclass(frozen=True)
class Bound:
    """What binding a running job's pods came to: the outcome for the cycle, and a
    give-back when a step has failed past the bound (nothing said to the pods yet)."""

    outcome: Outcome
    give_back: GiveBack | None = None


def unlink_patch(pod: KubeObject) -> KubeObject | None:
    """The merge patch taking a pod off a cancelled job: no job-id label, no node of it,
    no finalizer of the bridge's (None: nothing to change)."""
    meta = kobj.mapping(pod, "metadata")
    patch: dict[str, Any] = {}
    if LABEL_JOB_ID in (meta.get("labels") or {}):
        patch["labels"] = {LABEL_JOB_ID: None}
    if ANNOTATION_SLURM_NODE in (meta.get("annotations") or {}):
        patch["annotations"] = {ANNOTATION_SLURM_NODE: None}
    finalizers = list(meta.get("finalizers") or [])
    if FINALIZER in finalizers:
        patch["finalizers"] = [f for f in finalizers if f != FINALIZER]
    return {"metadata": patch} if patch else None


class Binder:
    def __init__(
        self,
        cfg: BridgeConfig,
        kube: KubeClient,
        dra: DraAllocator,
        state: KubeState,
        report: Reporter,
        metrics: SchedulerMetrics,
        clock: Clock,
    ) -> None:
        self.cfg = cfg
        self.kube = kube
        self.dra = dra
        self.state = state
        self.report = report
        self.metrics = metrics
        self.clock = clock
        # binding steps failing per running job: given back to Slurm past the bound
        self.failures = BindFailures(
            cfg.scheduler.bind_give_up_attempts, cfg.scheduler.bind_give_up_seconds
        )

    async def bind_group(self, g: GroupState, d: Bind, pods: list[KubeObject]) -> Bound:
        """Bind the pods ``d`` names (``pods`` are their objects) to ``d.job``'s nodes."""
        by_key = {kobj.pod_key(p): p for p in pods}
        already = {v.key: v.assigned_node for v in d.pods if v.assigned_node}
        try:
            # each component's pods on its own nodes (a plain job: one part)
            parts = d.parts or (BindPart(d.job.nodes, d.pods, d.tasks_per_node, d.job.job_id),)
            plans = [(part.job_id, self._assign(part, already)) for part in parts]
            plan = [a for _, mine in plans for a in mine]
        except AssignmentError as e:
            give = self._failed(d.job.job_id, "assign", str(e))
            if give is not None:
                return Bound(NOTHING, give)
            await self.report.unschedulable(pods, REASON_SCHEDULER_ERROR, str(e), warning=True)
            return Bound(REFUSED)
        job_id = d.job.job_id
        # One pod has one node to go to: its node annotation rides on its Binding (the API
        # server writes both at once) and its link carries the job alone, often written
        # already while Slurm was asked for the node (scheduler.cycle, Scheduler._start).
        alone = len(plan) == 1
        t0 = time.monotonic()
        step: Step = "link"
        try:
            # 1. every pod carries its node before any is bound (restart-safe)
            await gather(
                *(
                    self.link_pod_to_job(
                        by_key[a.pod], job_id, None if alone else a.node, expected_start=None
                    )
                    for a in plan
                )
            )
            # 2. DRA claims allocated to the devices Slurm picked (restart-safe)
            # (a hetjob's devices come from each component's own allocation)
            step = "claims"
            claims: Bound | None = None
            for part_job, mine in plans:
                claims = await self._allocate_claims(
                    job_id, [(by_key[a.pod], a.node) for a in mine], devices_of=part_job
                )
                if claims is not None:
                    break
        except KubeError as e:
            give = self._failed(job_id, step, str(e))
            return Bound(failed(e)) if give is None else Bound(NOTHING, give)
        if claims is not None:
            return claims
        t1 = time.monotonic()
        # 3. the Bindings
        results = await gather(
            *(self._post_binding(by_key[a.pod], a.node, g, note=alone) for a in plan),
            return_exceptions=True,
        )
        # 4. the Scheduled events, off the bind path
        bound = [(by_key[a.pod], a.node) for a, r in zip(plan, results, strict=True) if r is None]
        self.report.scheduled_later(bound)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            log.warning("bind_failed", job_id=job_id, errors=len(errors), first=str(errors[0]))
            give = self._failed(job_id, "bind", str(errors[0]))
            return Bound(Outcome(Requeue.RETRY, pods_bound=bool(bound)), give)
        self.failures.succeeded(job_id)
        log.info(
            "group_bound",
            job_id=job_id,
            pods=len(plan),
            link_s=round(t1 - t0, 4),
            bind_s=round(time.monotonic() - t1, 4),
        )
        await self._say_scheduled(g, [p for p, _ in bound], job_id)
        return Bound(Outcome(forget=True, pods_bound=True))

    async def _say_scheduled(self, g: GroupState, pods: list[KubeObject], job_id: int) -> None:
        """The group's objects that say it was scheduled (its kind's
        :meth:`~bridge.workloads.WorkloadKind.scheduled`: built-in PodGroups, a
        CompositePodGroup) get the condition kube-scheduler would set, named as the
        served version names it (``PodGroupInitiallyScheduled`` from 1.37). The pods are
        bound already: a failed write is logged, never a failed bind."""
        for ref in kind_named(g.ref.kind).scheduled(g.ref, pods):
            kind = kind_of_object(ref.api_version, ref.kind)
            try:
                res = self.state.related.resource(kind.api) if kind is not None else None
                if res is None:
                    continue
                await self.kube.set_status_condition(
                    res,
                    ref.namespace,
                    ref.name,
                    scheduled_condition(res.version),
                    True,
                    reason="Scheduled",
                    message=f"Slurm job {job_id} started its pods",
                )
            except KubeError as e:
                log.warning("scheduled_condition_failed", object=ref.name, error=str(e))

    def _assign(self, part: BindPart, already: dict[str, str]) -> list[Assignment]:
        """The pods of ``part`` on its nodes, ranks in network order (docs/topology.md)."""
        ranked = network_order(
            part.nodes, self.state.node_set.topology_of(part.nodes, self.state.settings.topology)
        )
        keys = [v.key for v in part.pods]
        return assign(
            keys,
            ranked,
            to_kube=self.state.node_set.to_kube(),
            tasks_per_node=dict(part.tasks_per_node) if part.tasks_per_node is not None else None,
            already={k: n for k, n in already.items() if k in keys},
        )

    def _failed(
        self, job_id: int, step: Step, error: str, *, counts: bool = True
    ) -> GiveBack | None:
        """Count a failed step of the running job (scheduler.bindGiveUp*)."""
        return self.failures.failed(job_id, step, error, self.clock.monotonic(), counts=counts)

    async def _allocate_claims(
        self,
        job_id: int,
        plan: list[tuple[KubeObject, str]],
        *,
        devices_of: int | None = None,
    ) -> Bound | None:
        """The pods' ResourceClaims allocated before binding: None; else (they cannot be
        yet: said to the pods) what came of it, a give-back past the bound. The devices
        are Slurm's allocation of ``devices_of`` (a hetjob's component), else of
        ``job_id``; failures count against ``job_id`` (the whole job is given back)."""
        pods = [p for p, _ in plan]
        t0 = time.monotonic()
        try:
            n = await self.dra.allocate(
                devices_of or job_id, plan, self.state.node_set.to_kube(), group=job_id
            )
        except ClaimsNotReady as e:
            # waiting on kube-controller-manager: counts toward the time bound only
            give = self._failed(job_id, "claims", str(e), counts=False)
            if give is not None:
                return Bound(NOTHING, give)
            await self.report.unschedulable(pods, REASON_UNSCHEDULABLE, str(e))
            return Bound(after(CLAIMS_NOT_READY_RETRY_SECONDS))
        except DeviceMismatch as e:
            # retrying cannot mend it: the job goes back at once (a Warning with the
            # reason), and the node is not asked of Slurm for the group again until its
            # ResourceSlices change (no loop of give-backs)
            self.metrics.device_mismatches.inc()
            slices = await self.dra.slices_of(e.node)
            names = sorted(
                kobj.name(s) for s in slices if kobj.text(s, "spec", "driver") == e.driver
            )
            give = self.failures.give_back_now(
                job_id,
                "claims",
                REASON_DEVICE_MISMATCH,
                f"DRA: Slurm and the ResourceSlices disagree: {e}; node {e.node} is excluded "
                f"for this group until its ResourceSlices ({', '.join(names) or 'none'}) change",
                node=e.node,
                fingerprint=slices_fingerprint(slices),
            )
            return Bound(NOTHING, give)
        except (DeviceAllocationError, InvalidInput) as e:
            give = self._failed(job_id, "claims", f"DRA: {e}")
            if give is not None:
                return Bound(NOTHING, give)
            await self.report.unschedulable(pods, REASON_SCHEDULER_ERROR, f"DRA: {e}", warning=True)
            return Bound(REFUSED)
        if n:
            seconds = round(time.monotonic() - t0, 4)
            log.info("claims_allocated", job_id=job_id, claims=n, seconds=seconds)
        return None

    async def _post_binding(self, pod: KubeObject, node: str, g: GroupState, *, note: bool) -> None:
        """POST the pod's Binding to ``node``; ``note``: the Binding carries the pod's node
        annotation (written with its node)."""
        key = kobj.pod_key(pod)
        notes = {ANNOTATION_SLURM_NODE: node} if note else None
        await self.kube.bind_pod(kobj.namespace(pod), kobj.name(pod), kobj.uid(pod), node, notes)
        # Bound: it leaves this scheduler now, not when the watch says so (no second bind);
        # the group is processed once more (Outcome.pods_bound), or dropped when none of
        # its pods is left.
        started = self.state.bound(pod, key)
        if started is not None:
            self.metrics.bind_seconds.observe(self.clock.monotonic() - started)
        self.metrics.pods_bound.inc()

    async def link_pod_to_job(
        self,
        pod: KubeObject,
        job_id: int,
        node: str | None,
        spec_hash: str | None = None,
        expected_start: str | None = KEEP,
        expected_by: str | None = None,
    ) -> KubeObject:
        """One patch: job-id label, finalizer, managed-node toleration, node annotation,
        the job's spec hash (see :func:`scheduler.snapshot.restored_job`), the expected
        start and who planned it (``expected_by``; ``KEEP``: as they are; None: none,
        removed); none when the pod carries them all. Returns the pod as it now is."""
        labels = kobj.labels(pod)
        annotations = kobj.annotations(pod)
        tolerations = list(kobj.sequence(pod, "spec", "tolerations"))
        need: dict[str, Any] = {}
        if labels.get(LABEL_JOB_ID) != str(job_id):
            need.setdefault("metadata", {})["labels"] = {LABEL_JOB_ID: str(job_id)}
        if FINALIZER not in kobj.sequence(pod, "metadata", "finalizers"):
            need.setdefault("metadata", {})["finalizers"] = [FINALIZER]
        notes: dict[str, str] = {}
        if node is not None and annotations.get(ANNOTATION_SLURM_NODE) != node:
            notes[ANNOTATION_SLURM_NODE] = node
        if spec_hash is not None and annotations.get(ANNOTATION_SPEC_HASH) != spec_hash:
            notes[ANNOTATION_SPEC_HASH] = spec_hash
        expected: dict[str, str | None] = {}
        if expected_start != KEEP:
            by = expected_by if expected_start is not None else None
            for key, value in (
                (ANNOTATION_EXPECTED_START, expected_start),
                (ANNOTATION_EXPECTED_START_BY, by),
            ):
                if annotations.get(key) != value:
                    expected[key] = value
        if notes or expected:
            need.setdefault("metadata", {})["annotations"] = {**notes, **expected}
        if not any(t.get("key") == MANAGED_NODE_TAINT for t in tolerations):
            toleration = {
                "key": MANAGED_NODE_TAINT,
                "operator": "Equal",
                "value": self.cfg.scheduler_name,
                "effect": "NoExecute",
            }
            need["spec"] = {"tolerations": [*tolerations, toleration]}
        if not need:
            return pod
        if "metadata" in need:
            need["metadata"]["resourceVersion"] = kobj.get(pod, "metadata", "resourceVersion")
        updated = await self.kube.patch_pod(
            kobj.namespace(pod), kobj.name(pod), need, patch_type="strategic"
        )
        return self.state.written(updated)

    async def unlink(self, pod: KubeObject) -> None:
        """The pod no longer names a job (its job was cancelled): its job-id label,
        its node annotation and the bridge's finalizer go (the controller follows labelled pods
        only, so a finalizer left here would keep the pod Terminating forever once
        deleted; a new job's link adds both again). Read afresh: ``pod`` may be from
        before the job was linked in this very cycle (a job given back as it starts)."""
        with contextlib.suppress(KubeNotFound):
            await self.kube.modify(
                PODS, kobj.name(pod), unlink_patch, namespace=kobj.namespace(pod)
            )
