"""Job reconcile: one job key, planned and applied.

The pure plans decide (:mod:`controller.claims`, :mod:`controller.jobs`,
:mod:`controller.pods`); this step gathers what they read (the job's labelled pods from
the watch caches, what the poller last heard of the job), proves which pods are the job's
own before anything is done on their label's word (:mod:`controller.ownership`), applies
the actions, and drops a job there is nothing left to watch for.
"""

from __future__ import annotations

import contextlib

from bridge.clock import Clock
from bridge.config import BridgeConfig
from bridge.errors import KubeNotFound
from bridge.kube.resources import RESOURCE_CLAIMS
from bridge.translate import kobj
from controller import claims, device_evictions, jobs, pods
from controller.apply import Applier
from controller.caches import WatchCaches
from controller.model import (
    NO_NEXT,
    UNKNOWN,
    Action,
    DeleteClaim,
    DisruptPodGroup,
    JobKind,
    KubeObject,
    Next,
    ReleaseClaim,
    SlurmJobStatus,
    job_key,
    pod_done,
)
from controller.ownership import Ownership
from controller.poller import SlurmPoller


class JobReconcile:
    def __init__(
        self,
        cfg: BridgeConfig,
        clock: Clock,
        applier: Applier,
        caches: WatchCaches,
        poller: SlurmPoller,
        ownership: Ownership,
    ) -> None:
        self.cfg = cfg
        self.clock = clock
        self.applier = applier
        self.caches = caches
        self.poller = poller
        self.ownership = ownership

    async def reconcile(self, job_id: int) -> Next:
        """Plan and apply the job's and its pods' actions; what to queue next: the job
        again when a toleration or a stuck pod's grace period comes due."""
        then = NO_NEXT
        caches, links = self.caches, self.ownership.links
        job_pods = caches.job_pods(job_id)
        view = self.poller.views.get(job_id, UNKNOWN)
        gone = dict(caches.deleted.get(job_id, {}))
        # Claims first; a failed release never holds up the rest (the key is retried).
        actions = claims.plan(job_pods, list(gone.values()), caches.released)
        tainted = view.kind is JobKind.ACTIVE and self._noexecute_nodes(job_pods)
        if view.kind is not JobKind.UNKNOWN and (
            job_id in links
            or caches.departed.get(job_id)
            or any(pod_done(p) for p in job_pods)
            or tainted
            or self._job_actions(job_id, job_pods, view)
        ):
            # Something is, or soon may be, done on the pods' label's word (a pod ended or
            # left: a forged pod that runs must not keep the job alive either): only the
            # pods the job's admin_comment names count (none when the job is not ours).
            mine = await self.ownership.named_pods(job_id, job_pods, view)
            named = {id(p) for p in mine}
            await self.ownership.warn_foreign(job_id, [p for p in job_pods if id(p) not in named])
            if mine or self.ownership.departed_named(job_id):
                actions += self._job_actions(job_id, mine, view)
                if tainted:
                    evicted, then = await self._evictions(job_id, mine)
                    actions += evicted
        then += self._recheck_stuck(job_id, job_pods)
        await self.applier.apply(actions)
        # Remembered for pods that still exist (forgotten with them); a pod deleted
        # meanwhile is dropped here, after its one more (no-op) plan.
        planned = {a.pod_uid for a in actions if isinstance(a, ReleaseClaim | DeleteClaim)}
        told = {(a.namespace, a.name) for a in actions if isinstance(a, DisruptPodGroup)}
        if told:
            caches.disrupted.setdefault(job_id, set()).update(told)
        caches.released = (caches.released | planned) - {kobj.uid(p) for p in gone.values()}
        left = caches.deleted.get(job_id, {})
        for k in gone:
            left.pop(k, None)
        if not left:
            caches.deleted.pop(job_id, None)
        if not job_pods and (view.finished or (job_id in links and not links[job_id])):
            # Nothing left to watch for this job (ended, or not ours and no pod names it).
            caches.forget_job(job_id)
            self.poller.forget(job_id)
            self.ownership.forget(job_id)
        return then

    def _noexecute_nodes(self, job_pods: list[KubeObject]) -> bool:
        """Does a node of the job's pods have a device tainted NoExecute (cheap: from the
        watch caches; only then are the pods' claims read)?"""
        rules = self.caches.taint_rules_of()
        nodes = {kobj.text(p, "spec", "nodeName") for p in job_pods} - {""}
        return any(
            device_evictions.noexecute_on(self.caches.node_slices(n) or [], rules) for n in nodes
        )

    async def _evictions(
        self, job_id: int, job_pods: list[KubeObject]
    ) -> tuple[list[Action], Next]:
        """The job's pods a NoExecute device taint evicts (their claims read by name); the
        job is looked at again when a toleration's tolerationSeconds runs out."""
        wanted = {
            (kobj.namespace(p), name)
            for p in job_pods
            if not pod_done(p)
            for name in claims.pod_claims(p)[0]
        }
        read: dict[tuple[str, str], KubeObject] = {}
        for ns, name in sorted(wanted):
            with contextlib.suppress(KubeNotFound):
                read[(ns, name)] = await self.applier.kube.get(RESOURCE_CLAIMS, name, ns)
        slices = {
            n: self.caches.node_slices(n) or []
            for n in {kobj.text(p, "spec", "nodeName") for p in job_pods}
        }
        now = self.clock.now()
        out = device_evictions.plan(
            job_id, job_pods, read, slices, self.caches.taint_rules_of(), now
        )
        if out.due is None:
            return out.actions, NO_NEXT
        return out.actions, Next(
            later=((job_key(job_id), max(0.0, (out.due - now).total_seconds())),)
        )

    def _job_actions(
        self, job_id: int, job_pods: list[KubeObject], view: SlurmJobStatus
    ) -> list[Action]:
        """What the job and pod plans would do with ``job_pods`` (pure)."""
        c = self.cfg.controller
        return [
            *jobs.plan(
                job_id,
                job_pods,
                view,
                c.job_ended_pod_policy,
                self.caches.disrupted.get(job_id, frozenset()),
            ),
            *pods.plan(
                job_id,
                job_pods,
                view,
                self.caches.nodes,
                self.clock.now(),
                c.stuck_terminating_grace_seconds,
            ),
        ]

    def _recheck_stuck(self, job_id: int, job_pods: list[KubeObject]) -> Next:
        """Look at the job again when a Terminating pod on a dead node comes due (its
        grace period plus ``stuckTerminatingGraceSeconds``): no event would say so."""
        grace = self.cfg.controller.stuck_terminating_grace_seconds
        nodes = self.caches.nodes
        dues = [d for p in job_pods if (d := pods.release_due(p, nodes, grace)) is not None]
        if dues:
            wait = (min(dues) - self.clock.now()).total_seconds()
            if wait > 0:
                return Next(later=((job_key(job_id), wait),))
        return NO_NEXT
