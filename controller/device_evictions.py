"""Device taint evictions (KEP-5055): a ``NoExecute`` taint on a device a pod's claim
holds ends the pod's hold, as a drained node does (pure).

A running pod of the bridge whose ResourceClaim is allocated a device tainted
``NoExecute`` (by its ResourceSlice or a DeviceTaintRule), which the claim's request does
not tolerate (or tolerates only for ``tolerationSeconds``, now run out), is evicted as
kube-controller-manager's device taint eviction controller does it: the condition
``DisruptionTarget`` (reason ``DeletionByDeviceTaintManager``), a Warning event, then the
delete with the pod's grace period. The kubelet stops its containers; once every pod of
the job has stopped the pods reconciler cancels the Slurm job (:mod:`controller.pods`),
and the claims reconciler gives the claims back (:mod:`controller.claims`). Where a
toleration still runs, :attr:`Evictions.due` says when to look again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bridge.devices.taints import (
    EVICTION_REASON,
    NO_EXECUTE,
    describe,
    device_taints,
    eviction,
    held_devices,
)
from bridge.translate import kobj
from controller.claims import pod_claims
from controller.model import Action, DeletePod, KubeObject, pod_deleting, pod_done


def noexecute_on(slices: Sequence[Mapping[str, Any]], rules: Sequence[Mapping[str, Any]]) -> bool:
    """Does any device of ``slices`` carry a NoExecute taint (its own or a rule's)? Cheap:
    only then are the claims of the node's pods read."""
    if any(kobj.text(r, "spec", "taint", "effect") == NO_EXECUTE for r in rules):
        return True
    return any(
        kobj.text(t, "effect") == NO_EXECUTE
        for s in slices
        for d in kobj.sequence(s, "spec", "devices")
        for t in device_taints(d)
    )


@dataclass
class Evictions:
    actions: list[Action] = field(default_factory=list)
    due: datetime | None = None  # when a toleration with tolerationSeconds runs out next


def plan(
    job_id: int,
    pods: Sequence[KubeObject],
    claims: Mapping[tuple[str, str], Mapping[str, Any]],
    slices: Mapping[str, Sequence[Mapping[str, Any]]],
    rules: Sequence[Mapping[str, Any]],
    now: datetime,
) -> Evictions:
    """The pods of ``job_id`` to evict for a NoExecute device taint. ``claims``: the
    pods' claims by (namespace, name); ``slices``: by node."""
    out = Evictions()
    for pod in pods:
        if pod_done(pod) or pod_deleting(pod):
            continue
        ns, node = kobj.namespace(pod), kobj.text(pod, "spec", "nodeName")
        why = ""
        for name in pod_claims(pod)[0]:
            claim = claims.get((ns, name)) or {}
            for held in held_devices(claim, slices.get(node, ()), rules):
                ev = eviction(held.taints, held.tolerations, now)
                if ev.due is not None and (out.due is None or ev.due < out.due):
                    out.due = ev.due
                if ev.now and not why:
                    why = (
                        f"device {held.device} of ResourceClaim {name} is tainted "
                        f"{describe(ev.now[0])}, which its request {held.request!r} does not "
                        f"tolerate: the pod is evicted; Slurm job {job_id} ends once its pods "
                        "have stopped"
                    )
        if why:
            out.actions.append(DeletePod(ns, kobj.name(pod), EVICTION_REASON, why, disruption=True))
    return out
