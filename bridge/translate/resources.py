"""What one pod needs, by Kubernetes' own pod-request rule, in Slurm's units.

Per resource, with each container counting the LARGER of its request and limit::

    app      = sum(app containers) + sum(sidecars: init containers with restartPolicy Always)
    init     = max over init containers i of (i + sidecars started before i)
               (a sidecar's own entry is itself + the sidecars before it)
    pod      = max(app, init) + spec.overhead

Pod-level ``spec.resources`` (Kubernetes 1.32+), when set for cpu or memory, replaces
the container sum for that resource. CPUs are rounded up to whole CPUs and memory up to
MiB, once, at the end. GPUs come from ``nvidia.com/gpu`` and ``amd.com/gpu`` (and the
``scheduler.gresMapping`` extended resources) and must be whole numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

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


def _container_amounts(
    container: Any, where: str, obj: str, gres_names: Mapping[str, str]
) -> Amounts:
    out: Amounts = {}
    for kind in ("requests", "limits"):
        for resource, raw in kobj.mapping(container, "resources", kind).items():
            if resource not in ("cpu", "memory") and resource not in gres_names:
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
    """One pod's needs in Slurm units (whole CPUs, MiB, GRES counts)."""
    gres_names = {**gres_mapping, **BUILTIN_GRES}
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


def tres_string(gres: Mapping[str, int]) -> str | None:
    """``{"gpu": 2}`` -> ``gres/gpu:2`` (several: comma-separated, sorted); empty -> None."""
    parts = [f"gres/{name}:{count}" for name, count in sorted(gres.items()) if count > 0]
    return ",".join(parts) or None
