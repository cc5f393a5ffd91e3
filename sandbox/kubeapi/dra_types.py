"""Dynamic Resource Allocation (``resource.k8s.io/v1``) in the sandbox.

Validation and defaulting of DeviceClass, ResourceSlice, ResourceClaim and
ResourceClaimTemplate as kube-apiserver 1.36 does them (the subset the bridge and its tests
touch: see docs/sandbox-kube-api.md), and of the pod fields ``spec.resourceClaims`` and
``containers[].resources.claims``. kube-controller-manager's resourceclaim controller is
:mod:`sandbox.controllers.resourceclaim`:

- a pod's ``spec.resourceClaims[]`` entry naming a ``resourceClaimTemplateName`` gets one
  ResourceClaim, generated from the template (``generateName: <pod>-<claim>-``, annotation
  ``resource.kubernetes.io/pod-claim-name``, owned by the pod as controller with
  ``blockOwnerDeletion``), and the pod's ``status.resourceClaimStatuses`` names it;
- a claim whose ``status.reservedFor`` names pods that are gone or done has them removed;
  a claim that so becomes reserved for nobody (or is being deleted) is deallocated
  (``status.allocation`` and the finalizer ``resource.kubernetes.io/delete-protection``
  removed); a generated claim (owned by a pod, including the scheduler's
  extended-resource claims) whose pod is done or gone is deleted. A claim allocated but
  never reserved is left alone (the scheduler writes allocation and reservedFor together).
"""

from __future__ import annotations

import re
from typing import Any

from sandbox.kubeapi.errors import ApiError, check_dns_label, check_max_items, invalid
from sandbox.kubeapi.identity import service_account
from sandbox.kubeapi.store import Obj

GROUP = "resource.k8s.io"
CLAIM_KEY = (GROUP, "resourceclaims")
TEMPLATE_KEY = (GROUP, "resourceclaimtemplates")
SLICE_KEY = (GROUP, "resourceslices")
CLASS_KEY = (GROUP, "deviceclasses")
TAINT_RULE_KEY = (GROUP, "devicetaintrules")

POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"
DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"
RESOURCECLAIM_CONTROLLER = service_account("kube-system", "resource-claim-controller")

ALLOCATION_RESULTS_MAX = 32  # resource.k8s.io/v1 AllocationResultsMaxSize
RESERVED_FOR_MAX = 256
REQUESTS_MAX = 32
DEVICES_PER_SLICE_MAX = 128
# KEP-4815 partitionable devices (pkg/apis/resource: ResourceSliceMax...)
DEVICES_WITH_COUNTERS_MAX = 64  # when any device consumes counters or has taints
COUNTER_SETS_MAX = 8
COUNTERS_PER_SET_MAX = 32
CONSUMPTIONS_PER_DEVICE_MAX = 2
COUNTERS_PER_CONSUMPTION_MAX = 32
ATTRIBUTES_AND_CAPACITIES_MAX = 32
# KEP-5055 device taints (GA in 1.37)
TAINTS_MAX = 16  # DeviceTaintsMaxLength
TOLERATIONS_MAX = 16  # DeviceTolerationsMaxLength
TAINT_EFFECTS = ("None", "NoSchedule", "NoExecute")
_QUALIFIED = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_QUANTITY = re.compile(r"^[+]?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+|[KMGTPE]i|[numkMGTPE])?$")


def _bad(kind: str, obj: Obj, field: str, reason: str) -> ApiError:
    return invalid(kind, str(obj["metadata"].get("name", "")), field, reason, GROUP)


def _label(kind: str, obj: Obj, field: str, value: Any) -> None:
    check_dns_label(kind, obj, field, value, GROUP)


