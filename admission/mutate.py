"""The mutating webhook, as a pure function: ``mutate(request, ctx) -> AdmissionResponse``.

On pod CREATE, for a managed pod (see :mod:`admission.policy`):

* ``spec.schedulerName`` ``default-scheduler`` (or empty) becomes the bridge's name;
* the toleration ``slinky.slurm.net/managed-node Equal <schedulerName> NoExecute`` is added
  unless the pod already tolerates that taint (so it may run on the bridge's tainted nodes;
  :func:`admission.placement.tolerates_managed_taint`);
* ``spec.nodeName`` is removed: only the bridge places managed pods.

Anything else (unmanaged pods, other kinds and operations) is allowed with no patch. The
patch is RFC 6902 JSONPatch; the server base64-encodes it (``patchType: JSONPatch``).
"""

from __future__ import annotations

from typing import Any

from admission import jsonpatch
from admission.placement import tolerates_managed_taint
from admission.policy import AdmissionContext, mapping_at, pod_managed, scheduler_name_of
from admission.review import AdmissionRequest, AdmissionResponse, allow, deny, object_name
from bridge import wellknown
from bridge.errors import InvalidInput
from bridge.workloads import POD


def managed_toleration(scheduler_name: str) -> dict[str, str]:
    """The toleration every managed pod carries (matches the bridge nodes' taint)."""
    return {
        "key": wellknown.MANAGED_NODE_TAINT,
        "operator": "Equal",
        "value": scheduler_name,
        "effect": "NoExecute",
    }


def _is_core_pod(req: AdmissionRequest) -> bool:
    return POD.api.matches(req.kind.group, req.kind.kind)


def mutate(req: AdmissionRequest, ctx: AdmissionContext) -> AdmissionResponse:
    """The mutating verdict for one request. Never performs I/O."""
    if not _is_core_pod(req) or req.operation != "CREATE":
        return allow(req.uid)
    pod = req.object
    if pod is None:
        return deny(req.uid, object_name(req), [InvalidInput("request.object", "missing")])
    errors: list[InvalidInput] = []
    spec = mapping_at(pod, "spec", errors)
    current = scheduler_name_of(spec, "spec.schedulerName", errors)
    raw_tols = spec.get("tolerations")
    tolerations: list[Any] = []
    if raw_tols is not None and not isinstance(raw_tols, list):
        errors.append(InvalidInput("spec.tolerations", "must be a list"))
    elif isinstance(raw_tols, list):
        tolerations = raw_tols
        for i, tol in enumerate(tolerations):
            if not isinstance(tol, dict):
                errors.append(InvalidInput(f"spec.tolerations[{i}]", "must be an object"))
    if errors:
        return deny(req.uid, object_name(req), errors)
    if not pod_managed(current, req.namespace, ctx):
        return allow(req.uid)

    ours = ctx.scheduler_name
    patch: list[dict[str, Any]] = []
    if not isinstance(pod.get("spec"), dict):
        patch.append(jsonpatch.add(jsonpatch.pointer("spec"), {}))
    if current != ours:
        path = jsonpatch.pointer("spec", "schedulerName")
        op = jsonpatch.replace if "schedulerName" in spec else jsonpatch.add
        patch.append(op(path, ours))
    if not any(tolerates_managed_taint(t, ours) for t in tolerations):
        if raw_tols is None:
            patch.append(jsonpatch.add(jsonpatch.pointer("spec", "tolerations"), []))
        end = jsonpatch.pointer("spec", "tolerations", "-")
        patch.append(jsonpatch.add(end, managed_toleration(ours)))
    if spec.get("nodeName"):
        patch.append(jsonpatch.remove(jsonpatch.pointer("spec", "nodeName")))
    return allow(req.uid, patch=patch)
