"""What the reconcilers see and what they decide: pure data, no I/O.

A reconciler's ``plan(...)`` turns a snapshot (pods of one Slurm job, what Slurm said about
that job, nodes, the time) into a list of :data:`Action`; ``apply`` carries them out.

"Unknown is not gone": :class:`SlurmJobStatus` has an explicit ``UNKNOWN`` kind (Slurm
could not be asked, or has not been yet). Only ``ENDED`` (Slurm said so) and ``GONE`` (a
404 after a successful list) ever lead to failing, deleting or finalizing a pod.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any, Literal

from bridge.kube.resources import KubeObject, interned, object_key
from bridge.kube.resources import parse_time as _parse_k8s_time
from bridge.translate import kobj
from bridge.wellknown import FINALIZER

__all__ = ["KubeObject", "object_key"]

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


class JobKind(Enum):
    UNKNOWN = "unknown"  # never asked, or Slurm did not answer
    ACTIVE = "active"  # PENDING / RUNNING / SUSPENDED
    ENDED = "ended"  # a terminal state (CANCELLED, COMPLETED, TIMEOUT, ...)
    GONE = "gone"  # Slurm definitely no longer knows the job (404 after a good list)


@dataclass(frozen=True)
class SlurmJobStatus:
    """What the controller knows of one Slurm job (its poller's last word on it)."""

    kind: JobKind
    state: str = ""
    reason: str = ""
    # ACTIVE (RUNNING) but selected for preemption: it keeps its nodes only for its
    # partition's GraceTime (controller/preemption.py).
    preempted: bool = False
    # a hetjob: the component (``<id>+<offset>``) whose state this is (docs/hetjob.md)
    component: str = ""
    # ACTIVE hetjob one of whose components ended (``state`` is that component's): every
    # pod of the gang stops, and the rest of the job is cancelled once they all have.
    component_ended: bool = False

    @property
    def finished(self) -> bool:
        """Definitely over: its pods may be failed/finalized."""
        return self.kind in (JobKind.ENDED, JobKind.GONE)


UNKNOWN = SlurmJobStatus(JobKind.UNKNOWN)

# The work queue's keys: ``("job", "<id>")`` and ``("node", "<name>")``.
Key = tuple[Literal["job", "node"], str]


def job_key(job_id: int) -> Key:
    return ("job", str(job_id))


def node_key(name: str) -> Key:
    return ("node", name)


@dataclass(frozen=True)
class Next:
    """What a room's step asks of the work queue, answered to the runtime (the only one
    that touches the queue, as the scheduler's act step answers an Outcome): ``now`` the
    keys to reconcile again, ``later`` (key, seconds) to reconcile after a while."""

    now: tuple[Key, ...] = ()
    later: tuple[tuple[Key, float], ...] = ()

    def __add__(self, other: Next) -> Next:
        return Next(self.now + other.now, self.later + other.later)


NO_NEXT = Next()


# --------------------------------------------------------------------------- actions
@dataclass(frozen=True)
class FailPod:
    namespace: str
    name: str
    reason: str
    message: str
    # Slurm ended the job for a reason outside the workload: DisruptionTarget=True too.
    disruption: bool = False


@dataclass(frozen=True)
class DeletePod:
    namespace: str
    name: str
    reason: str
    message: str
    # 0 = force (stuck Terminating on a dead node); None = the pod's own grace period.
    grace_period_seconds: int | None = None
    # Slurm ended the job for a reason outside the workload: DisruptionTarget=True first.
    disruption: bool = False


@dataclass(frozen=True)
class RemoveFinalizer:
    namespace: str
    name: str


@dataclass(frozen=True)
class CancelJob:
    job_id: int
    why: str


@dataclass(frozen=True)
class SetPodGroupPhase:
    namespace: str
    name: str
    phase: str  # "Failed" | "Finished"


@dataclass(frozen=True)
class DisruptPodGroup:
    """A built-in PodGroup (``scheduling.k8s.io``) whose gang's Slurm job Slurm preempts:
    ``DisruptionTarget=True``, reason ``PreemptionByScheduler``, the message naming the
    job, as kube-scheduler sets it on a PodGroup it preempts (1.37); its parent too where
    that is a gang CompositePodGroup (one hetjob: the whole composite is preempted)."""

    namespace: str
    name: str
    message: str


@dataclass(frozen=True)
class DrainSlurmNode:
    slurm_node: str
    reason: str


@dataclass(frozen=True)
class ResumeSlurmNode:
    slurm_node: str


@dataclass(frozen=True)
class TaintNode:
    node: str
    key: str
    value: str
    effect: str


@dataclass(frozen=True)
class UntaintNode:
    node: str
    key: str


@dataclass(frozen=True)
class CordonNode:
    """Cordon, and mark the cordon as the bridge's (so it alone is ever undone)."""

    node: str


@dataclass(frozen=True)
class UncordonNode:
    """Undo a cordon the bridge made (and drop its mark)."""

    node: str


@dataclass(frozen=True)
class RegisterExternalNode:
    node: str  # the Kubernetes node (for events)
    slurm_node: str
    cpus: int
    memory_mib: int
    gres: str  # Gres= ("gpu:2", "gpu:1,gpu:1g.10gb:7"; "" for none)
    features: tuple[str, ...]
    partitions: tuple[str, ...]
    comment: str  # the bridge's mark (EXTERNAL_NODE_COMMENT_PREFIX + mcsLabel)


@dataclass(frozen=True)
class MarkExternalNode:
    """Set the bridge's comment on a dynamic external node (adopt it)."""

    slurm_node: str
    comment: str


@dataclass(frozen=True)
class JoinPartition:
    node: str  # the Kubernetes node (for events)
    slurm_node: str
    partition: str


@dataclass(frozen=True)
class SetNodeTopology:
    """Set an external node's ``Topology=`` in Slurm (docs/topology.md)."""

    node: str  # the Kubernetes node (for events)
    slurm_node: str
    topology: str


@dataclass(frozen=True)
class DeleteSlurmNode:
    slurm_node: str


@dataclass(frozen=True)
class SetNodeCondition:
    """Set one condition of the Kubernetes node (``lastTransitionTime`` moves only when the
    status does)."""

    node: str
    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str
    message: str


@dataclass(frozen=True)
class RemoveNodeCondition:
    node: str
    type: str


@dataclass(frozen=True)
class NodeWarning:
    """A Warning Event on the Kubernetes node (said once per change)."""

    node: str
    reason: str
    message: str


@dataclass(frozen=True)
class ReleaseClaim:
    """Take a finished pod out of a ResourceClaim's ``status.reservedFor``; with no consumer
    left, clear ``status.allocation`` and drop the delete-protection finalizer."""

    namespace: str
    claim: str
    pod_uid: str


@dataclass(frozen=True)
class DeleteClaim:
    """Delete the extended-resource claim the bridge generated for a finished pod (only
    while that pod is its owner)."""

    namespace: str
    claim: str
    pod_uid: str


Action = (
    FailPod
    | DeletePod
    | RemoveFinalizer
    | CancelJob
    | SetPodGroupPhase
    | DisruptPodGroup
    | DrainSlurmNode
    | ResumeSlurmNode
    | TaintNode
    | UntaintNode
    | CordonNode
    | UncordonNode
    | RegisterExternalNode
    | MarkExternalNode
    | JoinPartition
    | SetNodeTopology
    | DeleteSlurmNode
    | SetNodeCondition
    | RemoveNodeCondition
    | NodeWarning
    | ReleaseClaim
    | DeleteClaim
)

# Metric label per action kind ("drift corrections by kind").
ACTION_KINDS: Mapping[type, str] = {
    FailPod: "pod_failed",
    DeletePod: "pod_deleted",
    RemoveFinalizer: "finalizer_removed",
    CancelJob: "job_cancelled",
    SetPodGroupPhase: "podgroup_phase",
    DisruptPodGroup: "podgroup_disrupted",
    DrainSlurmNode: "slurm_node_drained",
    ResumeSlurmNode: "slurm_node_resumed",
    TaintNode: "node_tainted",
    UntaintNode: "node_untainted",
    CordonNode: "node_cordoned",
    UncordonNode: "node_uncordoned",
    RegisterExternalNode: "external_node_registered",
    MarkExternalNode: "external_node_marked",
    JoinPartition: "external_node_joined_partition",
    SetNodeTopology: "external_node_topology_set",
    DeleteSlurmNode: "external_node_deleted",
    SetNodeCondition: "node_condition_set",
    RemoveNodeCondition: "node_condition_removed",
    NodeWarning: "node_warning",
    ReleaseClaim: "claim_released",
    DeleteClaim: "claim_deleted",
}


# --------------------------------------------------------------------------- pod helpers
# What the controller reads of a pod (the rest is dropped from its cache: at 30,000 pods
# the whole objects were most of its memory). Keys and the strings that repeat across
# pods (namespace, phase, label keys ...) are interned: one copy each, not one per pod.
_POD_META = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "labels",
    "finalizers",
    "deletionTimestamp",
    "ownerReferences",  # the controller's kind and uid only (a job's back-link names it)
    "deletionGracePeriodSeconds",
)
_POD_SPEC = ("nodeName", "resourceClaims", "schedulingGroup")
_POD_STATUS = ("phase", "resourceClaimStatuses", "extendedResourceClaimStatus")
_CONTAINER_STATUSES = ("initContainerStatuses", "containerStatuses")


