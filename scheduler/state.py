"""The scheduler's watch-fed view of Kubernetes: its unbound pods gathered into groups,
the nodes, the namespaces' labels, and the objects the workload kinds read
(:mod:`scheduler.related`).

Fed by the watches :mod:`scheduler.app` runs (pods, nodes, namespaces, the kinds' APIs);
a pod event answers the key of the group it changed, an event of a kind's object the
keys of the groups it regrouped or changed, which the cycle queues. Nothing here reads
the API, talks to Slurm or touches the work queue.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import structlog

from bridge.bounded import BoundedSet
from bridge.clock import Clock, SystemClock
from bridge.config import BridgeConfig
from bridge.kube.resources import KubeObject, slim
from bridge.models import JobSpec
from bridge.slurm.models import SlurmJob
from bridge.translate import (
    GroupRef,
    NodeSet,
    PodTemplates,
    TranslateSettings,
    group_of,
    kobj,
)
from bridge.wellknown import CONDITION_POD_SCHEDULED
from bridge.workloads import Api, WorkloadKind, kind_named, kind_of_object
from bridge.workloads.base import api_group
from scheduler.related import RelatedCache

log = structlog.get_logger("scheduler")

# Pods bound whose leaving the watch has not shown yet, remembered at most.
BOUND_UIDS_MAX = 10_000


@dataclass
class GroupState:
    """What the scheduler remembers of one group between its cycles."""

    ref: GroupRef
    pods: set[str] = field(default_factory=set)
    job: SlurmJob | None = None
    job_spec: JobSpec | None = None
    # A submit whose answer was lost: look the job up by identity before submitting again.
    uncertain_submit: bool = False
    first_seen: dict[str, float] = field(default_factory=dict)
    waiting_said_at: float | None = None  # last "waiting for group" write to every member
    waiting_since: float | None = None  # when the group was first found incomplete
    # ``job`` is what the pods record of it (restored, :func:`scheduler.snapshot.restored_job`),
    # not read from Slurm: only a Pending decision may act on it (a no-op); any other
    # reads it first (the ReadJob decision).
    unread: bool = False
    # the first expected start its pods were shown (bridge.expected): the estimate's error
    # is measured against it when the job starts (slurm_bridge_expected_start_error_seconds)
    expected_first: datetime | None = None
    # Kubernetes nodes whose devices and Slurm's disagreed for a job of the group (given
    # back, SlurmDevicesMismatch) -> the fingerprint of their ResourceSlices then: the
    # group's jobs exclude them until the slices change (at most the cluster's nodes)
    device_excluded: dict[str, str] = field(default_factory=dict)


def scheduled_condition(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The pod's PodScheduled condition, if it has one."""
    for c in kobj.sequence(pod, "status", "conditions"):
        if c.get("type") == CONDITION_POD_SCHEDULED:
            return dict(c)
    return None


