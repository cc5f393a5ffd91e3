"""What kube-apiserver's defaulting and admission plugins add to new objects.

Pods: defaults (schedulerName, restartPolicy, ...), the DefaultTolerationSeconds plugin's
not-ready/unreachable tolerations, phase Pending and the ServiceAccount check. Nodes: the
``node.kubernetes.io/not-ready:NoSchedule`` taint. Jobs: selector and pod-template labels.
Leases: MicroTime format. Each function mutates the object in place or raises ApiError.
"""

from __future__ import annotations

import base64
import copy
import re
from typing import Any

from sandbox.kubeapi.errors import ApiError, invalid

NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
DEFAULT_TOLERATION_SECONDS = 300
DEFAULT_SCHEDULER = "default-scheduler"

_MICROTIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")


def _qos(spec: dict[str, Any]) -> str:
    """The pod's QoS class as kube-apiserver 1.36 computes it: from the pod-level
    ``resources`` when set, else from every container and init container; only CPU and
    memory count."""
    pod_level = spec.get("resources")
    if isinstance(pod_level, dict) and pod_level:
        sources = [pod_level]
    else:
        sources = [
            c.get("resources") or {}
            for f in ("containers", "initContainers")
            for c in spec.get(f) or []
        ]
    requests = limits = 0
    guaranteed = True
    for res in sources:
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        requests += sum(1 for r in ("cpu", "memory") if r in req)
        limits += sum(1 for r in ("cpu", "memory") if r in lim)
        for r in ("cpu", "memory"):
            if r not in lim or (r in req and req[r] != lim[r]):
                guaranteed = False
    if requests == 0 and limits == 0:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def validate_pod(pod: dict[str, Any]) -> None:
    name = pod["metadata"].get("name", "")
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        raise invalid("Pod", name, "spec", "Required value")
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise invalid("Pod", name, "spec.containers", "Required value")
    for i, c in enumerate(containers):
        if not isinstance(c, dict) or not c.get("name"):
            raise invalid("Pod", name, f"spec.containers[{i}].name", "Required value")
        if not c.get("image"):
            raise invalid("Pod", name, f"spec.containers[{i}].image", "Required value")


def default_pod(pod: dict[str, Any]) -> None:
    spec = pod["spec"]
    spec.setdefault("schedulerName", DEFAULT_SCHEDULER)
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault("priority", 0)
    sa = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
    spec["serviceAccountName"] = sa
    spec["serviceAccount"] = sa
    for c in (spec.get("initContainers") or []) + spec["containers"]:
        image = str(c.get("image", ""))
        tagged = ":" in image.rsplit("/", 1)[-1] and not image.endswith(":latest")
        c.setdefault("imagePullPolicy", "IfNotPresent" if tagged or "@" in image else "Always")
        c.setdefault("terminationMessagePath", "/dev/termination-log")
        c.setdefault("terminationMessagePolicy", "File")
        c.setdefault("resources", {})
    tolerations = spec.setdefault("tolerations", [])
    for key in (NOT_READY_TAINT, UNREACHABLE_TAINT):
        if not any(
            t.get("key") == key and t.get("effect") in ("NoExecute", "", None) for t in tolerations
        ):
            tolerations.append(
                {
                    "key": key,
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
                }
            )
    pod["status"] = {"phase": "Pending", "qosClass": _qos(spec)}


def default_node(node: dict[str, Any], *, ready: bool) -> None:
    """Admission taints new nodes not-ready; ``ready`` models a kubelet's first heartbeat."""
    spec = node.setdefault("spec", {})
    taints = [t for t in spec.get("taints") or [] if t.get("key") != NOT_READY_TAINT]
    if not ready:
        taints.append({"key": NOT_READY_TAINT, "effect": "NoSchedule"})
    _set_taints(spec, taints)


def _set_taints(spec: dict[str, Any], taints: list[dict[str, Any]]) -> None:
    if taints:
        spec["taints"] = taints
    else:
        spec.pop("taints", None)