def default_claim_spec(kind: str, obj: Obj, spec: Any, path: str) -> None:
    """Validate and default a ResourceClaimSpec in place (``spec`` of a claim, ``spec.spec``
    of a template): requests named, unique, each ``exactly`` (with a deviceClassName,
    ``allocationMode`` ExactCount by default, ``count`` 1) or ``firstAvailable``."""
    if spec is None:
        return
    if not isinstance(spec, dict):
        raise _bad(kind, obj, path, "Invalid value: must be an object")
    devices = spec.get("devices") or {}
    requests = devices.get("requests") or []
    if not isinstance(requests, list):
        raise _bad(kind, obj, f"{path}.devices.requests", "Invalid value: must be a list")
    if len(requests) > REQUESTS_MAX:
        raise _bad(
            kind,
            obj,
            f"{path}.devices.requests",
            f"Too many: {len(requests)}: must have at most {REQUESTS_MAX} items",
        )
    seen: set[str] = set()
    for i, r in enumerate(requests):
        where = f"{path}.devices.requests[{i}]"
        if not isinstance(r, dict):
            raise _bad(kind, obj, where, "Invalid value: must be an object")
        _label(kind, obj, f"{where}.name", r.get("name"))
        if r["name"] in seen:
            raise _bad(kind, obj, f"{where}.name", f'Duplicate value: "{r["name"]}"')
        seen.add(r["name"])
        exactly, first = r.get("exactly"), r.get("firstAvailable")
        if (exactly is None) == (first is None):
            raise _bad(
                kind, obj, where, "Required value: exactly one of `exactly` or `firstAvailable`"
            )
        for j, sub in enumerate([exactly] if exactly is not None else first or []):
            spath = f"{where}.exactly" if exactly is not None else f"{where}.firstAvailable[{j}]"
            if not isinstance(sub, dict) or not sub.get("deviceClassName"):
                raise _bad(kind, obj, f"{spath}.deviceClassName", "Required value")
            _tolerations(kind, obj, sub.get("tolerations"), f"{spath}.tolerations")
            mode = sub.setdefault("allocationMode", "ExactCount")
            if mode == "ExactCount":
                sub.setdefault("count", 1)
                if not isinstance(sub["count"], int) or sub["count"] < 1:
                    raise _bad(
                        kind,
                        obj,
                        f"{spath}.count",
                        f"Invalid value: {sub['count']}: must be greater than zero",
                    )
            elif mode == "All":
                if "count" in sub:
                    raise _bad(
                        kind,
                        obj,
                        f"{spath}.count",
                        'Invalid value: must not be specified when allocationMode is "All"',
                    )
            else:
                raise _bad(
                    kind,
                    obj,
                    f"{spath}.allocationMode",
                    f'Unsupported value: "{mode}": supported values: "All", "ExactCount"',
                )


def _taint_key(kind: str, obj: Obj, field: str, key: Any) -> None:
    if not isinstance(key, str) or not key:
        raise _bad(kind, obj, field, "Required value")
    if len(key) > 316 or not _QUALIFIED.match(key):
        raise _bad(kind, obj, field, f'Invalid value: "{key}": must be a qualified name')


def _label_value(kind: str, obj: Obj, field: str, value: Any) -> None:
    if not isinstance(value, str) or not _LABEL_VALUE.match(value):
        raise _bad(kind, obj, field, f'Invalid value: "{value}": must be a valid label value')


def _taint(kind: str, obj: Obj, t: Any, where: str, now: str) -> None:
    """A DeviceTaint: key (a qualified name), value (a label value), effect (None,
    NoSchedule, NoExecute); ``timeAdded`` set to now when not sent."""
    if not isinstance(t, dict):
        raise _bad(kind, obj, where, "Invalid value: must be an object")
    _taint_key(kind, obj, f"{where}.key", t.get("key"))
    _label_value(kind, obj, f"{where}.value", t.get("value", ""))
    effect = t.get("effect")
    if not effect:
        raise _bad(kind, obj, f"{where}.effect", "Required value")
    if effect not in TAINT_EFFECTS:
        supported = ", ".join(f'"{e}"' for e in TAINT_EFFECTS)
        reason = f'Unsupported value: "{effect}": supported values: {supported}'
        raise _bad(kind, obj, f"{where}.effect", reason)
    if now:
        t.setdefault("timeAdded", now)