class KubeState:
    """The watch-fed caches. Pods leave when bound (:meth:`bound`), deleted or no longer
    this scheduler's; a group whose last pod left is processed once more and dropped."""

    def __init__(
        self,
        cfg: BridgeConfig,
        settings: TranslateSettings,
        clock: Clock | None = None,
    ) -> None:
        self.cfg = cfg
        self.settings = settings
        self.pods: dict[str, KubeObject] = {}  # unbound managed pods, by ns/name
        self.pod_group: dict[str, str] = {}  # pod key -> group key
        self.groups: dict[str, GroupState] = {}
        self.nodes: dict[str, KubeObject] = {}
        # the same nodes, with excluded_nodes memoized per placement (no O(nodes) per group)
        self.node_set = NodeSet()
        # a lone pod's options and needs by its template (translated once per template)
        self.templates = PodTemplates()
        self.namespace_labels: dict[str, dict[str, str]] = {}
        self.clock = clock or SystemClock()
        # the objects the workload kinds read (their own and related), watch-fed
        self.related = RelatedCache()
        self.pods_listed = False  # the pod watch's initial list was delivered
        # uids of the pods in that initial list, kept until the start-up sweep ends
        # (:meth:`created_after_list`)
        self._listed_uids: set[str] = set()
        self._keep_listed = True
        # Pods this scheduler bound whose leaving the watch has not been seen yet: an event
        # for one that still shows no node is older than the binding and is ignored.
        # Bounded: the watch normally says within seconds; a uid dropped early only makes a
        # stale event retry a binding the API server refuses (409).
        self._bound_uids: BoundedSet[str] = BoundedSet("scheduler-bound-uids", BOUND_UIDS_MAX)

    # ------------------------------------------------------------------ watch events
    def managed(self, pod: Mapping[str, Any]) -> bool:
        ns = kobj.namespace(pod)
        spec = kobj.mapping(pod, "spec")
        return (
            spec.get("schedulerName") == self.cfg.scheduler_name
            and not spec.get("nodeName")
            and self.cfg.namespace_is_managed(ns, self.namespace_labels.get(ns, {}))
        )

    async def on_pod_event(self, event: str, pod: KubeObject) -> str | None:
        """Apply one watch event (ADDED/MODIFIED/DELETED) of an unscheduled pod: the key
        of the group it changed, if any."""
        key = kobj.pod_key(pod)
        uid = kobj.uid(pod)
        if (
            event == "DELETED"
            or not self.managed(pod)
            or kobj.get(pod, "metadata", "deletionTimestamp")
        ):
            self._bound_uids.discard(uid)
            return self.forget_pod(key)
        if uid in self._bound_uids:
            return None  # older than our binding (e.g. our own label patch): it is bound
        if not self.pods_listed and self._keep_listed:
            self._listed_uids.add(uid)
        cached = self.pods.get(key)
        if cached is not None and kobj.uid(cached) == uid and not kobj.not_older(pod, cached):
            # A late event of our own earlier write (the link patch, the pending message):
            # keeping it would roll the cache back, and the next write carrying its
            # resourceVersion would get a 409 (and count towards a give-back).
            return None
        first = cached is None
        self.pods[key] = pod
        if first or key not in self.pod_group:
            self._join(key, self._group_of(pod), self.clock.monotonic())
        return self.pod_group[key]

    def _group_of(self, pod: KubeObject) -> GroupRef:
        """The pod's group, from the objects held (its owners, the kinds' objects)."""
        owners = self.related.owners(kobj.namespace(pod))
        return group_of(pod, owners, self.settings, self.related)

    def _join(self, key: str, ref: GroupRef, first_seen: float) -> GroupState:
        """The pod ``key`` is of group ``ref`` (first seen then)."""
        g = self.groups.get(ref.key)
        if g is None:
            g = self.groups[ref.key] = GroupState(ref)
        g.ref = ref
        g.pods.add(key)
        g.first_seen.setdefault(key, first_seen)
        self.pod_group[key] = ref.key
        return g

    def on_related_event(self, api: Api, event: str, obj: KubeObject) -> list[str]:
        """Apply one watch event of an object a workload kind reads (``api``): the keys
        of the groups it may change (the group whose object it is, and those of its
        namespace whose kind declares ``api`` related), to be processed again. The pods
        of such a group that holds no job yet are grouped again: a pod that came before
        the object (its PodGroup's parent Workload, its Job) moves to the gang the object
        makes (a part of a gang never starts alone)."""
        self.related.on_event(api, event, obj)
        ns, name = kobj.namespace(obj), kobj.name(obj)
        touched: list[str] = []
        for g in [g for g in self.groups.values() if g.ref.namespace == ns]:
            if not _reads(kind_named(g.ref.kind), g.ref, api, name):
                continue
            touched.append(g.ref.key)
            if g.job is None:
                touched += self._regroup(g)
        return touched

    def _regroup(self, g: GroupState) -> list[str]:
        """Group ``g``'s pods again from the objects held: the keys of the groups pods
        moved to."""
        moved: list[str] = []
        for key in sorted(g.pods):
            pod = self.pods.get(key)
            if pod is None:
                continue
            ref = self._group_of(pod)
            if ref.key == g.ref.key:
                g.ref = ref  # its uid may be known now
                continue
            first = g.first_seen.pop(key, self.clock.monotonic())
            g.pods.discard(key)
            self._join(key, ref, first)
            if ref.key not in moved:
                moved.append(ref.key)
        return moved

    def initial_pods_listed(self) -> None:
        """The pod watch's initial list was delivered whole: a pod seen from now on and
        not in it was created after it (see :meth:`created_after_list`)."""
        self.pods_listed = True

    def sweep_ended(self) -> None:
        """The start-up sweep is done: the initial list's uids are no longer needed."""
        self._keep_listed = False
        self._listed_uids.clear()

    def created_after_list(self, pods: list[KubeObject]) -> bool:
        """Every one of ``pods`` was created after the pod watch's initial list."""
        return self.pods_listed and all(kobj.uid(p) not in self._listed_uids for p in pods)

    def on_node_event(self, event: str, node: KubeObject) -> None:
        name = kobj.name(node)
        if event == "DELETED":
            self.nodes.pop(name, None)
            self.node_set.remove(name)
        else:
            self.nodes[name] = node
            self.node_set.put(node)

    def on_namespace_event(self, event: str, ns: KubeObject) -> None:
        name = kobj.name(ns)
        if event == "DELETED":
            self.namespace_labels.pop(name, None)
        else:
            self.namespace_labels[name] = kobj.labels(ns)

    # ------------------------------------------------------------------ pods
    def pods_of(self, g: GroupState) -> list[KubeObject]:
        return [self.pods[k] for k in g.pods if k in self.pods]

    def forget_pod(self, key: str) -> str | None:
        """The pod is no longer this scheduler's (bound, deleted, unmanaged): the key of
        its group, to be processed again (and dropped once no pod of it is left). When it
        was first seen is forgotten with it, so a group that never fills keeps no trace
        of the pods that came and went."""
        self.pods.pop(key, None)
        gkey = self.pod_group.pop(key, None)
        g = self.groups.get(gkey) if gkey else None
        if g is None:
            return None
        g.pods.discard(key)
        g.first_seen.pop(key, None)
        return g.ref.key

    def bound(self, pod: KubeObject, key: str | None = None) -> float | None:
        """This scheduler bound ``pod`` (``key``: its pod key, when known): it leaves now,
        not when the watch says so (no second bind); the cycle processes its group again,
        or drops it when none of its pods is left
        (:attr:`scheduler.outcome.Outcome.pods_bound`). Returns when the pod was first seen
        (the bind latency's start; None: unknown)."""
        key = key or kobj.pod_key(pod)
        gkey = self.pod_group.get(key)
        g = self.groups.get(gkey) if gkey else None
        started = g.first_seen.get(key) if g is not None else None
        self._bound_uids.add(kobj.uid(pod))
        self.forget_pod(key)
        return started

    def written(self, pod: KubeObject) -> KubeObject:
        """Keep the answer of a write to a cached pod, as the watch keeps it; returns it."""
        key = kobj.pod_key(pod)
        cached = self.pods.get(key)
        if cached is None:
            return pod
        if not kobj.same_version(cached, pod):  # not kept already from its watch event
            cached = self.pods[key] = slim(pod)
        return cached

    def keep_pod(self, pod: KubeObject) -> KubeObject:
        """The pod watch's ``keep``: the cached pod when it is this very version (the
        answer of our own write, kept by :meth:`written`), else ``pod`` slimmed. A pod
        version is slimmed once, not twice: a bound pod's link patch comes back both as
        the write's answer and as a watch event (slimming is ~10% of a pod's event
        cost)."""
        cached = self.pods.get(kobj.pod_key(pod))
        if cached is not None and kobj.same_version(cached, pod):
            return cached
        return slim(pod)

    def drop_group(self, gkey: str) -> None:
        self.groups.pop(gkey, None)

    def naming_claim(self, claim: KubeObject, *, template: bool = False) -> list[str]:
        """The keys of the groups holding no job whose pods name ``claim`` (a
        ResourceClaim, or with ``template`` a ResourceClaimTemplate) in its namespace."""
        ns, name = kobj.namespace(claim), kobj.name(claim)
        field = "resourceClaimTemplateName" if template else "resourceClaimName"
        found: list[str] = []
        for g in self.groups.values():
            if g.job is not None or g.ref.namespace != ns:
                continue
            if any(
                kobj.text(entry, field) == name
                for pod in self.pods_of(g)
                for entry in kobj.sequence(pod, "spec", "resourceClaims")
            ):
                found.append(g.ref.key)
        return found

    # ------------------------------------------------------------------ objects
    def group_object(self, ref: GroupRef) -> KubeObject | None:
        """The object the group is (a PodGroup, a Job ...), as held (None: not there)."""
        src = ref.source
        kind = kind_of_object(src.api_version, src.kind) if src is not None else None
        if src is None or kind is None:
            return None
        return self.related.get(kind.api, src.namespace, src.name)


def _reads(kind: WorkloadKind, ref: GroupRef, api: Api, name: str) -> bool:
    """A group of ``kind`` (``ref``) reads the object ``name`` of ``api``: it is the
    group's own (its source: a PodGroup, a Job, the Job of a pod that is not a gang), or
    its kind declares ``api`` related (a Workload gang reads its namespace's PodGroups)."""
    if api in kind.related:
        return True
    src = ref.source
    return (
        src is not None and src.name == name and api.matches(api_group(src.api_version), src.kind)
    )
