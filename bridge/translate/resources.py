"""What one pod needs, by Kubernetes' own pod-request rule, in Slurm's units.

Per resource, with each container counting the LARGER of its request and limit::

    app      = sum(app containers) + sum(sidecars: init containers with restartPolicy Always)
    init     = max over init containers i of (i + sidecars started before i)
               (a sidecar's own entry is itself + the sidecars before it)
    pod      = max(app, init) + spec.overhead

Pod-level ``spec.resources`` (Kubernetes 1.32+), when set for cpu or memory, replaces
the container sum for that resource. CPUs are rounded up to whole CPUs and memory up to
MiB, once, at the end. GPUs come from ``nvidia.com/gpu`` and ``amd.com/gpu``, MIG slices
from ``nvidia.com/mig-<profile>`` (typed GRES ``gpu:<profile>``), other devices from the
``scheduler.gresMapping`` extended resources; all must be whole numbers. An
``nvidia.com/mig-*`` name the table does not map is refused (:func:`unknown_device_problems`,
which the admission webhook calls too), never silently dropped: a pod asking for a slice
must not run without one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from bridge.config import MIG_RESOURCE_PREFIX
from bridge.errors import InvalidInput
from bridge.translate import kobj
from bridge.translate.quantity import MIB, ceil_int, parse_non_negative, whole_count

# What Slurm can count (uint32 CPUs and GRES, special values near the top; memory in
# MiB, far below the 2**63 of JSON integers): larger totals are InvalidInput, not a job.
MAX_CPUS = 2**31 - 1
MAX_MEMORY_MIB = 2**40  # 1 EiB
MAX_GRES = 2**31 - 1

# Extended resources that are always GPUs, whatever the configured mapping says.
BUILTIN_GRES = {"nvidia.com/gpu": "gpu", "amd.com/gpu": "gpu"}


@dataclass(frozen=True)
class PodResources:
    """One pod's needs: whole CPUs, MiB of memory, GRES counts by Slurm GRES name."""

    cpus: int
    memory_mib: int
    gres: Mapping[str, int] = field(default_factory=dict)


Amounts = dict[str, Decimal]


def gres_names_of(gres_mapping: Mapping[str, str]) -> dict[str, str]:
    """The table actually applied: ``gres_mapping`` (the config's defaults and entries,
    ``SchedulerSettings.gres_table()``), with ``nvidia.com/gpu``/``amd.com/gpu`` always GPUs:
    ``gpu``, or the typed ``gpu:<type>`` the config names (whole GPUs on nodes that also
    have MIG slices: untyped, Slurm may give a whole-GPU pod a slice)."""
    out = dict(gres_mapping)
    for resource, gres in BUILTIN_GRES.items():
        mapped = out.get(resource, gres)
        out[resource] = mapped if mapped.partition(":")[0] == gres else gres
    return out


def _unknown_device(resource: str, gres_names: Mapping[str, str]) -> str | None:
    """Why ``resource`` cannot be translated, or None (known, or not a device we own)."""
    if resource.startswith(MIG_RESOURCE_PREFIX) and resource not in gres_names:
        profile = resource.removeprefix(MIG_RESOURCE_PREFIX)
        return (
            f"MIG profile {profile!r} has no Slurm GRES: add "
            f"'{resource}: gpu:{profile}' to scheduler.gresMapping (and the typed GRES "
            "to the nodes in Slurm) or ask for a known profile"
        )
    return None


def _resource_field(where: str, kind: str, resource: str) -> str:
    return f"{where}.resources.{kind}[{resource}]"


def unknown_device_problems(pod: kobj.Obj, gres_mapping: Mapping[str, str]) -> list[InvalidInput]:
    """Every container resource the bridge would refuse by name (an unmapped MIG profile),
    each naming its field; the admission webhook's check, the same rule as translation."""
    gres_names = gres_names_of(gres_mapping)
    obj = kobj.describe(pod, "Pod")
    out: list[InvalidInput] = []
    for key in ("initContainers", "containers"):
        for i, c in enumerate(kobj.sequence(pod, "spec", key)):
            for kind in ("requests", "limits"):
                for resource in kobj.mapping(c, "resources", kind):
                    reason = _unknown_device(resource, gres_names)
                    if reason is not None:
                        field = _resource_field(f"spec.{key}[{i}]", kind, resource)
                        out.append(InvalidInput(field, reason, obj))
    return out


def _container_amounts(
    container: Any, where: str, obj: str, gres_names: Mapping[str, str]
) -> Amounts:
    out: Amounts = {}
    for kind in ("requests", "limits"):
        for resource, raw in kobj.mapping(container, "resources", kind).items():
            if resource not in ("cpu", "memory") and resource not in gres_names:
                reason = _unknown_device(resource, gres_names) if gres_names else None
                if reason is not None:
                    raise InvalidInput(_resource_field(where, kind, resource), reason, obj)
                continue
            path = f"{where}.resources.{kind}.{resource}"
            if not isinstance(raw, str | int | float):
                raw = "junk"
            value: Decimal
            if resource in gres_names:
                value = Decimal(whole_count(str(raw), field=path, obj=obj))
            else:
                value = parse_non_negative(str(raw), field=path, obj=obj)
            out[resource] = max(out.get(resource, Decimal(0)), value)
    return out


def _add(a: Amounts, b: Amounts) -> Amounts:
    return {k: a.get(k, Decimal(0)) + b.get(k, Decimal(0)) for k in a.keys() | b.keys()}