def _taints(obj: Obj, d: Obj, where: str, now: str) -> None:
    taints = d.get("taints")
    if taints is None:
        return
    if not isinstance(taints, list):
        raise _bad("ResourceSlice", obj, f"{where}.taints", "Invalid value: must be a list")
    check_max_items("ResourceSlice", obj, f"{where}.taints", taints, TAINTS_MAX, GROUP)
    for i, t in enumerate(taints):
        _taint("ResourceSlice", obj, t, f"{where}.taints[{i}]", now)


def _tolerations(kind: str, obj: Obj, tolerations: Any, where: str) -> None:
    """A request's DeviceTolerations: at most 16; ``operator`` Exists or Equal (default
    Equal); an empty key only with Exists; Exists takes no value; ``effect`` empty, None,
    NoSchedule or NoExecute."""
    if tolerations is None:
        return
    if not isinstance(tolerations, list):
        raise _bad(kind, obj, where, "Invalid value: must be a list")
    check_max_items(kind, obj, where, tolerations, TOLERATIONS_MAX, GROUP)
    for i, t in enumerate(tolerations):
        at = f"{where}[{i}]"
        if not isinstance(t, dict):
            raise _bad(kind, obj, at, "Invalid value: must be an object")
        op = t.setdefault("operator", "Equal")
        if op not in ("Exists", "Equal"):
            reason = f'Unsupported value: "{op}": supported values: "Equal", "Exists"'
            raise _bad(kind, obj, f"{at}.operator", reason)
        key = t.get("key", "")
        if key:
            _taint_key(kind, obj, f"{at}.key", key)
        elif op != "Exists":
            reason = 'Invalid value: "Equal": value must be Exists when `key` is empty'
            raise _bad(kind, obj, f"{at}.operator", reason)
        if op == "Exists" and t.get("value"):
            reason = "Invalid value: \"\": value must be empty when `operator` is 'Exists'"
            raise _bad(kind, obj, f"{at}.operator", reason)
        _label_value(kind, obj, f"{at}.value", t.get("value", ""))
        effect = t.get("effect", "")
        if effect and effect not in TAINT_EFFECTS:
            supported = ", ".join(f'"{e}"' for e in TAINT_EFFECTS)
            reason = f'Unsupported value: "{effect}": supported values: {supported}'
            raise _bad(kind, obj, f"{at}.effect", reason)


def validate_taint_rule(obj: Obj, now: str = "") -> None:
    """A DeviceTaintRule (resource.k8s.io/v1, 1.37): ``spec.taint`` required;
    ``spec.deviceSelector`` of ``driver``, ``pool``, ``device`` (all optional: the empty
    selector matches every device); at most 8 status conditions."""
    kind = "DeviceTaintRule"
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise _bad(kind, obj, "spec", "Required value")
    if spec.get("taint") is None:
        raise _bad(kind, obj, "spec.taint", "Required value")
    _taint(kind, obj, spec["taint"], "spec.taint", now)
    sel = spec.get("deviceSelector")
    if sel is not None:
        if not isinstance(sel, dict):
            raise _bad(kind, obj, "spec.deviceSelector", "Invalid value: must be an object")
        unknown = sorted(set(sel) - {"driver", "pool", "device"})
        if unknown:
            raise _bad(kind, obj, f"spec.deviceSelector.{unknown[0]}", "Forbidden: unknown field")
        if sel.get("device") is not None:
            _label(kind, obj, "spec.deviceSelector.device", sel["device"])
    conditions = (obj.get("status") or {}).get("conditions") or []
    check_max_items(kind, obj, "status.conditions", conditions, 8, GROUP)


