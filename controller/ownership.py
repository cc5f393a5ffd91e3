"""The ownership proof: a pod's job-id label is never believed on its own.

Before a job is cancelled or its pods failed or finalized on the word of their job-id
label, the job is read once and its admin_comment back-link must name this cluster
(:func:`bridge.translate.link_is_ours`) and the pod (:func:`bridge.translate.job_names_pod`).
A pod whose label names a job that is not its own is ignored, with a Warning Event where
its namespace is managed. Pods of namespaces that left the managed set are still the
bridge's when their jobs say so, and are ended.
"""

from __future__ import annotations

from bridge.clock import Clock
from bridge.config import BridgeConfig
from bridge.errors import SlurmNotFound
from bridge.kube.client import KubeClient
from bridge.kube.events import EventRecorder
from bridge.kube.namespaces import CachedNamespaceLabels, kube_namespace_fetch
from bridge.logging import get_logger
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import SlurmJob
from bridge.translate import BackLink, back_link, foreign_label_message, job_names_pod, link_is_ours
from bridge.wellknown import REASON_FOREIGN_JOB_LABEL
from controller.caches import WatchCaches
from controller.model import JobKind, KubeObject, SlurmJobStatus, pod_ns_name

log = get_logger("controller")

# How long a namespace's labels are trusted (managedNamespaceSelector, for the Warning on
# a forged label and the pods of a job Slurm no longer knows).
NAMESPACE_CACHE_SECONDS = 30.0


class Ownership:
    def __init__(
        self,
        cfg: BridgeConfig,
        slurm: SlurmClient,
        kube: KubeClient,
        clock: Clock,
        caches: WatchCaches,
        events: EventRecorder | None,
    ) -> None:
        self.cfg = cfg
        self.slurm = slurm
        self.caches = caches
        self.events = events
        # job id -> its back-link when it is ours (None: read, and not ours). Read once,
        # the first time an action on the job's pods is planned (or when the poller
        # reads the job anyway).
        self.links: dict[int, BackLink | None] = {}
        # managedNamespaceSelector: the labels of the namespaces of labelled pods
        self.namespaces = CachedNamespaceLabels(
            kube_namespace_fetch(kube), clock, NAMESPACE_CACHE_SECONDS
        )

    def learn(self, job: SlurmJob) -> None:
        """Remember whether ``job`` (just read) is ours, and which pods it names; the
        departed pods it does not name go (they prove nothing)."""
        self.links[job.job_id] = self._link_of(job)
        self.caches.prune_departed(job.job_id)

    def may_prove(self, job_id: int, pod: KubeObject) -> bool:
        """Whether a pod that left ``job_id`` may prove anything: yes while the job's
        back-link is unknown, then only a pod the link names."""
        if job_id not in self.links:
            return True
        link = self.links[job_id]
        return link is not None and job_names_pod(link, pod)

    def forget(self, job_id: int) -> None:
        self.links.pop(job_id, None)

    def _link_of(self, job: SlurmJob) -> BackLink | None:
        """The job's back-link when it is ours; a hetjob's names the pods of every
        component with their uids (each component's admin_comment names its own), and
        every component must be ours. A component whose link has no uids (an older
        bridge) leaves the whole link without: it proves less, never more."""
        links = [back_link(c.admin_comment) for c in job.components]
        mine: list[BackLink] = []
        for link, c in zip(links, job.components, strict=True):
            if link is None or not link_is_ours(link, c.mcs_label, self.cfg.mcs_label):
                return None
            mine.append(link)
        first = mine[0]
        if len(mine) == 1:
            return first
        uids = [x.uids for x in mine]
        return BackLink(
            first.group,
            tuple(p for x in mine for p in x.pods),
            first.mcs,
            None if any(u is None for u in uids) else tuple(u for x in uids if x for u in x),
        )

    async def named_pods(
        self, job_id: int, job_pods: list[KubeObject], view: SlurmJobStatus
    ) -> list[KubeObject]:
        """The pods of ``job_pods`` the job's back-link names. A job Slurm no longer knows
        (GONE) and was never read cannot be proven: only pods of managed namespaces count
        then (the webhook keeps their job-id label to the bridge), and nothing is
        cancelled for them (the job is gone)."""
        if job_id not in self.links and view.kind is JobKind.GONE:
            return [p for p in job_pods if await self.namespace_managed(pod_ns_name(p)[0])]
        if job_id not in self.links:
            try:
                self.learn(await self.slurm.get_job(job_id))
            except SlurmNotFound:
                return []  # the poller will call it GONE
        link = self.links[job_id]
        return [p for p in job_pods if link is not None and job_names_pod(link, p)]

    def departed_named(self, job_id: int) -> bool:
        """A pod the job's back-link names was labelled with it and is gone."""
        link = self.links.get(job_id)
        left = self.caches.departed.get(job_id)
        return (
            link is not None
            and left is not None
            and any(job_names_pod(link, p) for p in left.values())
        )

    async def warn_foreign(self, job_id: int, strangers: list[KubeObject]) -> None:
        """Pods labelled with ``job_id`` that the job does not name: logged, and a Warning
        Event on each in a managed namespace."""
        for pod in strangers:
            ns, name = pod_ns_name(pod)
            log.warning("foreign_job_label_ignored", pod=f"{ns}/{name}", job_id=job_id)
            if self.events is not None and await self.namespace_managed(ns):
                await self.events.record_change(
                    pod, "Warning", REASON_FOREIGN_JOB_LABEL, foreign_label_message(job_id)
                )

    async def namespace_managed(self, ns: str) -> bool:
        cfg = self.cfg
        if ns in cfg.managed_namespaces:
            return True
        if cfg.managed_namespace_selector is None:
            return False
        return cfg.namespace_is_managed(ns, await self.namespaces.labels(ns))