def _max(a: Amounts, b: Amounts) -> Amounts:
    return {k: max(a.get(k, Decimal(0)), b.get(k, Decimal(0))) for k in a.keys() | b.keys()}


def pod_amounts(pod: kobj.Obj, gres_names: Mapping[str, str]) -> Amounts:
    """Exact per-resource totals of one pod by the pod-request rule (before rounding)."""
    obj = kobj.describe(pod, "Pod")
    app: Amounts = {}
    for i, c in enumerate(kobj.sequence(pod, "spec", "containers")):
        app = _add(app, _container_amounts(c, f"spec.containers[{i}]", obj, gres_names))
    sidecars: Amounts = {}
    init_peak: Amounts = {}
    for i, c in enumerate(kobj.sequence(pod, "spec", "initContainers")):
        own = _container_amounts(c, f"spec.initContainers[{i}]", obj, gres_names)
        if kobj.text(c, "restartPolicy") == "Always":
            app = _add(app, own)
            sidecars = _add(sidecars, own)
            init_peak = _max(init_peak, sidecars)
        else:
            init_peak = _max(init_peak, _add(own, sidecars))
    total = _max(app, init_peak)
    pod_level = _container_amounts(kobj.get(pod, "spec"), "spec", obj, {})
    total.update(pod_level)  # pod-level cpu/memory replace the container rule
    overhead: Amounts = {}
    for resource, raw in kobj.mapping(pod, "spec", "overhead").items():
        if resource in ("cpu", "memory"):
            path = f"spec.overhead.{resource}"
            overhead[resource] = parse_non_negative(str(raw), field=path, obj=obj)
    return _add(total, overhead)


def pod_resources(pod: kobj.Obj, gres_mapping: Mapping[str, str]) -> PodResources:
    """One pod's needs in Slurm units (whole CPUs, MiB, GRES counts; a MIG slice is the
    typed GRES of its profile, ``gpu:1g.10gb``). :class:`InvalidInput` for an unmapped
    ``nvidia.com/mig-*`` resource."""
    gres_names = gres_names_of(gres_mapping)
    amounts = pod_amounts(pod, gres_names)
    gres: dict[str, int] = {}
    for resource, slurm_name in gres_names.items():
        n = int(amounts.get(resource, Decimal(0)))
        if n:
            gres[slurm_name] = gres.get(slurm_name, 0) + n
    obj = kobj.describe(pod, "Pod")
    for name, n in gres.items():
        _bounded(n, MAX_GRES, "spec.containers[*].resources", f"GRES {name}", obj)
    return PodResources(
        cpus=_bounded(
            ceil_int(amounts.get("cpu", Decimal(0))),
            MAX_CPUS,
            "spec.containers[*].resources.requests.cpu",
            "CPUs",
            obj,
        ),
        memory_mib=_bounded(
            ceil_int(amounts.get("memory", Decimal(0)) / MIB),
            MAX_MEMORY_MIB,
            "spec.containers[*].resources.requests.memory",
            "MiB of memory",
            obj,
        ),
        gres=gres,
    )


def _bounded(n: int, limit: int, field: str, what: str, obj: str) -> int:
    if n > limit:
        raise InvalidInput(
            field, f"the pod's total of {n} {what} is more than Slurm can count ({limit})", obj
        )
    return n


def annotated_gres(raw: str) -> dict[str, int]:
    """The GRES of a ``gres`` annotation (``gpu:2``, ``gres/gpu:a100:1``; ``gpu`` is 1):
    name (typed as written) -> count. Other TRES (``license/x:1``) are not GRES."""
    out: dict[str, int] = {}
    for part in raw.split(","):
        kind, _, rest = part.strip().rpartition("/")
        if not rest or kind not in ("", "gres"):
            continue
        name, _, count = rest.rpartition(":")
        if not (name and count.isdigit()):
            name, count = rest, "1"
        out[name] = out.get(name, 0) + int(count)
    return out


def gres_floor_problem(raw: str, need: Mapping[str, int], pods_per_node: int = 1) -> str | None:
    """Why the ``gres`` annotation ``raw`` may not stand in for the GRES the pods need
    (``need``: one pod's, from its resources and ResourceClaims), None when it may: it
    replaces them in the Slurm job, so it must name each of them (typed alike) at least
    ``pods_per_node`` times over (the pods that may share a node). It may add GRES, never
    replace or lower these (the claims are given only what Slurm gave the job)."""
    have = annotated_gres(raw)
    short = [
        f"{name}:{n * pods_per_node}"
        for name, n in sorted(need.items())
        if have.get(name, 0) < n * pods_per_node
    ]
    if not short:
        return None
    shared = f", {pods_per_node} pods may share a node" if pods_per_node > 1 else ""
    return (
        f"{raw!r} would replace or lower the GRES the pods' resources and ResourceClaims "
        f"(spec.containers[*].resources, spec.resourceClaims) need: {', '.join(short)} per "
        f"node{shared}; the annotation may add GRES, never lower these: remove it or name "
        "at least as many"
    )


def tres_string(gres: Mapping[str, int]) -> str | None:
    """``{"gpu": 2}`` -> ``gres/gpu:2`` (several: comma-separated, sorted); empty -> None."""
    parts = [f"gres/{name}:{count}" for name, count in sorted(gres.items()) if count > 0]
    return ",".join(parts) or None