def admit_create(key: tuple[str, str], obj: Obj, now: str = "") -> None:
    """Defaulting and validation of a new ``resource.k8s.io`` object (status dropped);
    ``now`` stamps a taint's ``timeAdded``."""
    if key == TAINT_RULE_KEY:
        obj.pop("status", None)
        validate_taint_rule(obj, now)
    elif key == CLAIM_KEY:
        obj.pop("status", None)
        default_claim_spec("ResourceClaim", obj, obj.setdefault("spec", {}), "spec")
    elif key == TEMPLATE_KEY:
        inner = obj.setdefault("spec", {}).setdefault("spec", {})
        default_claim_spec("ResourceClaimTemplate", obj, inner, "spec.spec")
    elif key == SLICE_KEY:
        validate_slice(obj, now)
    elif key == CLASS_KEY:
        obj.setdefault("spec", {})


def validate_slice(obj: Obj, now: str = "") -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise _bad("ResourceSlice", obj, "spec", "Required value")
    if not spec.get("driver"):
        raise _bad("ResourceSlice", obj, "spec.driver", "Required value")
    pool = spec.get("pool") or {}
    if not pool.get("name"):
        raise _bad("ResourceSlice", obj, "spec.pool.name", "Required value")
    if not isinstance(pool.get("resourceSliceCount"), int) or pool["resourceSliceCount"] < 1:
        raise _bad(
            "ResourceSlice", obj, "spec.pool.resourceSliceCount", "Invalid value: must be >= 1"
        )
    pool.setdefault("generation", 0)
    where = [
        f for f in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection") if spec.get(f)
    ]
    if len(where) != 1:
        raise _bad(
            "ResourceSlice",
            obj,
            "spec",
            "Invalid value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
            "`perDeviceNodeSelection` is required",
        )
    if spec.get("sharedCounters") is not None and spec.get("devices") is not None:
        raise _bad(
            "ResourceSlice",
            obj,
            "spec",
            "Invalid value: only one of `sharedCounters` or `devices` is allowed",
        )
    devices = spec.get("devices") or []
    limit = DEVICES_PER_SLICE_MAX
    if any((d or {}).get("consumesCounters") or (d or {}).get("taints") for d in devices):
        limit = DEVICES_WITH_COUNTERS_MAX
    check_max_items("ResourceSlice", obj, "spec.devices", devices, limit, GROUP)
    names: set[str] = set()
    for i, d in enumerate(devices):
        _label("ResourceSlice", obj, f"spec.devices[{i}].name", (d or {}).get("name"))
        if d["name"] in names:
            raise _bad(
                "ResourceSlice", obj, f"spec.devices[{i}].name", f'Duplicate value: "{d["name"]}"'
            )
        names.add(d["name"])
        _validate_device(obj, d, f"spec.devices[{i}]")
        _taints(obj, d, f"spec.devices[{i}]", now)
    _validate_counter_sets(obj, spec.get("sharedCounters"))


