"""Which devices a pod gets on its node: Slurm's choice mapped onto the node's
ResourceSlices (pure).

- CPUs (``dra.cpu``): Slurm's core bitmap of the job on the node. Core ``i`` is the
  ``i``-th (socketID, coreID) pair of the node's CPU devices in sorted order (Slurm counts
  cores socket by socket); each core brings its CPUs (hyperthreads) in cpuID order.
- GPUs and other GRES: where Slurm picked devices (slurmd-backed nodes report indices),
  the devices whose ``index`` attribute (or name ``<x>-<index>``) is one of them; where
  Slurm only counts (external nodes), any free devices of the driver on the node, in index
  order, as kube-scheduler's allocator picks them.

Never a device another claim holds (``taken``). Pods of one job on one node share Slurm's
set: each takes the next free devices of it, so they get distinct ones. A node without a
slice of the driver, or with too few free devices, is a :class:`DeviceAllocationError`
naming the node and the driver.

**Grouped CPU mode** (the DRA CPU driver's ``--cpu-device-mode=grouped``: one device per
machine, socket or NUMA node, ``allowMultipleAllocations`` with capacity
``dra.cpu/cpu``): a claim takes one share of each group holding Slurm's cores
(``consumedCapacity``), and names the cores in the driver's opaque ``cpuConfig.cpuset``
(its contract for external schedulers), so more than 32 CPUs fit one claim. The grouped
slices carry no per-CPU topology: Slurm's core ``i`` is taken to be Linux CPU ``i``. Cores
held by other claims' cpusets are never given again (in ``taken`` as ``core:<i>``).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bridge.errors import DeviceAllocationError
from bridge.translate import kobj
from bridge.translate.dra import DeviceRequest

ALLOCATION_RESULTS_MAX = 32  # resource.k8s.io/v1 AllocationResultsMaxSize (per claim)
_TRAILING_INDEX = re.compile(r"-(\d+)$")


@dataclass(frozen=True, order=True)
class DeviceId:
    driver: str
    pool: str
    device: str


@dataclass(frozen=True)
class SlurmNodeView:
    """What Slurm allocated to the job on one node: core indices, and per GRES name the
    device indices (None where Slurm only counts)."""

    cores: tuple[int, ...] = ()
    gres: Mapping[str, tuple[int, ...] | None] = field(default_factory=dict)
    cores_per_socket: int | None = None


@dataclass(frozen=True)
class Picked:
    """What one request gets: devices; in grouped CPU mode, the CPUs consumed on each
    and the cores for the driver's cpuset."""

    devices: tuple[DeviceId, ...]
    consumed: tuple[int, ...] = ()
    cpuset: tuple[int, ...] = ()


def core_id(driver: str, pool: str, core: int) -> DeviceId:
    """A core pinned through a grouped-mode cpuset, as an entry of ``taken``."""
    return DeviceId(driver, pool, f"core:{core}")


def cpuset_text(cores: Sequence[int]) -> str:
    """Linux cpuset format: ``2-5,7``."""
    out: list[str] = []
    for c in sorted(set(cores)):
        if out and "-" not in out[-1] and int(out[-1]) == c - 1:
            out[-1] = f"{out[-1]}-{c}"
        elif out and "-" in out[-1] and int(out[-1].split("-")[1]) == c - 1:
            out[-1] = f"{out[-1].split('-')[0]}-{c}"
        else:
            out.append(str(c))
    return ",".join(out)


def parse_cpuset(text: str) -> tuple[int, ...]:
    out: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        if lo.isdigit() and (not hi or hi.isdigit()):
            out.update(range(int(lo), int(hi or lo) + 1))
    return tuple(sorted(out))


@dataclass(frozen=True)
class Device:
    id: DeviceId
    attributes: Mapping[str, Any]
    capacity: Mapping[str, Any] = field(default_factory=dict)

    def capacity_of(self, name: str) -> int | None:
        raw = self.capacity.get(name)
        value = raw.get("value") if isinstance(raw, Mapping) else None
        return int(value) if isinstance(value, str | int) and str(value).isdigit() else None

    def attr(self, name: str) -> Any:
        """An attribute's value by its short or driver-qualified name (``index``,
        ``dra.cpu/cpuID``), or None."""
        for key in (name, f"{self.id.driver}/{name}"):
            raw = self.attributes.get(key)
            if isinstance(raw, Mapping):
                for kind in ("int", "string", "bool", "version"):
                    if kind in raw:
                        return raw[kind]
        return None

    @property
    def index(self) -> int | None:
        value = self.attr("index")
        if isinstance(value, int):
            return value
        m = _TRAILING_INDEX.search(self.id.device)
        return int(m.group(1)) if m else None