def _pick(obj: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: interned(obj[k]) for k in keys if obj.get(k) is not None}


def slim_pod(pod: Mapping[str, Any]) -> KubeObject:
    """The parts of ``pod`` the controller's plans read (a Watcher's ``keep``): its
    identity, labels, finalizers, deletion, node, phase, claims and built-in PodGroup."""
    m = pod.get("metadata") or {}
    kept = _pick(m, _POD_META)
    refs = [
        {"kind": r.get("kind"), "uid": r.get("uid"), "controller": True}
        for r in kept.pop("ownerReferences", None) or ()
        if isinstance(r, Mapping) and r.get("controller")
    ]
    if refs:
        kept["ownerReferences"] = refs
    out: KubeObject = {"metadata": kept}
    spec, status = (
        _pick(pod.get("spec") or {}, _POD_SPEC),
        _pick(pod.get("status") or {}, _POD_STATUS),
    )
    # Of the containers, only which state each is in (running, waiting, terminated).
    for key in _CONTAINER_STATUSES:
        if cs := (pod.get("status") or {}).get(key):
            status[key] = [{"state": {interned(k): {} for k in c.get("state") or {}}} for c in cs]
    if spec:
        out["spec"] = spec
    if status:
        out["status"] = status
    return out


def pod_ns_name(pod: Mapping[str, Any]) -> tuple[str, str]:
    return kobj.namespace(pod), kobj.name(pod)