def _counters(obj: Obj, counters: Any, where: str, most: int) -> None:
    """A map of counter name (DNS label) -> ``{value: <quantity>}``, non-empty."""
    if not isinstance(counters, dict) or not counters:
        raise _bad("ResourceSlice", obj, where, "Required value")
    if len(counters) > most:
        raise _bad(
            "ResourceSlice",
            obj,
            where,
            f"Too many: {len(counters)}: must have at most {most} items",
        )
    for name, c in counters.items():
        _label("ResourceSlice", obj, f"{where}[{name}]", name)
        value = (c or {}).get("value") if isinstance(c, dict) else None
        if not isinstance(value, str | int) or not _QUANTITY.match(str(value)):
            raise _bad(
                "ResourceSlice",
                obj,
                f"{where}[{name}].value",
                f'Invalid value: "{value}": quantities must match the regular expression '
                "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            )


def _counter_list(obj: Obj, items: Any, path: str, key: str, most: int, counters_most: int) -> None:
    """``sharedCounters`` (``key`` ``name``) or a device's ``consumesCounters`` (``key``
    ``counterSet``): a list of at most ``most``, each a unique DNS label under ``key`` with
    1 to ``counters_most`` counters."""
    if items is None:
        return
    if not isinstance(items, list):
        raise _bad("ResourceSlice", obj, path, "Invalid value: must be a list")
    if len(items) > most:
        raise _bad(
            "ResourceSlice", obj, path, f"Too many: {len(items)}: must have at most {most} items"
        )
    seen: set[str] = set()
    for i, item in enumerate(items):
        name = item.get(key) if isinstance(item, dict) else None
        _label("ResourceSlice", obj, f"{path}[{i}].{key}", name)
        if name in seen:
            raise _bad("ResourceSlice", obj, f"{path}[{i}].{key}", f'Duplicate value: "{name}"')
        seen.add(str(name))
        _counters(obj, item.get("counters"), f"{path}[{i}].counters", counters_most)


def _validate_counter_sets(obj: Obj, sets: Any) -> None:
    _counter_list(obj, sets, "spec.sharedCounters", "name", COUNTER_SETS_MAX, COUNTERS_PER_SET_MAX)


def _validate_device(obj: Obj, d: Obj, where: str) -> None:
    n = len(d.get("attributes") or {}) + len(d.get("capacity") or {})
    if n > ATTRIBUTES_AND_CAPACITIES_MAX:
        raise _bad(
            "ResourceSlice",
            obj,
            where,
            f"Invalid value: {n}: the total number of attributes and capacities must not "
            f"exceed {ATTRIBUTES_AND_CAPACITIES_MAX}",
        )
    _counter_list(
        obj,
        d.get("consumesCounters"),
        f"{where}.consumesCounters",
        "counterSet",
        CONSUMPTIONS_PER_DEVICE_MAX,
        COUNTERS_PER_CONSUMPTION_MAX,
    )


def check_update(key: tuple[str, str], old: Obj, new: Obj, subresource: str, now: str = "") -> None:
    """Immutable claim and template specs; claim status rules (allocation set once,
    reservedFor only on an allocated claim, at most 32 results / 256 consumers)."""
    if key == TAINT_RULE_KEY:
        validate_taint_rule(new, now)
        return
    if key == TEMPLATE_KEY:
        inner = new.setdefault("spec", {}).setdefault("spec", {})
        default_claim_spec("ResourceClaimTemplate", new, inner, "spec.spec")
    if key == TEMPLATE_KEY and old.get("spec") != new.get("spec"):
        raise _bad("ResourceClaimTemplate", new, "spec", "Invalid value: field is immutable")
    if key == SLICE_KEY:
        validate_slice(new, now)
    if key != CLAIM_KEY:
        return
    if subresource != "status":
        default_claim_spec("ResourceClaim", new, new.setdefault("spec", {}), "spec")
        if old.get("spec") != new.get("spec"):
            raise _bad("ResourceClaim", new, "spec", "Invalid value: field is immutable")
        return
    status = new.get("status") or {}
    old_alloc = (old.get("status") or {}).get("allocation")
    alloc = status.get("allocation")
    reserved = status.get("reservedFor") or []
    if old_alloc is not None and alloc is not None and alloc != old_alloc:
        raise _bad("ResourceClaim", new, "status.allocation", "Invalid value: field is immutable")
    if old_alloc is not None and alloc is None and reserved:
        raise _bad(
            "ResourceClaim",
            new,
            "status.allocation",
            "Forbidden: may not be cleared when `reservedFor` is not empty",
        )
    if reserved and alloc is None:
        raise _bad(
            "ResourceClaim",
            new,
            "status.reservedFor",
            "Forbidden: may not be specified when `allocated` is not set",
        )
    if len(reserved) > RESERVED_FOR_MAX:
        raise _bad(
            "ResourceClaim",
            new,
            "status.reservedFor",
            f"Too many: {len(reserved)}: must have at most {RESERVED_FOR_MAX} items",
        )
    if alloc is not None:
        results = (alloc.get("devices") or {}).get("results") or []
        if len(results) > ALLOCATION_RESULTS_MAX:
            raise _bad(
                "ResourceClaim",
                new,
                "status.allocation.devices.results",
                f"Too many: {len(results)}: must have at most {ALLOCATION_RESULTS_MAX} items",
            )
        names = {
            r.get("name")
            for r in ((new.get("spec") or {}).get("devices") or {}).get("requests") or []
        }
        for i, r in enumerate(results):
            if str(r.get("request", "")).split("/")[0] not in names:
                raise _bad(
                    "ResourceClaim",
                    new,
                    f"status.allocation.devices.results[{i}].request",
                    f'Invalid value: "{r.get("request")}": must be the name of a request in '
                    "the claim or the name of a request and a subrequest separated by '/'",
                )
            for f in ("driver", "pool", "device"):
                if not r.get(f):
                    raise _bad(
                        "ResourceClaim",
                        new,
                        f"status.allocation.devices.results[{i}].{f}",
                        "Required value",
                    )


def validate_pod_claims(pod: Obj) -> None:
    """``spec.resourceClaims`` (unique names, exactly one source) and the containers'
    ``resources.claims`` (each names a pod claim)."""
    name = str(pod["metadata"].get("name", ""))
    spec = pod["spec"]
    names: set[str] = set()
    for i, c in enumerate(spec.get("resourceClaims") or []):
        where = f"spec.resourceClaims[{i}]"
        if not isinstance(c, dict) or not c.get("name"):
            raise invalid("Pod", name, f"{where}.name", "Required value")
        if c["name"] in names:
            raise invalid("Pod", name, f"{where}.name", f'Duplicate value: "{c["name"]}"')
        names.add(c["name"])
        if bool(c.get("resourceClaimName")) == bool(c.get("resourceClaimTemplateName")):
            raise invalid(
                "Pod",
                name,
                where,
                "Invalid value: exactly one of `resourceClaimName` or "
                "`resourceClaimTemplateName` must be set",
            )
    for f in ("initContainers", "containers"):
        for i, ctr in enumerate(spec.get(f) or []):
            for j, ref in enumerate(((ctr or {}).get("resources") or {}).get("claims") or []):
                if (ref or {}).get("name") not in names:
                    raise invalid(
                        "Pod",
                        name,
                        f"spec.{f}[{i}].resources.claims[{j}].name",
                        f'Not found: "{(ref or {}).get("name")}": must be one of the pod\'s '
                        "spec.resourceClaims",
                    )


def validate_pod_status(pod: Obj) -> None:
    """``status.resourceClaimStatuses`` (each names a pod claim) and
    ``status.extendedResourceClaimStatus`` (a claim name and request mappings naming the
    pod's containers), as kube-apiserver validates a pods/status write."""
    name = str(pod["metadata"].get("name", ""))
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    claims = {c.get("name") for c in spec.get("resourceClaims") or []}
    for i, st in enumerate(status.get("resourceClaimStatuses") or []):
        if (st or {}).get("name") not in claims:
            raise invalid(
                "Pod",
                name,
                f"status.resourceClaimStatuses[{i}].name",
                f'Invalid value: "{(st or {}).get("name")}": must match the name of an entry '
                "in `spec.resourceClaims`",
            )
    ext = status.get("extendedResourceClaimStatus")
    if ext is None:
        return
    where = "status.extendedResourceClaimStatus"
    if not ext.get("resourceClaimName"):
        raise invalid("Pod", name, f"{where}.resourceClaimName", "Required value")
    mappings = ext.get("requestMappings") or []
    if not mappings:
        raise invalid("Pod", name, f"{where}.requestMappings", "Required value")
    containers = {
        c.get("name") for f in ("initContainers", "containers") for c in spec.get(f) or []
    }
    for i, m in enumerate(mappings):
        for f in ("containerName", "resourceName", "requestName"):
            if not (m or {}).get(f):
                raise invalid("Pod", name, f"{where}.requestMappings[{i}].{f}", "Required value")
        if m["containerName"] not in containers:
            raise invalid(
                "Pod",
                name,
                f"{where}.requestMappings[{i}].containerName",
                f'Invalid value: "{m["containerName"]}": must match the name of a container',
            )