def node_devices(slices: Iterable[kobj.Obj], driver: str) -> list[Device]:
    """The devices of ``driver`` in a node's ResourceSlices."""
    out = []
    for s in slices:
        if kobj.text(s, "spec", "driver") != driver:
            continue
        pool = kobj.text(s, "spec", "pool", "name")
        for d in kobj.sequence(s, "spec", "devices"):
            did = DeviceId(driver, pool, kobj.text(d, "name"))
            out.append(Device(did, kobj.mapping(d, "attributes"), kobj.mapping(d, "capacity")))
    return out


def taken_devices(claims: Iterable[kobj.Obj], skip_uids: Iterable[str] = ()) -> set[DeviceId]:
    """Devices the allocations of ``claims`` hold (but those of the claims in ``skip_uids``)."""
    skip = set(skip_uids)
    out = set()
    for c in claims:
        if kobj.uid(c) in skip:
            continue
        results = kobj.sequence(c, "status", "allocation", "devices", "results")
        for r in results:
            out.add(DeviceId(kobj.text(r, "driver"), kobj.text(r, "pool"), kobj.text(r, "device")))
        for cfg in kobj.sequence(c, "status", "allocation", "devices", "config"):
            cpuset = kobj.text(cfg, "opaque", "parameters", "cpuConfig", "cpuset")
            driver = kobj.text(cfg, "opaque", "driver")
            requests = set(kobj.sequence(cfg, "requests"))
            pools = {
                kobj.text(r, "pool")
                for r in results
                if kobj.text(r, "driver") == driver
                and (not requests or kobj.text(r, "request") in requests)
            }
            for pool in pools:
                out.update(core_id(driver, pool, core) for core in parse_cpuset(cpuset))
    return out


def _cpu_candidates(
    node: str, devices: list[Device], cores: Sequence[int], driver: str
) -> list[Device]:
    by_core: dict[tuple[int, int], list[Device]] = {}
    for d in devices:
        socket, core = d.attr("socketID"), d.attr("coreID")
        if not isinstance(socket, int) or not isinstance(core, int):
            continue
        by_core.setdefault((socket, core), []).append(d)
    order = sorted(by_core)
    out: list[Device] = []
    for c in cores:
        if c >= len(order):
            raise DeviceAllocationError(
                node,
                driver,
                f"Slurm allocated core {c}, but the node's ResourceSlices publish only "
                f"{len(order)} cores (devices with socketID and coreID)",
            )
        out += sorted(by_core[order[c]], key=lambda d: (d.attr("cpuID") or 0, d.id.device))
    return out


def _gres_candidates(
    node: str, devices: list[Device], indices: tuple[int, ...] | None, driver: str
) -> list[Device]:
    ordered = sorted(devices, key=lambda d: (d.index is None, d.index or 0, d.id.device))
    if indices is None:
        return ordered
    by_index = {d.index: d for d in ordered if d.index is not None}
    missing = [i for i in indices if i not in by_index]
    if missing:
        raise DeviceAllocationError(
            node,
            driver,
            f"Slurm allocated device index {missing[0]}, which no device of the node's "
            "ResourceSlices has",
        )
    return [by_index[i] for i in indices]


def _grouped(
    node: str, r: DeviceRequest, groups: list[Device], slurm: SlurmNodeView, taken: set[DeviceId]
) -> Picked:
    """Grouped CPU mode: one share of each group holding the next ``r.count`` free cores
    of Slurm's set."""
    key = f"{r.driver}/cpu"
    pool = groups[0].id.pool
    free = [c for c in slurm.cores if core_id(r.driver, pool, c) not in taken]
    if len(free) < r.count:
        raise DeviceAllocationError(
            node,
            r.driver,
            f"{r.count} free CPUs needed, Slurm's cores {list(slurm.cores)} leave {len(free)}",
        )
    cores = tuple(free[: r.count])
    by_group: dict[DeviceId, int] = {}
    per_socket = slurm.cores_per_socket or 0
    for c in cores:
        if len(groups) == 1 or not per_socket:
            group = groups[0]
        else:
            socket = c // per_socket
            match = [g for g in groups if g.attr("socketID") == socket]
            if not match:
                raise DeviceAllocationError(
                    node, r.driver, f"no CPU group of socket {socket} (Slurm core {c})"
                )
            group = match[0]
        by_group[group.id] = by_group.get(group.id, 0) + 1
    for gid, n in by_group.items():
        cap = next(g for g in groups if g.id == gid).capacity_of(key) or 0
        if n > cap:
            raise DeviceAllocationError(
                node, r.driver, f"group {gid.device} has capacity {cap} {key}, {n} needed"
            )
    taken.update(core_id(r.driver, pool, c) for c in cores)
    ids = tuple(by_group)
    return Picked(ids, tuple(by_group[i] for i in ids), cores)


