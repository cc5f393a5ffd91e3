"""A pod's Dynamic Resource Allocation requests, in Slurm's terms (pure).

Three forms are understood:

- the extended-resource form: a container asks for ``deviceclass.resource.kubernetes.io/
  <class>: N``, or for the ``spec.extendedResourceName`` of a DeviceClass;
- user-authored claims: ``spec.resourceClaims[]`` naming a ResourceClaim
  (``resourceClaimName``) or a ResourceClaimTemplate (``resourceClaimTemplateName``), whose
  requests name a DeviceClass.

The class ``dra.cpu`` (the DRA CPU driver) means CPUs; any other class needs a Slurm GRES
name in ``scheduler.deviceClassGres`` (``{gpu.nvidia.com: gpu}`` by default), unless it
picks MIG slices. Whatever Slurm cannot be asked for (``firstAvailable``,
``allocationMode: All``, constraints, admin access, capacity requests, an unknown class)
is refused with the claim, the request and the reason named.

**MIG slices by DeviceClass and CEL** (:func:`device_kind`): a request with CEL selectors,
or naming a class that is not in ``scheduler.deviceClassGres`` (NVIDIA's
``mig.nvidia.com``, a per-profile class, a class with ``extendedResourceName``), is
resolved against the devices the cluster's ResourceSlices publish: the class's and the
request's selectors (:mod:`bridge.translate.selectors`) must match devices of ONE kind:
MIG slices of one ``profile`` (Slurm gets the typed GRES the config's ``gresMapping``
gives ``nvidia.com/mig-<profile>``, ``gpu:1g.10gb``), or whole GPUs (the class's
``deviceClassGres``). Selectors matching several profiles, or slices and whole GPUs, or
nothing, are refused naming the field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from bridge.config import MIG_RESOURCE_PREFIX
from bridge.errors import InvalidInput
from bridge.translate import kobj
from bridge.translate.quantity import whole_count
from bridge.translate.selectors import (
    Budget,
    OverBudget,
    Selector,
    Selectors,
    compile_selectors,
    costliest,
    device_variable,
    matches,
    over_budget_reason,
)

DRA_CPU = "dra.cpu"
EXTENDED_PREFIX = "deviceclass.resource.kubernetes.io/"
# annotation of the claim the scheduler generates for the extended-resource form
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"

_DRIVER_SELECTOR = re.compile(r"""device\.driver\s*==\s*["']([^"']+)["']""")


@dataclass(frozen=True)
class DeviceRequest:
    """One request the bridge must allocate devices for.

    ``claim`` is the pod's claim entry (``spec.resourceClaims[].name``), None for the
    extended-resource form (one generated claim per pod, one request per container and
    resource: ``container-<i>-request-<j>``, ``i`` counting init containers first)."""

    claim: str | None
    request: str
    device_class: str
    driver: str
    gres: str | None  # Slurm GRES name; None: CPUs (dra.cpu)
    count: int
    container: str = ""
    resource: str = ""
    profile: str | None = None  # a MIG profile: only slices of it (gres is its typed GRES)
    # the DeviceClass's and the request's CEL selectors: every device given passes them
    selectors: tuple[Selector, ...] = field(default=(), compare=False)
    # the request's device tolerations (KEP-5055): a device tainted NoSchedule/NoExecute
    # is given only when they tolerate the taint (bridge.devices.taints)
    tolerations: tuple[Mapping[str, Any], ...] = field(default=(), compare=False)

    @property
    def is_cpu(self) -> bool:
        return self.gres is None


@dataclass(frozen=True)
class DraInputs:
    """What the translation reads besides the pod: DeviceClasses by name, the pod
    namespace's ResourceClaims and ResourceClaimTemplates by name, and the config map."""

    classes: Mapping[str, kobj.Obj] = field(default_factory=dict)
    claims: Mapping[str, kobj.Obj] = field(default_factory=dict)
    templates: Mapping[str, kobj.Obj] = field(default_factory=dict)
    device_class_gres: Mapping[str, str] = field(default_factory=dict)
    # extended resource -> GRES (the config's gresMapping with its defaults): a MIG
    # profile's typed GRES is that of nvidia.com/mig-<profile>
    gres_mapping: Mapping[str, str] = field(default_factory=dict)
    # the cluster's ResourceSlices: what a class's and a request's selectors can match
    slices: Sequence[kobj.Obj] = ()
    # (class, request selector sources) -> what they resolved to, for these classes and
    # slices (the caller keeps it while they do not change); None: resolve every time
    kinds: MutableMapping[tuple[str, tuple[str, ...]], DeviceKind] | None = field(
        default=None, compare=False
    )
    # what matching devices may still cost for this group's requests (CEL cost units)
    budget: Budget = field(default_factory=Budget, compare=False)
    # (slice name, resourceVersion, driver) -> its devices as selectors see them, kept by
    # the caller across groups (a slice is read once per version); None: built each time
    devices: MutableMapping[tuple[str, str, str], tuple[dict[str, Any], ...]] | None = field(
        default=None, compare=False
    )

    def mig_gres(self) -> dict[str, str]:
        """MIG profile -> its typed GRES."""
        return mig_gres(self.gres_mapping)


