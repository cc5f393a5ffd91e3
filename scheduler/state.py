"""The scheduler's watch-fed view of Kubernetes: its unbound pods gathered into groups,
the nodes, the namespaces' labels, and the owner objects grouping reads.

Fed by the watches :mod:`scheduler.app` runs (pods, nodes, namespaces); a pod event
answers the key of the group it changed, which the cycle queues. Nothing here talks to
Slurm or touches the work queue.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import structlog

from bridge.bounded import BoundedMap, BoundedSet
from bridge.clock import Clock, SystemClock
from bridge.config import BridgeConfig
from bridge.errors import KubeError, KubeNotFound
from bridge.kube.client import KubeClient
from bridge.kube.resources import KubeObject, Resource, slim
from bridge.models import JobSpec
from bridge.slurm.models import SlurmJob
from bridge.translate import (
    GroupRef,
    NodeSet,
    PodTemplates,
    TranslateSettings,
    gang_workload,
    group_of,
    kobj,
    podgroup_name,
    workload_ref,
)
from bridge.wellknown import CONDITION_POD_SCHEDULED
from bridge.workloads import Api, discovered_apis, kind_named, kind_of_object, owner_apis
from bridge.workloads.builtin import (
    COMPOSITES,
    PODGROUPS,
    SCHEDULING_GROUP,
    WORKLOADS,
    gang_composite,
    parent_composite,
)
from scheduler.owners import OwnerCache

log = structlog.get_logger("scheduler")

# The field of a built-in PodGroup that names its Workload (1.36's; 1.37's workloadRef)
WORKLOAD_NAME_FIELD = "spec.podGroupTemplateRef.workload.workloadName"
# The built-in Workload API's group; its version comes from discovery.
BUILTIN_SCHEDULING_GROUP = SCHEDULING_GROUP
BUILTIN_RETRY_SECONDS = 30.0


def resource(api: Api, version: str | None = None) -> Resource:
    """The client's resource of a kind's API (``version``: the one served, else its
    first)."""
    return Resource(api.group, version or api.versions[0], api.plural, api.kind, True, api.builtin)


# The objects a pod's controller chain may name that grouping reads, by kind (the
# workload kinds' pinned APIs: bridge.workloads).
OWNER_KINDS: dict[str, Resource] = {kind: resource(api) for kind, api in owner_apis().items()}
# Pods bound whose leaving the watch has not shown yet, remembered at most.
BOUND_UIDS_MAX = 10_000
# Built-in PodGroups and Workloads known by name (-> uid in the owner cache), at most.
BUILTIN_NAMES_MAX = 4096


@dataclass
class Parents:
    """What a built-in PodGroup's parent makes of its pods: a Workload's gang
    (``workloads``: PodGroup name -> Workload), a gang CompositePodGroup's
    (``composites``), or nothing; ``awaits``: the parent it names that is not there
    (kind, name, the field naming it)."""

    workloads: dict[str, str] = field(default_factory=dict)
    composites: dict[str, str] = field(default_factory=dict)
    awaits: tuple[str, str, str] | None = None


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
    # a built-in PodGroup's group: the (kind, name, field naming it) of the Workload or
    # CompositePodGroup its PodGroup names, which could not be read at the last
    # :meth:`KubeState.regroup` (None: none): the group waits for it
    awaits_parent: tuple[str, str, str] | None = None
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
        kube: KubeClient,
        settings: TranslateSettings,
        clock: Clock | None = None,
    ) -> None:
        self.cfg = cfg
        self.kube = kube
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
        # (namespace, uid) -> owner/group object: bounded, slim, re-read when older than a
        # minute; never found by uid alone (a pod's ownerReference uid is its own text)
        self.clock = clock or SystemClock()
        self.owners = OwnerCache(self.clock)
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
        # the built-in PodGroup and Workload at the version the server serves
        # (discovery), by plural; none: not found yet, looked for again after
        # BUILTIN_RETRY_SECONDS
        self._builtin: dict[str, Resource] = {}
        self._builtin_looked_at: float | None = None
        # (namespace, plural, name) -> uid of a built-in PodGroup or Workload read by name
        # (pods name their PodGroup, a PodGroup its Workload, by name); the object itself
        # is in ``owners``, fresh for a minute
        self._builtin_uids: BoundedMap[tuple[str, str, str], str] = BoundedMap(
            "scheduler-builtin-names", BUILTIN_NAMES_MAX
        )

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
            ref = await self._resolve_group(pod)
            g = self.groups.get(ref.key)
            if g is None:
                g = self.groups[ref.key] = GroupState(ref)
            g.ref = ref
            g.pods.add(key)
            g.first_seen.setdefault(key, self.clock.monotonic())
            self.pod_group[key] = ref.key
        return self.pod_group[key]

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

    # ------------------------------------------------------------------ owners
    async def _get_object(self, res: Resource, namespace: str, name: str) -> KubeObject | None:
        try:
            obj = await self.kube.get(res, name, namespace)
        except KubeNotFound:
            return None
        self.owners.put(obj)
        return obj

    async def _builtin_named(self, plural: str, namespace: str, name: str) -> KubeObject | None:
        """The built-in PodGroup or Workload (``plural``) of that name, from the owner
        cache when read less than a minute ago; None when it does not exist (or the server
        does not serve it)."""
        uid = self._builtin_uids.get((namespace, plural, name))
        cached = self.owners.fresh(namespace, uid) if uid else None
        if cached is not None and kobj.name(cached) == name:
            return cached
        res = await self.builtin(plural)
        if res is None:
            return None
        obj = await self._get_object(res, namespace, name)
        if obj is not None:
            self._builtin_uids[(namespace, plural, name)] = kobj.uid(obj)
        return obj

    async def _podgroup_gang(self, namespace: str, podgroup: KubeObject | None) -> Parents:
        """For a built-in PodGroup (None: not there), from ONE read of the parent it names
        (its CompositePodGroup, else its Workload): the gang its pods join
        (:func:`bridge.workloads.builtin.gang_composite`,
        :func:`~bridge.translate.gang_workload`) and the parent it names that cannot be read."""
        found = Parents()
        name = kobj.name(podgroup) if podgroup is not None else ""
        if composite := parent_composite(podgroup):
            obj = await self._builtin_named(COMPOSITES.plural, namespace, composite)
            if obj is None:
                found.awaits = (COMPOSITES.kind, composite, "spec.parentCompositePodGroupName")
            elif gang := gang_composite(podgroup, obj):
                found.composites[name] = gang
            return found
        if workload := workload_ref(podgroup)[0]:
            obj = await self._builtin_named(WORKLOADS.plural, namespace, workload)
            if obj is None:
                found.awaits = (WORKLOADS.kind, workload, WORKLOAD_NAME_FIELD)
            elif gang := gang_workload(podgroup, obj):
                found.workloads[name] = gang
        return found

    async def _gang_of(self, pod: KubeObject) -> Parents:
        """The gang (a Workload's or a CompositePodGroup's) a pod naming a built-in
        PodGroup joins (none, or when its PodGroup or parent cannot be read now: the pod
        is then its PodGroup's, and :meth:`regroup` moves it once both are read)."""
        wpg = podgroup_name(pod)
        if not wpg:
            return Parents()
        ns = kobj.namespace(pod)
        try:
            pg = await self._builtin_named(PODGROUPS.plural, ns, wpg)
            return await self._podgroup_gang(ns, pg)
        except KubeError as e:
            log.warning("podgroup_read_failed", pod=kobj.pod_key(pod), error=str(e))
            return Parents()

    async def _resolve_group(self, pod: KubeObject) -> GroupRef:
        """Walk the pod's controller chain, reading the owners grouping needs (and a
        built-in PodGroup's Workload)."""
        ns = kobj.namespace(pod)
        current: Mapping[str, Any] = pod
        for _ in range(4):
            ref = next(
                (
                    o
                    for o in kobj.sequence(current, "metadata", "ownerReferences")
                    if o.get("controller")
                ),
                None,
            )
            if ref is None or ref.get("kind") not in OWNER_KINDS:
                break
            owner = self.owners.fresh(ns, str(ref.get("uid")))
            if owner is None:
                try:
                    owner = await self._get_object(OWNER_KINDS[ref["kind"]], ns, ref["name"])
                except KubeError as e:
                    log.warning("owner_read_failed", pod=kobj.pod_key(pod), error=str(e))
                    owner = None
            if owner is None:
                break
            current = owner
        gang = await self._gang_of(pod)
        return group_of(
            pod, self.owners.in_namespace(ns), self.settings, gang.workloads, gang.composites
        )

    async def regroup(self, g: GroupState) -> tuple[str, KubeObject | None]:
        """A built-in PodGroup's group (its pods all name that PodGroup), before it has a
        job: read its PodGroup (answered, for the cycle to use: no second read) and the
        parent it names (its CompositePodGroup, else its Workload). When that parent makes
        one gang of its PodGroups, move the pods there (they came before the PodGroup or
        the parent could be read) and answer that gang's key; else "", and
        ``g.awaits_parent`` names the parent the PodGroup names that cannot be read. One
        read decides both: a part of the gang never starts alone."""
        podgroup = await self.group_object(g.ref)
        pods = self.pods_of(g)
        gang = await self._podgroup_gang(g.ref.namespace, podgroup)
        g.awaits_parent = gang.awaits
        if not (gang.workloads or gang.composites) or not pods:
            return "", podgroup
        ns = g.ref.namespace
        new = group_of(
            pods[0], self.owners.in_namespace(ns), self.settings, gang.workloads, gang.composites
        )
        target = self.groups.get(new.key)
        if target is None:
            target = self.groups[new.key] = GroupState(new)
        for pod in pods:
            key = kobj.pod_key(pod)
            target.pods.add(key)
            target.first_seen.setdefault(key, g.first_seen.get(key, self.clock.monotonic()))
            g.pods.discard(key)
            g.first_seen.pop(key, None)
            self.pod_group[key] = new.key
        return new.key, podgroup

    async def group_object(self, ref: GroupRef) -> KubeObject | None:
        """The object the group is (a PodGroup, a Job ...), read again when its kind says
        so (a PodGroup's size may change), from the cache for the others: by kind and
        name in the group's namespace (the cache by namespace and a uid that the pod's
        owner chain proved, see :func:`bridge.translate.grouping.owner_chain`)."""
        src = ref.source
        if src is None:
            return None
        kind = kind_of_object(src.api_version, src.kind)
        if kind is None:
            return None
        cached = self.owners.fresh(src.namespace, src.uid) if src.uid else None
        if cached is not None and not kind.reread:
            return cached
        if not kind.api.discovered:
            return await self._get_object(resource(kind.api), src.namespace, src.name)
        if not kind.reread:
            return await self._builtin_named(kind.api.plural, src.namespace, src.name)
        res = await self.builtin(kind.api.plural)
        return None if res is None else await self._get_object(res, src.namespace, src.name)

    async def pod_groups(self, ref: GroupRef) -> list[KubeObject]:
        """The related objects a group's kind reads, of its namespace (a Workload gang's
        built-in PodGroups: its kind keeps those made from it), read again on each cycle
        (a PodGroup may come after its first pods); empty for a kind without any."""
        found: list[KubeObject] = []
        for api in kind_named(ref.kind).related:
            res = await self.builtin(api.plural) if api.discovered else resource(api)
            if res is None:
                continue
            listed = await self.kube.list(res, ref.namespace)
            found += listed.items
        return found

    async def builtin(self, plural: str) -> Resource | None:
        """A built-in ``scheduling.k8s.io`` resource (``podgroups``, ``workloads``,
        ``compositepodgroups``) at the newest version the server serves of those its kind
        knows (:attr:`bridge.workloads.Api.versions`): no version pinned, so Kubernetes
        1.36's v1alpha2 and 1.37's v1beta1 (and v1alpha3 composites) both work. Found by
        discovery; None when it is not served (nothing is, without podgroups: looked for
        again after BUILTIN_RETRY_SECONDS)."""
        if self._builtin:
            return self._builtin.get(plural)
        now = self.clock.monotonic()
        if (
            self._builtin_looked_at is not None
            and now - self._builtin_looked_at < BUILTIN_RETRY_SECONDS
        ):
            return None
        self._builtin_looked_at = now
        served: dict[str, set[str]] = {}
        for version in await self.kube.served_versions(BUILTIN_SCHEDULING_GROUP):
            listed = await self.kube.request(
                "GET", f"/apis/{BUILTIN_SCHEDULING_GROUP}/{version}", what="discovery"
            )
            served[version] = {
                str(r.get("name")) for r in listed.get("resources") or () if isinstance(r, dict)
            }
        found: dict[str, Resource] = {}
        for api in discovered_apis():
            newest = next((v for v in api.versions if api.plural in served.get(v, ())), None)
            if newest is not None:
                found[api.plural] = resource(api, newest)
        if PODGROUPS.plural not in found:
            return None
        self._builtin = found
        log.info(
            "builtin_podgroups_version",
            version=found[PODGROUPS.plural].version,
            served={p: r.version for p, r in found.items()},
        )
        return self._builtin.get(plural)
