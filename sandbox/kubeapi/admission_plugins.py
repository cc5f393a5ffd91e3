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
    requests = limits = 0
    guaranteed = True
    for c in spec.get("containers") or []:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        requests += len(req)
        limits += len(lim)
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


def pod_resize(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A write on ``pods/resize`` (in-place resize, 1.33+): the old pod with only its
    containers' ``resources`` and ``resizePolicy`` taken from ``new`` (by container name);
    every other change in the request is dropped, as the real server's resize strategy
    does. A resize that would change the pod's QoS class is refused."""
    merged = copy.deepcopy(old)
    asked = {c.get("name"): c for c in (new.get("spec") or {}).get("containers") or []}
    for c in (merged.get("spec") or {}).get("containers") or []:
        want = asked.get(c.get("name"))
        if want is None:
            continue
        for key in ("resources", "resizePolicy"):
            if key in want:
                c[key] = copy.deepcopy(want[key])
            else:
                c.pop(key, None)
    before, after = _qos(old.get("spec") or {}), _qos(merged.get("spec") or {})
    if before != after:
        raise invalid(
            "Pod",
            old["metadata"].get("name", ""),
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