def mig_gres(gres_mapping: Mapping[str, str]) -> dict[str, str]:
    """MIG profile -> its typed GRES, from the config's ``gresMapping``
    (``nvidia.com/mig-1g.10gb: gpu:1g.10gb`` -> ``1g.10gb: gpu:1g.10gb``)."""
    return {
        r.removeprefix(MIG_RESOURCE_PREFIX): g
        for r, g in gres_mapping.items()
        if r.startswith(MIG_RESOURCE_PREFIX)
    }


@dataclass(frozen=True)
class PodDevices:
    """A pod's device requests; ``cpus`` and ``gres`` are what Slurm must allocate."""

    requests: tuple[DeviceRequest, ...] = ()

    @property
    def cpus(self) -> int:
        return sum(r.count for r in self.requests if r.is_cpu)

    @property
    def gres(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.requests:
            if r.gres is not None:
                out[r.gres] = out.get(r.gres, 0) + r.count
        return out

    @property
    def extended(self) -> tuple[DeviceRequest, ...]:
        return tuple(r for r in self.requests if r.claim is None)

    def of_claim(self, claim: str) -> tuple[DeviceRequest, ...]:
        return tuple(r for r in self.requests if r.claim == claim)


def class_driver(name: str, device_class: kobj.Obj | None) -> str:
    """The driver a DeviceClass selects (its CEL ``device.driver == "..."``), else the
    class's own name (``gpu.nvidia.com`` and ``dra.cpu`` name their drivers)."""
    for sel in kobj.sequence(device_class, "spec", "selectors"):
        m = _DRIVER_SELECTOR.search(kobj.text(sel, "cel", "expression"))
        if m:
            return m.group(1)
    return name


def _no_gres(cls: str) -> str:
    return f"DeviceClass {cls!r} has no Slurm GRES: add it to scheduler.deviceClassGres"


@dataclass(frozen=True)
class DeviceKind:
    """What a request asks Slurm for: the GRES, the MIG profile (None: whole devices),
    and the selectors every device given must pass. ``cost``: what matching the devices
    cost (CEL cost units); ``refused``: why the request is refused (after its name), or
    ``over``: the selector being evaluated when a budget of ``cost`` ran out."""

    gres: str | None
    profile: str | None
    selectors: tuple[Selector, ...]
    cost: int = 0
    refused: str = ""
    over: int | None = None


def device_kind(
    cls: str,
    request_selectors: Sequence[Any],
    where: str,
    named: str,
    inputs: DraInputs,
    obj: str,
    request_path: str = "",
) -> DeviceKind:
    """The GRES of a request of class ``cls`` (see the module docstring); InvalidInput at
    ``where`` naming ``named`` and the reason."""
    class_obj = inputs.classes.get(cls)
    prefix = f"{named}: " if named else ""
    if cls == DRA_CPU:
        if request_selectors:
            raise InvalidInput(where, f"{prefix}CEL selectors cannot be expressed to Slurm", obj)
        return DeviceKind(None, None, ())
    selectors = Selectors(
        compile_selectors(
            kobj.sequence(class_obj, "spec", "selectors"),
            where,
            f"{prefix}DeviceClass {cls!r} spec.selectors",
            obj,
        )
        + compile_selectors(
            request_selectors, where, f"{prefix}{request_path}.selectors", obj, inputs.budget
        )
    )
    configured = inputs.device_class_gres.get(cls)
    by_gres = {g: p for p, g in inputs.mig_gres().items()}
    if configured is not None and not request_selectors:
        return DeviceKind(configured, by_gres.get(configured), selectors)
    key = (cls, tuple(kobj.text(sel, "cel", "expression") for sel in request_selectors))
    kind = inputs.kinds.get(key) if inputs.kinds is not None else None
    left = inputs.budget.left
    if kind is None or (kind.over is not None and kind.cost < left):
        # not known, or known to cost more than less than this group has left: matched
        # up to what the group can pay (no more: the loop's time is the group's)
        kind = _resolve(cls, class_obj, selectors, configured, inputs, left)
        if inputs.kinds is not None:
            inputs.kinds[key] = kind
    try:
        if kind.over is not None:  # costs more than kind.cost >= what the group has left
            raise OverBudget(kind.over)
        inputs.budget.charge(kind.cost, costliest(selectors))
    except OverBudget as e:
        raise InvalidInput(where, over_budget_reason(selectors[e.selector].field), obj) from e
    if kind.refused:
        raise InvalidInput(where, prefix + kind.refused, obj)
    return replace(kind, selectors=selectors)


def _resolve(
    cls: str,
    class_obj: kobj.Obj | None,
    selectors: Selectors,
    configured: str | None,
    inputs: DraInputs,
    limit: int,
) -> DeviceKind:
    """What the devices ``selectors`` match in the cluster's slices ask Slurm for (a
    refused kind says why), matched under a budget of its own of ``limit``: the result
    depends on the selectors and slices alone (``over``: they cost more than ``limit``),
    so it may be kept and charged to every group using it."""
    budget = Budget(limit)
    driver = class_driver(cls, class_obj)
    profiles: set[str] = set()
    whole = 0
    heaviest = costliest(selectors)
    try:
        for s in sorted(inputs.slices, key=kobj.name):
            if kobj.text(s, "spec", "driver") != driver:
                continue
            for var in _variables(s, driver, inputs.devices):
                budget.charge(len(selectors.paths), heaviest)  # reading what they read
                if not matches(selectors, var, budget):
                    continue
                attrs = var["attributes"][driver]
                if attrs.get("type") == "mig" and isinstance(attrs.get("profile"), str):
                    profiles.add(attrs["profile"])
                else:
                    whole += 1
    except OverBudget as e:
        return DeviceKind(None, None, selectors, cost=limit, over=e.selector)
    kind = _kind(cls, driver, configured, profiles, whole, inputs)
    return replace(kind, selectors=selectors, cost=budget.spent)


def _variables(
    s: kobj.Obj,
    driver: str,
    memo: MutableMapping[tuple[str, str, str], tuple[dict[str, Any], ...]] | None,
) -> tuple[dict[str, Any], ...]:
    """The devices of slice ``s`` as selectors see them (kept in ``memo`` per version)."""
    version = kobj.text(s, "metadata", "resourceVersion")
    key = (kobj.name(s), version, driver)
    hit = memo.get(key) if memo is not None and version else None
    if hit is None:
        hit = tuple(device_variable(driver, d) for d in kobj.sequence(s, "spec", "devices"))
        if memo is not None and version:
            memo[key] = hit
    return hit


def _kind(
    cls: str,
    driver: str,
    configured: str | None,
    profiles: set[str],
    whole: int,
    inputs: DraInputs,
) -> DeviceKind:
    def refused(why: str) -> DeviceKind:
        return DeviceKind(None, None, (), refused=why)

    if not profiles and not whole:
        none = (
            f"no device of the cluster's ResourceSlices matches DeviceClass {cls!r} and the "
            "request's selectors"
        )
        if configured is None:
            none = f"{none}; {_no_gres(cls)}"
        return refused(none)
    if profiles and whole:
        return refused(
            "the selectors match both whole GPUs and MIG slices; Slurm is asked for "
            f'one GRES: select one kind (device.attributes["{driver}"].type == "mig")'
        )
    if len(profiles) > 1:
        return refused(
            "the selectors match MIG slices of several profiles "
            f"({', '.join(sorted(profiles))}); Slurm is asked for one typed GRES: select one "
            f'profile (device.attributes["{driver}"].profile == "...")'
        )
    if profiles:
        (profile,) = profiles
        gres = inputs.mig_gres().get(profile)
        if gres is None:
            return refused(
                f"MIG profile {profile!r} has no Slurm GRES: add "
                f"'{MIG_RESOURCE_PREFIX}{profile}: gpu:{profile}' to scheduler.gresMapping"
            )
        return DeviceKind(gres, profile, ())
    if configured is None:
        return refused(_no_gres(cls))
    return DeviceKind(configured, None, ())


def _extended_names(inputs: DraInputs) -> dict[str, str]:
    """Extended resource name -> DeviceClass (the classes' ``spec.extendedResourceName``)."""
    out = {}
    for name, obj in inputs.classes.items():
        ext = kobj.text(obj, "spec", "extendedResourceName")
        if ext:
            out[ext] = name
    return out


def _extended_requests(pod: kobj.Obj, inputs: DraInputs, obj: str) -> list[DeviceRequest]:
    by_name = _extended_names(inputs)
    out: list[DeviceRequest] = []
    containers = [("initContainers", c) for c in kobj.sequence(pod, "spec", "initContainers")]
    containers += [("containers", c) for c in kobj.sequence(pod, "spec", "containers")]
    for i, (kind, c) in enumerate(containers):
        pos = sum(1 for k, _ in containers[:i] if k == kind)
        amounts: dict[str, int] = {}
        for which in ("requests", "limits"):
            for resource, raw in kobj.mapping(c, "resources", which).items():
                cls = (
                    resource[len(EXTENDED_PREFIX) :]
                    if resource.startswith(EXTENDED_PREFIX)
                    else by_name.get(resource)
                )
                if cls is None:
                    continue
                path = f"spec.{kind}[{pos}].resources.{which}.{resource}"
                n = whole_count(str(raw), field=path, obj=obj)
                amounts[resource] = max(amounts.get(resource, 0), n)
        for j, (resource, n) in enumerate(sorted(amounts.items())):
            if n == 0:
                continue
            cls = (
                resource[len(EXTENDED_PREFIX) :]
                if resource.startswith(EXTENDED_PREFIX)
                else by_name[resource]
            )
            dk = device_kind(
                cls, (), f"spec.{kind}[{pos}].resources.requests.{resource}", "", inputs, obj
            )
            out.append(
                DeviceRequest(
                    claim=None,
                    request=f"container-{i}-request-{j}",
                    device_class=cls,
                    driver=class_driver(cls, inputs.classes.get(cls)),
                    gres=dk.gres,
                    count=n,
                    container=kobj.text(c, "name"),
                    resource=resource,
                    profile=dk.profile,
                    selectors=dk.selectors,
                )
            )
    return out


_UNSUPPORTED_EXACTLY = {
    "adminAccess": "admin access is not supported by the bridge",
    "capacity": "capacity requests cannot be expressed to Slurm",
}


def _cpu_capacity(exactly: Mapping[str, object], rnamed: str, where: str, obj: str) -> int:
    """The CPUs a ``dra.cpu`` request asks for as capacity (the DRA CPU driver's grouped
    mode: ``capacity.requests["dra.cpu/cpu"]``), 0 when it asks for none."""
    if exactly.get("deviceClassName") != DRA_CPU:
        return 0
    reqs = kobj.mapping(exactly, "capacity", "requests")
    if not reqs:
        return 0
    if set(reqs) != {f"{DRA_CPU}/cpu"}:
        raise InvalidInput(
            where, f"{rnamed}: only the capacity {DRA_CPU}/cpu can be expressed to Slurm", obj
        )
    return whole_count(str(reqs[f"{DRA_CPU}/cpu"]), field=where, obj=obj)


def _claim_requests(pod: kobj.Obj, inputs: DraInputs, obj: str) -> list[DeviceRequest]:
    out: list[DeviceRequest] = []
    for i, pc in enumerate(kobj.sequence(pod, "spec", "resourceClaims")):
        entry = kobj.text(pc, "name")
        where = f"spec.resourceClaims[{i}]"
        claim_name = kobj.text(pc, "resourceClaimName")
        template_name = kobj.text(pc, "resourceClaimTemplateName")
        if claim_name:
            source = f"ResourceClaim {claim_name!r}"
            found = inputs.claims.get(claim_name)
            spec = kobj.get(found, "spec")
        else:
            source = f"ResourceClaimTemplate {template_name!r}"
            found = inputs.templates.get(template_name)
            spec = kobj.get(found, "spec", "spec")
        if found is None:
            raise InvalidInput(where, f"{source} not found", obj)
        named = f'{source} (pod claim "{entry}")'
        if kobj.sequence(spec, "devices", "constraints"):
            raise InvalidInput(
                where, f"{named}: device constraints cannot be expressed to Slurm", obj
            )
        for k, r in enumerate(kobj.sequence(spec, "devices", "requests")):
            req = kobj.text(r, "name")
            rnamed = f'{named}, request "{req}"'
            if kobj.get(r, "firstAvailable") is not None:
                raise InvalidInput(
                    where,
                    f"{rnamed}: firstAvailable (alternatives) cannot be expressed to Slurm",
                    obj,
                )
            exactly = kobj.mapping(r, "exactly")
            cpu_capacity = _cpu_capacity(exactly, rnamed, where, obj)
            for key, why in _UNSUPPORTED_EXACTLY.items():
                if exactly.get(key) and not (key == "capacity" and cpu_capacity):
                    raise InvalidInput(where, f"{rnamed}: {why}", obj)
            mode = exactly.get("allocationMode") or "ExactCount"
            if mode != "ExactCount":
                raise InvalidInput(
                    where,
                    f"{rnamed}: allocationMode {mode} cannot be expressed to Slurm "
                    "(only ExactCount)",
                    obj,
                )
            cls = str(exactly.get("deviceClassName") or "")
            dk = device_kind(
                cls,
                kobj.sequence(exactly, "selectors"),
                where,
                rnamed,
                inputs,
                obj,
                f"spec.devices.requests[{k}].exactly",
            )
            count = exactly.get("count", 1)
            if not isinstance(count, int) or count < 1:
                raise InvalidInput(where, f"{rnamed}: count must be a positive integer", obj)
            if cpu_capacity:
                count = cpu_capacity  # grouped CPU mode: CPUs as consumable capacity
            out.append(
                DeviceRequest(
                    claim=entry,
                    request=req,
                    device_class=cls,
                    driver=class_driver(cls, inputs.classes.get(cls)),
                    gres=dk.gres,
                    count=count,
                    profile=dk.profile,
                    selectors=dk.selectors,
                    tolerations=tuple(
                        t for t in kobj.sequence(exactly, "tolerations") if isinstance(t, Mapping)
                    ),
                )
            )
    return out


def pod_devices(pod: kobj.Obj, inputs: DraInputs) -> PodDevices:
    """A pod's DRA requests; raises InvalidInput naming the claim, request and reason."""
    obj = kobj.describe(pod, "Pod")
    return PodDevices(
        tuple(_extended_requests(pod, inputs, obj) + _claim_requests(pod, inputs, obj))
    )
