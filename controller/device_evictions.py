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

from bridge.translate import kobj
from bridge.translate.device_taints import (
    EVICTION_REASON,
    NO_EXECUTE,
    describe,
    device_taints,
    eviction,
    rule_taints,
)
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


def request_tolerations(claim: Mapping[str, Any], request: str) -> Sequence[Any]:
    """The tolerations of the claim's request ``request`` (``req`` or, for a
    ``firstAvailable`` choice, ``req/sub``)."""
    main, _, sub = request.partition("/")
    for r in kobj.sequence(claim, "spec", "devices", "requests"):
        if kobj.text(r, "name") != main:
            continue
        if not sub:
            return kobj.sequence(r, "exactly", "tolerations")
        for choice in kobj.sequence(r, "firstAvailable"):
            if kobj.text(choice, "name") == sub:
                return kobj.sequence(choice, "tolerations")
    return ()


def _device_taints(
    slices: Sequence[Mapping[str, Any]],
    rules: Sequence[Mapping[str, Any]],
    driver: str,
    pool: str,
    device: str,
) -> list[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    for s in slices:
        if kobj.text(s, "spec", "driver") != driver or kobj.text(s, "spec", "pool", "name") != pool:
            continue
        for d in kobj.sequence(s, "spec", "devices"):
            if kobj.text(d, "name") == device:
                out += device_taints(d)
    return out + rule_taints(rules, driver, pool, device)


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
            claim = claims.get((ns, name))
            results = kobj.sequence(claim, "status", "allocation", "devices", "results")
            for r in results:
                driver, pool = kobj.text(r, "driver"), kobj.text(r, "pool")
                device, request = kobj.text(r, "device"), kobj.text(r, "request")
                taints = _device_taints(slices.get(node, ()), rules, driver, pool, device)
                ev = eviction(taints, request_tolerations(claim or {}, request), now)
                if ev.due is not None and (out.due is None or ev.due < out.due):
                    out.due = ev.due
                if ev.now and not why:
                    why = (
                        f"device {driver}/{pool}/{device} of ResourceClaim {name} is tainted "
                        f"{describe(ev.now[0])}, which its request {request!r} does not "
                        f"tolerate: the pod is evicted; Slurm job {job_id} ends once its pods "
                        "have stopped"
                    )
        if why:
            out.actions.append(DeletePod(ns, kobj.name(pod), EVICTION_REASON, why, disruption=True))
    return out