def node_heartbeat(node: dict[str, Any], *, ready: bool, now: str) -> None:
    """The node-lifecycle controller's taints: none while heartbeats arrive; when they stop
    (Ready=Unknown) ``unreachable`` NoSchedule and NoExecute."""
    spec = node.setdefault("spec", {})
    taints = [
        t
        for t in spec.get("taints") or []
        if t.get("key") not in (NOT_READY_TAINT, UNREACHABLE_TAINT)
    ]
    if not ready:
        taints.append({"key": UNREACHABLE_TAINT, "effect": "NoSchedule", "timeAdded": now})
        taints.append({"key": UNREACHABLE_TAINT, "effect": "NoExecute", "timeAdded": now})
    _set_taints(spec, taints)


def default_secret(secret: dict[str, Any]) -> None:
    """type defaults to Opaque; stringData is folded into data (base64)."""
    secret.setdefault("type", "Opaque")
    string_data = secret.pop("stringData", None) or {}
    if string_data:
        data = secret.setdefault("data", {})
        for k, v in string_data.items():
            data[k] = base64.b64encode(str(v).encode()).decode()


def default_service(svc: dict[str, Any], cluster_ip: str) -> None:
    """type ClusterIP, a cluster IP, ports' protocol TCP and targetPort = port."""
    spec = svc.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec.get("clusterIP") != "None":
        spec.setdefault("clusterIP", cluster_ip)
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
    for p in spec.get("ports") or []:
        p.setdefault("protocol", "TCP")
        p.setdefault("targetPort", p.get("port"))
    svc["status"] = {"loadBalancer": {}}


def default_job(job: dict[str, Any]) -> None:
    uid = job["metadata"]["uid"]
    name = job["metadata"]["name"]
    spec = job.setdefault("spec", {})
    spec.setdefault("parallelism", 1)
    if spec.get("completionMode") != "Indexed":
        spec.setdefault("completions", 1)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("suspend", False)
    labels = {
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": name,
        "controller-uid": uid,
        "job-name": name,
    }
    if not spec.get("manualSelector"):
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        tmeta = spec.setdefault("template", {}).setdefault("metadata", {})
        tmeta.setdefault("labels", {}).update(labels)
    job["status"] = {}


def validate_lease(lease: dict[str, Any]) -> None:
    """MicroTime fields must be RFC 3339 with exactly 6 fractional digits and ``Z``:
    the real server fails to decode anything else (400)."""
    spec = lease.get("spec") or {}
    for f in ("acquireTime", "renewTime"):
        v = spec.get(f)
        if v is not None and (not isinstance(v, str) or not _MICROTIME.match(v)):
            raise ApiError(
                400,
                "BadRequest",
                f'Lease in version "v1" cannot be handled as a Lease: spec.{f}: '
                f'parsing time {v!r} as "2006-01-02T15:04:05.000000Z07:00": cannot parse',
            )


_DEFAULTED_POD_SPEC = (
    "schedulerName",
    "restartPolicy",
    "terminationGracePeriodSeconds",
    "dnsPolicy",
    "securityContext",
    "enableServiceLinks",
    "preemptionPolicy",
    "priority",
    "serviceAccountName",
    "serviceAccount",
    "tolerations",
)
_DEFAULTED_CONTAINER = (
    "imagePullPolicy",
    "terminationMessagePath",
    "terminationMessagePolicy",
    "resources",
)

# pod spec fields an update may change (everything else is immutable on a real server)
_MUTABLE_POD_SPEC = ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds")


_RESIZABLE = ("cpu", "memory")


def _other_resources(res: Any) -> dict[str, Any]:
    """``res`` (a ResourceRequirements) without its CPU and memory: what a resize may not
    change."""
    res = res if isinstance(res, dict) else {}
    out = {k: v for k, v in res.items() if k not in ("requests", "limits")}
    for k in ("requests", "limits"):
        rest = {r: q for r, q in (res.get(k) or {}).items() if r not in _RESIZABLE}
        if rest:
            out[k] = rest
    return out


