"""Pods reconciler (Kubernetes -> Slurm): a job whose pods are all done is cancelled, and
the pods' finalizers come off only once the job has ended.

* every pod of a job terminal (Succeeded/Failed), being deleted, or deleted -> cancel the
  Slurm job (its nodes are free again);
* a pod keeps the finalizer until Slurm says the job ended (or it is gone): no allocation
  outlives the pods unnoticed;
* a pod stuck Terminating on a node that is gone or NotReady for longer than
  ``stuckTerminatingGraceSeconds`` (counted from its deletionTimestamp) is force-deleted
  (grace 0) once its job has ended; nothing else would ever finish it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from bridge.translate import kobj
from controller.model import (
    Action,
    CancelJob,
    DeletePod,
    JobKind,
    JobView,
    KubeObject,
    RemoveFinalizer,
    has_finalizer,
    node_ready,
    parse_time,
    pod_deleting,
    pod_done,
    pod_ns_name,
)


def stuck_terminating(
    pod: KubeObject, nodes: Mapping[str, KubeObject], now: datetime, grace_seconds: float
) -> bool:
    """Terminating on a gone/NotReady node for longer than the grace period."""
    if not pod_deleting(pod):
        return False
    node = str((pod.get("spec") or {}).get("nodeName") or "")
    if not node:
        return False  # unbound: the API server removes it as soon as finalizers are gone
    if node_ready(nodes.get(node)):
        return False
    since = parse_time(kobj.get(pod, "metadata", "deletionTimestamp"))
    return since is not None and (now - since).total_seconds() >= grace_seconds


def plan(
    job_id: int,
    pods: Sequence[KubeObject],
    view: JobView,
    nodes: Mapping[str, KubeObject],
    now: datetime,
    stuck_grace_seconds: float,
) -> list[Action]:
    if view.kind is JobKind.UNKNOWN:
        return []
    if view.kind is JobKind.ACTIVE:
        if all(pod_done(p) for p in pods):
            why = "all pods deleted" if not pods else "all pods finished or deleted"
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