def pod_phase(pod: Mapping[str, Any]) -> str:
    return kobj.text(pod, "status", "phase") or "Pending"


def pod_terminal(pod: Mapping[str, Any]) -> bool:
    return pod_phase(pod) in TERMINAL_PHASES


def pod_deleting(pod: Mapping[str, Any]) -> bool:
    return bool(kobj.get(pod, "metadata", "deletionTimestamp"))


def pod_done(pod: Mapping[str, Any]) -> bool:
    """Its workload is over: terminal, or being deleted. Its containers may still be
    stopping (:func:`containers_stopped` says when they have)."""
    return pod_terminal(pod) or pod_deleting(pod)


def containers_stopped(pod: Mapping[str, Any]) -> bool:
    """Done (:func:`pod_done`), and no container of it runs any more, as the kubelet
    says (the allocation invariant: docs/controller.md):

    * never bound to a node (nothing ever ran it);
    * the kubelet's final DELETE (``deletionGracePeriodSeconds: 0`` on a deleted pod; a
      force delete says the same);
    * every container status ``terminated`` (with none, a terminal phase: nothing ran).

    A pod set ``Failed`` from outside while its containers run is not stopped until the
    kubelet writes their terminated states.
    """
    if not pod_done(pod):
        return False
    if not kobj.get(pod, "spec", "nodeName"):
        return True
    if pod_deleting(pod) and kobj.get(pod, "metadata", "deletionGracePeriodSeconds") == 0:
        return True
    states = [
        kobj.mapping(c, "state")
        for key in _CONTAINER_STATUSES
        for c in kobj.sequence(pod, "status", key)
    ]
    if states:
        return all("terminated" in s for s in states)
    return pod_terminal(pod)


def has_finalizer(pod: Mapping[str, Any]) -> bool:
    return FINALIZER in kobj.sequence(pod, "metadata", "finalizers")


def node_ready(node: Mapping[str, Any] | None) -> bool:
    if node is None:
        return False
    for c in kobj.sequence(node, "status", "conditions"):
        if kobj.get(c, "type") == "Ready":
            return kobj.text(c, "status") == "True"
    return False


def parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return _parse_k8s_time(value)
    except ValueError:
        return None