def pod_resize(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A write on ``pods/resize`` (in-place resize, GA in 1.35), as kube-apiserver 1.36's
    resize strategy and validation do it: the old pod with only these taken from ``new``
    (containers by name): the containers' and init containers' ``resources`` and
    ``resizePolicy``, and the pod-level ``resources`` (beta in 1.36, on by default);
    every other change in the request is dropped. Refused, as the real server words it:
    an init container's resources unless it is a sidecar (``restartPolicy: Always``), a
    resource other than CPU and memory, and a change of the pod's QoS class."""
    merged = copy.deepcopy(old)
    spec, asked_spec = merged.get("spec") or {}, new.get("spec") or {}
    name = old["metadata"].get("name", "")
    forbidden: list[str] = []
    for field in ("containers", "initContainers"):
        asked = {c.get("name"): c for c in asked_spec.get(field) or []}
        for c in spec.get(field) or []:
            want = asked.get(c.get("name"))
            if want is None:
                continue
            before = copy.deepcopy(c.get("resources"))
            for key in ("resources", "resizePolicy"):
                if key in want:
                    c[key] = copy.deepcopy(want[key])
                else:
                    c.pop(key, None)
            if c.get("resources") == before:
                continue
            if field == "initContainers" and c.get("restartPolicy") != "Always":
                forbidden.append("resources for non-sidecar init containers are immutable")
            elif _other_resources(c.get("resources")) != _other_resources(before):
                forbidden.append("only cpu and memory resources are mutable")
    before_pod = copy.deepcopy(spec.get("resources"))
    if "resources" in asked_spec:
        spec["resources"] = copy.deepcopy(asked_spec["resources"])
    else:
        spec.pop("resources", None)
    if _other_resources(spec.get("resources")) != _other_resources(before_pod):
        forbidden.append("only cpu and memory resources are mutable")
    if forbidden:
        raise invalid("Pod", name, "spec", f"Forbidden: {forbidden[0]}")
    before, after = _qos(old.get("spec") or {}), _qos(spec)
    if before != after:
        raise invalid(
            "Pod",
            name,
            "spec",
            f'Invalid value: "{after}": Pod QOS Class may not change as a result of resizing',
        )
    return merged


def check_pod_update(old: dict[str, Any], new: dict[str, Any]) -> None:
    """Pod spec is immutable except images, tolerations (additions), scheduling gates
    (removal) and a few scalars, like on a real server."""

    def strip(spec: dict[str, Any]) -> dict[str, Any]:
        s = {k: v for k, v in spec.items() if k not in _MUTABLE_POD_SPEC}
        s.pop("schedulingGates", None)
        for f in ("containers", "initContainers"):
            s[f] = [{k: v for k, v in c.items() if k != "image"} for c in s.get(f) or []]
        return s

    o, n = old.get("spec") or {}, new.get("spec") or {}
    # the real server defaults the incoming object first: omitted defaulted fields are kept
    for key in _DEFAULTED_POD_SPEC:
        if key in o and key not in n:
            n[key] = o[key]
    for f in ("containers", "initContainers"):
        olds = {c.get("name"): c for c in o.get(f) or []}
        for c in n.get(f) or []:
            for key in _DEFAULTED_CONTAINER:
                if key not in c and key in olds.get(c.get("name"), {}):
                    c[key] = olds[c["name"]][key]
    name = new["metadata"].get("name", "")
    if strip(o) != strip(n):
        raise invalid(
            "Pod",
            name,
            "spec",
            "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
            "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
            "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds`",
        )
    old_gates = [g.get("name") for g in o.get("schedulingGates") or []]
    new_gates = [g.get("name") for g in n.get("schedulingGates") or []]
    if any(g not in old_gates for g in new_gates):
        raise invalid("Pod", name, "spec.schedulingGates", "Forbidden: only deletion is allowed")
    if o.get("nodeName") != n.get("nodeName"):
        raise invalid("Pod", name, "spec.nodeName", "Forbidden: field is immutable")
