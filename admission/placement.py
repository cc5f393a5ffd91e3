"""The Slurm-node guard, as a pure function: ``validate_placement(request, ctx)``.

A Slurm node runs only what Slurm allocated there. The bridge places its pods with the
Binding subresource, so a pod *created* with ``spec.nodeName`` is never the bridge's, and
only the bridge's pods (``schedulerName`` ours) need the managed-node toleration. So any
pod, whatever its scheduler and namespace, is refused when it

* is created with ``spec.nodeName`` naming a Slurm node (:func:`slurm_node_reason`: the
  managed-node taint, the external-node label, or the slurm-nodename label), or
* tolerates the bridge's managed-node taint (:func:`tolerates_managed_taint`: of that key
  and the bridge's scheduler name, or ``Exists``, or every key with ``operator: Exists``)
  and is not the bridge's, on CREATE, or on an UPDATE that changes the tolerations (a
  pod's tolerations may grow after it is created),

unless it is exempt: its namespace is in ``admission.nodeGuardExemptNamespaces``, its
creator (``request.userInfo.username``, which the API server sets: never the pod's own
text, unlike ownerReferences) is in ``admission.nodeGuardExemptUsernames`` (the DaemonSet
controller by default), or it is a node's mirror pod of a static pod on that very node
(``system:node:<nodeName>``; NodeRestriction lets a kubelet create no other).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from admission.policy import AdmissionContext, mapping_at, scheduler_name_of
from admission.review import AdmissionRequest, AdmissionResponse, allow, deny, object_name
from bridge import wellknown
from bridge.errors import InvalidInput
from bridge.translate.placement import tolerates
from bridge.workloads import POD

NODE_USER_PREFIX = "system:node:"


def slurm_node_reason(node: Mapping[str, Any] | None) -> str:
    """Why ``node`` (a Node object; None: it does not exist) is a Slurm node, or ``""``."""
    if not node:
        return ""
    meta = node.get("metadata") if isinstance(node.get("metadata"), Mapping) else {}
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    labels = labels if isinstance(labels, Mapping) else {}
    spec = node.get("spec") if isinstance(node.get("spec"), Mapping) else {}
    taints = spec.get("taints") if isinstance(spec, Mapping) else None
    for taint in taints if isinstance(taints, list) else ():
        if isinstance(taint, Mapping) and taint.get("key") == wellknown.MANAGED_NODE_TAINT:
            return f"it carries the taint {wellknown.MANAGED_NODE_TAINT}"
    for label in (wellknown.LABEL_EXTERNAL_NODE, wellknown.LABEL_SLURM_NODENAME):
        if label in labels:
            return f"it is labelled {label}"
    return ""


def tolerates_managed_taint(tol: Mapping[str, Any], scheduler_name: str) -> bool:
    """``tol`` tolerates this bridge's managed-node taint (``<key>=<scheduler_name>:
    NoExecute``), by Kubernetes' rule (:func:`bridge.translate.placement.tolerates`).
    Another bridge's toleration (another scheduler name) is that bridge's business."""
    return tolerates(
        (tol,),
        {"key": wellknown.MANAGED_NODE_TAINT, "value": scheduler_name, "effect": "NoExecute"},
    )


def _tolerating(spec: Mapping[str, Any], scheduler_name: str) -> list[int]:
    tols = spec.get("tolerations")
    return [
        i
        for i, t in enumerate(tols if isinstance(tols, list) else ())
        if isinstance(t, Mapping) and tolerates_managed_taint(t, scheduler_name)
    ]


def node_to_look_up(req: AdmissionRequest, ctx: AdmissionContext) -> str | None:
    """The node whose kind :func:`validate_placement` needs (``ctx.slurm_nodes``): the
    ``spec.nodeName`` of a pod being created that is not exempt, else None."""
    if not _is_pod_write(req) or req.operation != "CREATE" or _exempt(req, ctx):
        return None
    node = mapping_at(req.object or {}, "spec", []).get("nodeName")
    return node if isinstance(node, str) and node else None


def _is_pod_write(req: AdmissionRequest) -> bool:
    return (
        POD.api.matches(req.kind.group, req.kind.kind)
        and req.sub_resource == ""
        and req.operation in ("CREATE", "UPDATE")
        and req.object is not None
    )


def _exempt(req: AdmissionRequest, ctx: AdmissionContext) -> bool:
    settings = ctx.config.admission
    user = req.user_info.username
    if req.namespace in settings.node_guard_exempt_namespaces:
        return True
    if user in settings.node_guard_exempt_usernames:
        return True
    node = mapping_at(req.object or {}, "spec", []).get("nodeName")
    return bool(node) and user == f"{NODE_USER_PREFIX}{node}"


def validate_placement(req: AdmissionRequest, ctx: AdmissionContext) -> AdmissionResponse:
    """The guard's verdict for one request. Never performs I/O: the kind of the node a new
    pod names comes in ``ctx.slurm_nodes`` (looked up by the server)."""
    if (
        not ctx.config.admission.node_guard
        or not _is_pod_write(req)
        or _exempt(req, ctx)
        or req.object is None
    ):
        return allow(req.uid)
    errors: list[InvalidInput] = []
    spec = mapping_at(req.object, "spec", errors)
    if errors:
        return deny(req.uid, object_name(req), errors)
    node = node_to_look_up(req, ctx)
    reason = ctx.slurm_nodes.get(node, "") if node else ""
    if node and reason:
        errors.append(
            InvalidInput(
                "spec.nodeName",
                f"{node!r} is a Slurm node ({reason}): only slurm-bridge places pods there, "
                "inside a Slurm job's allocation; remove spec.nodeName (docs/admission.md)",
            )
        )
    ours = scheduler_name_of(spec, "spec.schedulerName", []) == ctx.scheduler_name
    tolerating = _tolerating(spec, ctx.scheduler_name)
    old_spec = mapping_at(req.old_object or {}, "spec", [])
    changed = req.operation == "CREATE" or spec.get("tolerations") != old_spec.get("tolerations")
    if not ours and tolerating and changed:
        errors += [
            InvalidInput(
                f"spec.tolerations[{i}]",
                f"tolerates the taint {wellknown.MANAGED_NODE_TAINT} of Slurm nodes, which "
                f"only pods of schedulerName {ctx.scheduler_name} (placed by slurm-bridge "
                "inside a Slurm job's allocation) may; remove it (docs/admission.md)",
            )
            for i in tolerating
        ]
    return deny(req.uid, object_name(req), errors) if errors else allow(req.uid)
