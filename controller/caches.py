"""The watch caches: what the controller's two watches said, indexed for its reconcilers.

The pod watch sees only the pods of the bridge's ``schedulerName`` that carry the job-id
label, reduced to what the plans read (:func:`~controller.model.slim_pod`); the node watch
sees every node (:func:`~bridge.kube.resources.slim`). Nothing here is believed: a pod's
job-id label is only an index, proven against the job's back-link before anything is done
on its word (:mod:`controller.ownership`).

Each event returns the job ids whose pods it touched, in order; the caller queues them
(:mod:`controller.runtime`). The caches are rebuilt by listing on start: a restart loses
nothing (the pod label and the job's admin_comment are the links).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from bridge.bounded import BoundedMap
from bridge.kube.resources import KubeObject
from bridge.kube.watch import WatchEvent
from bridge.translate import kobj, pod_job_id
from controller import claims, nodes

# The labelled pods that left, per job id (a pod's job-id label is tenant input): jobs
# remembered at most, and pods per job (any one the back-link names proves a pod left; the
# dangling sweep still ends a job whose listed pods are all gone if these were dropped).
DEPARTED_JOBS_MAX = 4096
DEPARTED_PODS_PER_JOB_MAX = 64


@dataclass
class NodeChange:
    """What a node event changed for the controller."""

    # An external node came, went or changed: the partitions external nodes name (the
    # bridge's partitions, so the node policy) may have changed.
    external: bool
    # The jobs with pods on the node (they may now count as stuck Terminating).
    jobs: list[int] = field(default_factory=list)


class WatchCaches:
    def __init__(self) -> None:
        # namespace/name -> the labelled pod, as last seen
        self.pods: dict[str, KubeObject] = {}
        # job id -> keys of the pods labelled with it
        self.by_job: dict[int, set[str]] = {}
        # node name -> keys of the labelled pods bound to it (a node event looks up its
        # pods here: a scan of every pod per node event was O(pods x nodes) at start-up)
        self.by_node: dict[str, set[str]] = {}
        # Pods deleted before their claims were released: job -> key -> last state.
        self.deleted: dict[int, dict[str, KubeObject]] = {}
        self.released: set[str] = set()  # uids of existing pods whose claims were released
        # job id -> the built-in PodGroups (namespace, name) told of its preemption
        # (DisruptionTarget): each once per job. Dropped with the job.
        self.disrupted: dict[int, set[tuple[str, str]]] = {}
        # job id -> the labelled pods that left (deleted, or relabelled): what "all pods
        # deleted" is proven against. Dropped with the job; bounded (labels are tenant
        # input), and only the pods ``departs`` keeps (controller.ownership: once the
        # job's back-link is known, the pods it names).
        self.departed: BoundedMap[int, BoundedMap[str, KubeObject]] = BoundedMap(
            "controller-departed", DEPARTED_JOBS_MAX
        )
        self.departs: Callable[[int, KubeObject], bool] = lambda _job, _pod: True
        self.nodes: dict[str, KubeObject] = {}
        # node name -> slice name -> the node's ResourceSlices (their spec only);
        # ``slices_known`` once the slice watch listed (or the cluster serves none)
        self.slices: dict[str, dict[str, KubeObject]] = {}
        self.slices_known = False
        self._slice_node: dict[str, str] = {}  # slice name -> its node
        # DeviceTaintRules by name (Kubernetes 1.37+; watched only where served): their
        # taints count with the slices' (controller.device_evictions, the GRES condition)
        self.taint_rules: dict[str, KubeObject] = {}

    def taint_rules_of(self) -> list[KubeObject]:
        """The DeviceTaintRules, by name."""
        return [self.taint_rules[n] for n in sorted(self.taint_rules)]

    def on_taint_rule(self, ev: WatchEvent) -> list[str]:
        """Apply a DeviceTaintRule event; the nodes whose devices it may taint or untaint
        (those with slices: a rule selects by driver, pool and device)."""
        if ev.type == "DELETED":
            self.taint_rules.pop(kobj.name(ev.object), None)
        else:
            self.taint_rules[kobj.name(ev.object)] = ev.object
        return sorted(self.slices)

    def node_slices(self, node: str) -> list[KubeObject] | None:
        """The node's ResourceSlices, or None while they are not known yet."""
        if not self.slices_known:
            return None
        return list(self.slices.get(node, {}).values())

    def on_slice(self, ev: WatchEvent) -> list[str]:
        """Apply a ResourceSlice event; the nodes whose slices it changed."""
        name = kobj.name(ev.object)
        touched: list[str] = []
        old = self._slice_node.pop(name, None)
        if old is not None:
            by_name = self.slices.get(old, {})
            by_name.pop(name, None)
            if not by_name:
                self.slices.pop(old, None)
            touched.append(old)
        node = kobj.text(ev.object, "spec", "nodeName")
        if ev.type != "DELETED" and node:
            self.slices.setdefault(node, {})[name] = slim_slice(ev.object)
            self._slice_node[name] = node
            if node != old:
                touched.append(node)
        return touched

    def job_pods(self, job_id: int) -> list[KubeObject]:
        """The pods labelled with ``job_id``, in key order."""
        return [self.pods[k] for k in sorted(self.by_job.get(job_id, ())) if k in self.pods]

    def forget_job(self, job_id: int) -> None:
        """Nothing left to watch for this job: drop its index and its departed pods."""
        self.by_job.pop(job_id, None)
        self.departed.pop(job_id, None)
        self.disrupted.pop(job_id, None)

    def on_pod(self, ev: WatchEvent) -> list[int]:
        """Apply a pod event; the jobs whose pods it touched, in order."""
        touched: list[int] = []
        if ev.type == "DELETED":
            uid = kobj.uid(ev.object)
            if uid in self.released:
                self.released.discard(uid)
            elif (j := pod_job_id(ev.object)) is not None and claims.pod_claims(ev.object)[0]:
                self.deleted.setdefault(j, {})[ev.key] = ev.object
                touched.append(j)
        touched += self._track(ev.key, None if ev.type == "DELETED" else ev.object)
        return touched

    def _track(self, key: str, pod: KubeObject | None) -> list[int]:
        touched: list[int] = []
        old = self.pods.pop(key, None)
        if old is not None and (j := pod_job_id(old)) is not None:
            self.by_job.get(j, set()).discard(key)
            if pod is None or pod_job_id(pod) != j:
                self._depart(j, key, old)
            touched.append(j)
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
                self.by_job.setdefault(j, set()).add(key)
                touched.append(j)
        return touched

    def _depart(self, job_id: int, key: str, pod: KubeObject) -> None:
        if not self.departs(job_id, pod):
            return  # e.g. a forged label on a job whose back-link does not name the pod
        left = self.departed.get(job_id)
        if left is None:
            left = BoundedMap("controller-departed-pods", DEPARTED_PODS_PER_JOB_MAX)
            self.departed[job_id] = left
        left[key] = pod

    def prune_departed(self, job_id: int) -> None:
        """Keep only the departed pods ``departs`` keeps now (the back-link was read)."""
        left = self.departed.get(job_id)
        if left is None:
            return
        for key, pod in list(left.items()):
            if not self.departs(job_id, pod):
                del left[key]
        if not left:
            del self.departed[job_id]

    def on_node(self, ev: WatchEvent) -> NodeChange:
        """Apply a node event."""
        name = ev.key
        old = self.nodes.get(name)
        change = NodeChange(
            external=nodes.is_external(ev.object) or (old is not None and nodes.is_external(old))
        )
        if ev.type == "DELETED":
            self.nodes.pop(name, None)
        else:
            self.nodes[name] = ev.object
        for key in self.by_node.get(name, ()):
            if (j := pod_job_id(self.pods[key])) is not None:
                change.jobs.append(j)
        return change


def slim_slice(s: KubeObject) -> KubeObject:
    """What the GRES comparison reads of a ResourceSlice: its name, resourceVersion (the
    devices read from it are kept until it changes) and spec."""
    meta = {"name": kobj.name(s), "resourceVersion": kobj.text(s, "metadata", "resourceVersion")}
    return {"metadata": meta, "spec": kobj.mapping(s, "spec")}


def _node_of(pod: KubeObject) -> str:
    return kobj.text(pod, "spec", "nodeName")