def allocate_pod(
    node: str,
    requests: Sequence[DeviceRequest],
    slurm: SlurmNodeView,
    slices: Sequence[kobj.Obj],
    taken: set[DeviceId],
) -> dict[tuple[str | None, str], Picked]:
    """Devices for each of one pod's requests, keyed by (pod claim or None, request).
    ``taken`` gains the devices picked (so the next pod on the node gets others)."""
    out: dict[tuple[str | None, str], Picked] = {}
    for r in requests:
        devices = node_devices(slices, r.driver)
        if not devices:
            raise DeviceAllocationError(
                node, r.driver, f"the node has no ResourceSlice of driver {r.driver}"
            )
        groups = [d for d in devices if d.capacity_of(f"{r.driver}/cpu") is not None]
        if r.is_cpu and groups:
            out[(r.claim, r.request)] = _grouped(node, r, groups, slurm, taken)
            continue
        if r.is_cpu:
            candidates = _cpu_candidates(node, devices, slurm.cores, r.driver)
        else:
            candidates = _gres_candidates(node, devices, slurm.gres.get(r.gres or ""), r.driver)
        free = [d.id for d in candidates if d.id not in taken]
        if len(free) < r.count:
            what = (
                f"Slurm's cores {list(slurm.cores)}"
                if r.is_cpu
                else "Slurm's devices"
                if slurm.gres.get(r.gres or "") is not None
                else "the node's devices"
            )
            raise DeviceAllocationError(
                node,
                r.driver,
                f"{r.count} free {r.device_class} devices needed, {what} leave {len(free)} "
                f"free of {len(candidates)}",
            )
        picked = tuple(free[: r.count])
        taken.update(picked)
        out[(r.claim, r.request)] = Picked(picked)
    return out


def allocation_result(
    node: str,
    picked: Mapping[str, Picked],
    *,
    class_config: Mapping[str, Sequence[kobj.Obj]] = {},
    claim_config: Sequence[kobj.Obj] = (),
    request_classes: Mapping[str, str] = {},
    share_seed: str = "",
) -> dict[str, Any]:
    """A claim's ``status.allocation``: one result per device (request name -> picked),
    the DeviceClasses' and the claim's opaque config (and, in grouped CPU mode, the
    cpuset of Slurm's cores, with ``consumedCapacity`` and a ``shareID`` derived from
    ``share_seed``), and the node selector. Raises DeviceAllocationError past
    AllocationResultsMaxSize (32)."""
    results: list[dict[str, Any]] = []
    config: list[dict[str, Any]] = []
    for req, p in picked.items():
        for i, d in enumerate(p.devices):
            res: dict[str, Any] = {
                "request": req,
                "driver": d.driver,
                "pool": d.pool,
                "device": d.device,
            }
            if p.consumed:
                res["consumedCapacity"] = {f"{d.driver}/cpu": str(p.consumed[i])}
                res["shareID"] = str(uuid.uuid5(uuid.NAMESPACE_OID, f"{share_seed}/{req}/{d}"))
            results.append(res)
        if p.cpuset:
            config.append(
                {
                    "source": "FromClaim",
                    "requests": [req],
                    "opaque": {
                        "driver": p.devices[0].driver,
                        "parameters": {
                            "apiVersion": "v1alpha1",
                            "cpuConfig": {"cpuset": cpuset_text(p.cpuset)},
                        },
                    },
                }
            )
    if len(results) > ALLOCATION_RESULTS_MAX:
        driver = results[0]["driver"]
        raise DeviceAllocationError(
            node,
            driver,
            f"the claim would hold {len(results)} devices; a ResourceClaim holds at most "
            f"{ALLOCATION_RESULTS_MAX} (AllocationResultsMaxSize): use the DRA CPU driver's "
            "grouped mode for many CPUs, or split the devices over several claims",
        )
    for req, cls in request_classes.items():
        for c in class_config.get(cls, ()):
            if kobj.get(c, "opaque") is not None:
                config.append({"source": "FromClass", "requests": [req], "opaque": c["opaque"]})
    for c in claim_config:
        if kobj.get(c, "opaque") is not None:
            entry: dict[str, Any] = {"source": "FromClaim", "opaque": c["opaque"]}
            if kobj.sequence(c, "requests"):
                entry["requests"] = list(kobj.sequence(c, "requests"))
            config.append(entry)
    devices: dict[str, Any] = {"results": results}
    if config:
        devices["config"] = config
    return {
        "devices": devices,
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        },
    }


def allocated_node(claim: kobj.Obj) -> str | None:
    """The node an allocated claim is bound to (its nodeSelector's metadata.name)."""
    for term in kobj.sequence(claim, "status", "allocation", "nodeSelector", "nodeSelectorTerms"):
        for f in kobj.sequence(term, "matchFields"):
            if kobj.text(f, "key") == "metadata.name" and kobj.sequence(f, "values"):
                return str(kobj.sequence(f, "values")[0])
    return None
