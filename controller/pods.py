"""Pods reconciler (Kubernetes -> Slurm): a job whose pods have all stopped is cancelled,
and the pods' finalizers come off only once the job has ended.

* every pod of a job *released* -> cancel the Slurm job (its nodes are free again). A pod
  is released when its containers have stopped (:func:`~controller.model.containers_stopped`:
  the kubelet's terminal status, every container terminated, or its final delete), when it
  is gone, or when no kubelet will ever say so: Terminating on a node that is gone or
  NotReady for ``stuckTerminatingGraceSeconds`` past its ``deletionTimestamp`` (which is
  the delete request plus the pod's grace period), or terminal on a node that is gone. A
  pod being deleted keeps its job while its containers run (the allocation invariant,
  docs/controller.md); a gang's job ends when all of its pods have stopped;
* a pod keeps the finalizer until Slurm says the job ended (or it is gone): no allocation
  outlives the pods unnoticed;
* a pod stuck Terminating on a node that is gone or NotReady for longer than
  ``stuckTerminatingGraceSeconds`` (counted from its deletionTimestamp) is force-deleted
  (grace 0) once its job has ended; nothing else would ever finish it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from bridge.translate import kobj
from controller.model import (
    Action,
    CancelJob,
    DeletePod,
    JobKind,
    KubeObject,
    RemoveFinalizer,
    SlurmJobStatus,
    containers_stopped,
    has_finalizer,
    node_ready,
    parse_time,
    pod_deleting,
    pod_done,
    pod_ns_name,
    pod_terminal,
)


def stuck_terminating(
    pod: KubeObject, nodes: Mapping[str, KubeObject], now: datetime, grace_seconds: float
) -> bool:
    """Terminating on a gone/NotReady node for longer than the grace period."""
    if not pod_deleting(pod):
        return False
    node = kobj.text(pod, "spec", "nodeName")
    if not node:
        return False  # unbound: the API server removes it as soon as finalizers are gone
    if node_ready(nodes.get(node)):
        return False
    since = parse_time(kobj.get(pod, "metadata", "deletionTimestamp"))
    return since is not None and (now - since).total_seconds() >= grace_seconds


def released(
    pod: KubeObject, nodes: Mapping[str, KubeObject], now: datetime, grace_seconds: float
) -> bool:
    """No longer holds its Slurm allocation (see the module docstring)."""
    if containers_stopped(pod) or stuck_terminating(pod, nodes, now, grace_seconds):
        return True
    return (
        pod_terminal(pod) and kobj.text(pod, "spec", "nodeName") not in nodes
    )  # PodGC's case: node deleted


def release_due(
    pod: KubeObject, nodes: Mapping[str, KubeObject], grace_seconds: float
) -> datetime | None:
    """When a Terminating pod whose containers still run, on a node that is gone or
    NotReady, will count as stuck (a timer for the controller); None when not such a pod
    (a node that turns NotReady later requeues its pods' jobs)."""
    if (
        not pod_deleting(pod)
        or containers_stopped(pod)
        or node_ready(nodes.get(kobj.text(pod, "spec", "nodeName")))
    ):
        return None
    since = parse_time(kobj.get(pod, "metadata", "deletionTimestamp"))
    return None if since is None else since + timedelta(seconds=grace_seconds)


def plan(
    job_id: int,
    pods: Sequence[KubeObject],
    view: SlurmJobStatus,
    nodes: Mapping[str, KubeObject],
    now: datetime,
    stuck_grace_seconds: float,
) -> list[Action]:
    if view.kind is JobKind.UNKNOWN:
        return []
    if view.kind is JobKind.ACTIVE:
        if all(released(p, nodes, now, stuck_grace_seconds) for p in pods):
            why = "all pods deleted" if not pods else "all pods stopped"
            return [CancelJob(job_id, why)]
        return []
    actions: list[Action] = []
    for pod in pods:
        ns, name = pod_ns_name(pod)
        if has_finalizer(pod) and pod_done(pod):
            actions.append(RemoveFinalizer(ns, name))
        if stuck_terminating(pod, nodes, now, stuck_grace_seconds):
            actions.append(
                DeletePod(
                    ns,
                    name,
                    "StuckTerminating",
                    f"node {pod['spec']['nodeName']} is gone or NotReady; "
                    f"Slurm job {job_id} has ended",
                    grace_period_seconds=0,
                )
            )
    return actions
