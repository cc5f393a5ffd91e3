"""Which devices a pod gets on its node: Slurm's choice mapped onto the node's
ResourceSlices (pure).

- CPUs (``dra.cpu``): Slurm's core bitmap of the job on the node. Core ``i`` is the
  ``i``-th (socketID, coreID) pair of the node's CPU devices in sorted order (Slurm counts
  cores socket by socket); each core brings its CPUs (hyperthreads) in cpuID order.
- GPUs and other GRES: where Slurm picked devices (slurmd-backed nodes report indices),
  the devices whose ``index`` attribute (or name ``<x>-<index>``) is one of them; where
  Slurm only counts (external nodes), free devices of the driver on the node, in index
  order, as kube-scheduler's allocator picks them. Either way never more than Slurm gave
  the job on the node: its pods there share Slurm's number (``taken`` books it).

**Exactness**: a claim gets only devices Slurm accounted to its own job, in number and
kind. A GRES Slurm did not give the job on the node, fewer devices (or a count) than the
request asks, or a kind other than asked is a :class:`DeviceMismatch` (the job is given
back, nothing written): never a fallback to "any free device".

**Device taints** (KEP-5055, :mod:`bridge.devices.taints`): never a device
tainted ``NoSchedule``/``NoExecute`` (by its slice or a DeviceTaintRule) that the request
does not tolerate. Where Slurm only counts, such a device is skipped; where Slurm's
indices (or cores) name one, it is a :class:`DeviceMismatch` (the job is given back).

Never a device another claim holds (``taken``). Pods of one job on one node share Slurm's
set: each takes the next free devices of it, so they get distinct ones. A node without a
slice of the driver, or with too few free devices, is a :class:`DeviceAllocationError`
naming the node and the driver.

**MIG slices and partitionable devices** (KEP-4815): a request for a MIG profile (typed
GRES ``gpu:1g.10gb``, ``DeviceRequest.profile``) gets only devices with ``type: mig`` and
that ``profile``; a request for whole GPUs never gets one with ``type: mig``; every device
passes the class's and the request's CEL selectors. Slurm numbers a node's GPUs once
across its types, in gres.conf order (``gpu:a100:1(IDX:0),gpu:1g.10gb:7(IDX:1-7)``):
index ``i`` of type ``T`` is the ``k = i - first(T)``-th device of that type
(``SlurmNodeView.gres_layout``: the node's ``Gres=``, each type's devices together). Which
DRA device that is: Slurm's whole layout is packed onto the node's devices by the one
packer (:mod:`bridge.devices.packing`: every Slurm device a distinct DRA device, all
together within the GPUs' counters, found whenever such a packing exists; devices known
by their attributes and counters, never their names), and the ``k``-th device of the type
in it (GPU by GPU) is Slurm's ``k``-th. A layout that cannot be packed is a
:class:`DeviceMismatch` naming the type short, never a guess. Where Slurm only counts, a
free device of the profile that a packing of the layout with every device held already
chooses (what is still free stays packable), then any other that fits, within Slurm's
count.
Either way a device is given only when it **fits its GPU's counters**: the sum of what
every allocated device of the pool consumes (``consumesCounters``, across every claim)
plus its own stays within the counter set (``sharedCounters``), so a slice is never given
on a GPU whose full device is allocated, nor the full device beside a slice; without
counters, a MIG device and the full GPU it belongs to (``parentUUID`` = ``uuid``) still
exclude each other. When Slurm's choice and the slices disagree (an index no device of
the type has, a slice of another profile or kind than asked, a slice that does not fit,
no free slice of the profile) it is a :class:`DeviceMismatch`: the job is given back.

**Grouped CPU mode** (the DRA CPU driver's ``--cpu-device-mode=grouped``: one device per
machine, socket or NUMA node, ``allowMultipleAllocations`` with capacity
``dra.cpu/cpu``): a claim takes one share of each group holding Slurm's cores
(``consumedCapacity``), and names the cores in the driver's opaque ``cpuConfig.cpuset``
(its contract for external schedulers), so more than 32 CPUs fit one claim. The grouped
slices carry no per-CPU topology: Slurm's core ``i`` is taken to be Linux CPU ``i``. Cores
held by other claims' cpusets are never given again (in ``taken`` as ``core:<i>``).
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cached_property
from typing import Any

from bridge import kobj
from bridge.devices import packing
from bridge.devices.taints import describe, device_taints, untolerated
from bridge.errors import DeviceAllocationError, DeviceMismatch, InvalidInput
from bridge.translate.dra import DeviceRequest
from bridge.translate.quantity import parse_quantity
from bridge.translate.selectors import device_variable, matches

ALLOCATION_RESULTS_MAX = 32  # resource.k8s.io/v1 AllocationResultsMaxSize (per claim)
_TRAILING_INDEX = re.compile(r"-(\d+)$")
CounterKey = tuple[str, str, str]  # driver, pool, counter set


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
    # the node's typed GRES in Slurm's order with their counts (its Gres=:
    # (("gpu:a100", 1), ("gpu:1g.10gb", 7))): Slurm numbers a node's GPUs once across the
    # types; empty: every type starts at 0
    gres_layout: tuple[tuple[str, int], ...] = ()
    # how many of each GRES Slurm counted to the job on the node (what a GRES without
    # indices may give, at most)
    counts: Mapping[str, int] = field(default_factory=dict)

    @property
    def gres_offsets(self) -> dict[str, int]:
        """Typed GRES -> its first index in the node's numbering."""
        out: dict[str, int] = {}
        next_of: dict[str, int] = {}
        for key, count in self.gres_layout:
            name = key.split(":")[0]
            out.setdefault(key, next_of.get(name, 0))
            next_of[name] = next_of.get(name, 0) + count
        return out

    def given(self, gres: str) -> list[tuple[str, tuple[int, ...] | None]]:
        """What Slurm gave for a request of ``gres``: that GRES itself, or for an untyped
        name (``gpu``) every type of it Slurm picked (an untyped request matches any)."""
        if gres in self.gres:
            return [(gres, self.gres[gres])]
        if ":" in gres:
            return []
        return [(k, v) for k, v in self.gres.items() if k.split(":")[0] == gres]


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


_GIVEN = "slurm-given"  # the pool of the entries of ``taken`` that book Slurm's numbers


def _given_id(gres: str, n: int) -> DeviceId:
    """Device ``n`` (Slurm's index, or the place in its count) of a GRES Slurm gave the
    job on the node, given to a claim, as an entry of ``taken`` (so the job's pods on the
    node never get more than Slurm gave)."""
    return DeviceId("", _GIVEN, f"{gres}#{n}")


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
    # (counter set, counter -> amount) this device consumes when allocated
    consumes: tuple[tuple[str, Mapping[str, Decimal]], ...] = ()
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def is_mig(self) -> bool:
        return bool(self.attr("type") == "mig")

    @property
    def profile(self) -> str | None:
        value = self.attr("profile")
        return value if isinstance(value, str) else None

    @property
    def parent_uuid(self) -> str | None:
        value = self.attr("parentUUID")
        return value if isinstance(value, str) else None

    @property
    def gpu_number(self) -> int | None:
        """The number of the GPU it is or belongs to, where the slices publish one
        (``parentIndex``/``parentMinor`` of a slice, ``index``/``minor`` of a GPU)."""
        names = ("parentIndex", "parentMinor") if self.is_mig else ("index", "minor")
        for name in names:
            value = self.attr(name)
            if isinstance(value, int):
                return value
        return None

    @property
    def uuid(self) -> str | None:
        value = self.attr("uuid")
        return value if isinstance(value, str) else None

    def capacity_of(self, name: str) -> int | None:
        raw = self.capacity.get(name)
        value = raw.get("value") if isinstance(raw, Mapping) else None
        return int(value) if isinstance(value, str | int) and str(value).isdigit() else None

    def attr(self, name: str) -> Any:
        """An attribute's value by its short or driver-qualified name (``index``,
        ``dra.cpu/cpuID``), or None."""
        return self._values.get(name)

    @cached_property
    def _values(self) -> dict[str, Any]:
        """Each attribute's value by its short name (the short key before the
        driver-qualified one), read once."""
        out: dict[str, Any] = {}
        qualified: list[tuple[str, Any]] = []
        prefix = f"{self.id.driver}/"
        for key, raw in self.attributes.items():
            if type(raw) is not dict and not isinstance(raw, Mapping):
                continue
            for kind in ("int", "string", "bool", "version"):
                if kind in raw:
                    if key.startswith(prefix):
                        qualified.append((key[len(prefix) :], raw[kind]))
                    else:
                        out.setdefault(key, raw[kind])
                    break
        for short, value in qualified:
            out.setdefault(short, value)
        return out

    @property
    def index(self) -> int | None:
        value = self.attr("index")
        if isinstance(value, int):
            return value
        if self.is_mig:
            return None
        m = _TRAILING_INDEX.search(self.id.device)
        return int(m.group(1)) if m else None


def _amounts(
    counters: Any, where: str, seen: dict[str, Decimal] | None = None
) -> dict[str, Decimal]:
    """Each counter's quantity (0 when malformed); ``seen``: the texts parsed already (a
    node's devices repeat a handful of values)."""
    out = {}
    seen = {} if seen is None else seen
    for name, c in (counters or {}).items():
        text = str(c.get("value") if isinstance(c, Mapping) else None)
        if text not in seen:
            try:
                seen[text] = parse_quantity(text, field=f"{where}.{name}")
            except InvalidInput:
                seen[text] = Decimal(0)
        out[str(name)] = seen[text]
    return out


def node_devices(slices: Iterable[kobj.Obj], driver: str) -> list[Device]:
    """The devices of ``driver`` in a node's ResourceSlices."""
    out = []
    seen: dict[str, Decimal] = {}
    for s in slices:
        if kobj.text(s, "spec", "driver") != driver:
            continue
        pool = kobj.text(s, "spec", "pool", "name")
        for d in kobj.sequence(s, "spec", "devices"):
            did = DeviceId(driver, pool, kobj.text(d, "name"))
            consumes = tuple(
                (
                    kobj.text(c, "counterSet"),
                    _amounts(kobj.get(c, "counters"), "consumesCounters", seen),
                )
                for c in kobj.sequence(d, "consumesCounters")
            )
            out.append(
                Device(did, kobj.mapping(d, "attributes"), kobj.mapping(d, "capacity"), consumes, d)
            )
    return out


def counter_sets(slices: Iterable[kobj.Obj], driver: str) -> dict[CounterKey, dict[str, Decimal]]:
    """The counter sets (``spec.sharedCounters``) of ``driver``'s pools in ``slices``."""
    out: dict[CounterKey, dict[str, Decimal]] = {}
    for s in slices:
        if kobj.text(s, "spec", "driver") != driver:
            continue
        pool = kobj.text(s, "spec", "pool", "name")
        for cs in kobj.sequence(s, "spec", "sharedCounters"):
            key = (driver, pool, kobj.text(cs, "name"))
            out[key] = _amounts(kobj.get(cs, "counters"), "sharedCounters")
    return out


@dataclass
class Ledger:
    """What the allocated devices of a node's pools consume of their counter sets, and
    which GPUs (uuid) have a slice or their full device allocated: :meth:`why_not` says
    whether one more device fits; :meth:`take` books it."""

    sets: dict[CounterKey, dict[str, Decimal]]
    used: dict[CounterKey, dict[str, Decimal]] = field(default_factory=dict)
    whole: set[str] = field(default_factory=set)  # GPUs whose full device is allocated
    sliced: set[str] = field(default_factory=set)  # GPUs with a MIG slice allocated

    @classmethod
    def of(
        cls, devices: Sequence[Device], slices: Sequence[kobj.Obj], taken: set[DeviceId]
    ) -> Ledger:
        drivers = {d.id.driver for d in devices}
        sets: dict[CounterKey, dict[str, Decimal]] = {}
        for driver in drivers:
            sets.update(counter_sets(slices, driver))
        ledger = cls(sets)
        for d in devices:
            if d.id in taken:
                ledger.take(d)
        return ledger

    def why_not(self, d: Device) -> str | None:
        if d.is_mig and d.parent_uuid and d.parent_uuid in self.whole:
            return f"its GPU {d.parent_uuid} is allocated whole"
        if not d.is_mig and d.uuid and d.uuid in self.sliced:
            return f"GPU {d.uuid} has a MIG slice allocated"
        for cset, amounts in d.consumes:
            key = (d.id.driver, d.id.pool, cset)
            have = self.sets.get(key)
            if have is None:
                return f"its counter set {cset} is not published in pool {d.id.pool}"
            used = self.used.get(key, {})
            for name, n in amounts.items():
                if used.get(name, Decimal(0)) + n > have.get(name, Decimal(0)):
                    return (
                        f"counter {cset}/{name} would exceed {have.get(name, Decimal(0))} "
                        f"(in use {used.get(name, Decimal(0))}, this device {n})"
                    )
        return None

    def take(self, d: Device) -> None:
        for cset, amounts in d.consumes:
            used = self.used.setdefault((d.id.driver, d.id.pool, cset), {})
            for name, n in amounts.items():
                used[name] = used.get(name, Decimal(0)) + n
        if d.is_mig and d.parent_uuid:
            self.sliced.add(d.parent_uuid)
        if not d.is_mig and d.uuid:
            self.whole.add(d.uuid)

    def copy(self) -> Ledger:
        return Ledger(
            self.sets,
            {k: dict(v) for k, v in self.used.items()},
            set(self.whole),
            set(self.sliced),
        )

    def overcommitted(self) -> list[str]:
        """Counters used beyond their set (never, when every device went through
        :meth:`why_not`)."""
        out = []
        for key, used in self.used.items():
            have = self.sets.get(key, {})
            for name, n in used.items():
                if n > have.get(name, Decimal(0)):
                    out.append(f"{key[1]}/{key[2]}/{name}: {n} > {have.get(name, Decimal(0))}")
        return out


def slices_fingerprint(slices: Iterable[kobj.Obj], driver: str | None = None) -> str:
    """What a node's ResourceSlices (of ``driver``, or all) publish, as one digest: equal
    while their devices and counters stay the same, whatever the order they are listed in."""
    parts = sorted(
        json.dumps([kobj.name(s), kobj.get(s, "spec")], sort_keys=True, default=str)
        for s in slices
        if driver is None or kobj.text(s, "spec", "driver") == driver
    )
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


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


def _tainted(r: DeviceRequest, d: Device) -> str | None:
    """Why ``r`` may not have ``d``: a NoSchedule/NoExecute taint it does not tolerate
    (KEP-5055; the slices carry the DeviceTaintRules' taints too: taints.with_rules)."""
    blocked = untolerated(device_taints(d.raw), r.tolerations)
    if not blocked:
        return None
    return (
        f"{d.id.device} is tainted {describe(blocked[0])}, which request {r.request!r} does not "
        "tolerate"
    )


def _unfit(r: DeviceRequest, d: Device) -> str | None:
    """Why ``d`` is not a device of the kind ``r`` asks for, or one it may not have
    (None: it is, and it may)."""
    if (why := _tainted(r, d)) is not None:
        return why
    if r.profile is not None:
        if not d.is_mig:
            return f"{d.id.device} is not a MIG slice (the request asks for {r.profile})"
        if d.profile != r.profile:
            return f"{d.id.device} is a {d.profile} slice, the request asks for {r.profile}"
    elif d.is_mig:
        return f"{d.id.device} is a MIG slice ({d.profile}), the request asks for whole GPUs"
    if r.selectors and not matches(r.selectors, device_variable(d.id.driver, d.raw)):
        return f"{d.id.device} does not match the selectors of request {r.request!r}"
    return None


WHOLE = ""  # the kind of a whole GPU in a packing of Slurm's layout


@dataclass(frozen=True)
class SlurmLayout:
    """Slurm's layout of a node as the packer's kinds: a MIG profile's typed GRES is its
    kind, every typed whole GPU (``gpu:a100``) the kind :data:`WHOLE`, numbered on from
    the whole GPUs of the types before it."""

    want: Mapping[str, int]
    kind_of_profile: Mapping[str, str]
    whole_offset: Mapping[str, int]

    @classmethod
    def of(cls, layout: Sequence[tuple[str, int]], profiles: Mapping[str, str]) -> SlurmLayout:
        want: dict[str, int] = {}
        kinds: dict[str, str] = {}
        offsets: dict[str, int] = {}
        for key, count in layout:
            if key in profiles:
                kinds.setdefault(profiles[key], key)
                want[key] = want.get(key, 0) + count
            elif ":" in key:
                offsets.setdefault(key, want.get(WHOLE, 0))
                want[WHOLE] = want.get(WHOLE, 0) + count
        return cls(want, kinds, offsets)

    def kind(self, d: Device) -> str:
        if d.is_mig:
            return self.kind_of_profile.get(d.profile or "", f"mig:{d.profile}")
        return WHOLE

    def request_kind(self, r: DeviceRequest) -> str:
        if r.profile is None:
            return WHOLE
        return self.kind_of_profile.get(r.profile, f"mig:{r.profile}")


def _key(d: DeviceId) -> str:
    return f"{d.pool}/{d.device}"


def packing_node(
    devices: Sequence[Device], slices: Sequence[kobj.Obj], layout: SlurmLayout
) -> packing.NodeDevices:
    """The node's devices for the packer: identified by their attributes (``type``,
    ``profile``, ``uuid``, ``parentUUID``, the GPU's number) and counters, never by name."""
    capacity: dict[packing.CounterRef, Decimal] = {}
    for driver in sorted({d.id.driver for d in devices}):
        for (_, pool, cset), amounts in counter_sets(slices, driver).items():
            for name, n in amounts.items():
                capacity[(f"{pool}/{cset}", name)] = n
    units = []
    sets: dict[tuple[str, str], str] = {}  # (pool, counter set) -> its name on the node
    for d in devices:
        placement = d.attr("placement")
        consumes: dict[packing.CounterRef, Decimal] = {}
        for cset, used in d.consumes:
            where = sets.get((d.id.pool, cset))
            if where is None:
                where = sets[(d.id.pool, cset)] = f"{d.id.pool}/{cset}"
            for name, n in used.items():
                consumes[(where, name)] = n
        units.append(
            packing.Unit(
                _key(d.id),
                layout.kind(d),
                consumes,
                part=d.is_mig,
                uuid=d.uuid,
                parent=d.parent_uuid,
                gpu=d.gpu_number,
                placement=placement if isinstance(placement, int) else None,
            )
        )
    return packing.node_of(units, capacity)


def _unpacked(node: str, r: DeviceRequest, layout: Sequence[tuple[str, int]], why: object) -> str:
    text = ",".join(f"{k}:{n}" for k, n in layout)
    return (
        f"Slurm's devices of the node ({text}) cannot all be placed on its ResourceSlices' "
        f"devices together: {why}"
    )


def _slurm_devices(
    node: str,
    r: DeviceRequest,
    devices: Sequence[Device],
    given: Sequence[tuple[str, tuple[int, ...]]],
    slurm: SlurmNodeView,
    profiles: Mapping[str, str],
    slices: Sequence[kobj.Obj],
) -> list[Device]:
    """The devices Slurm's indices name (Slurm numbers a node's GPUs once across types):
    Slurm's whole layout packed onto the node's devices, the ``k``-th of a type in it."""
    out: list[Device] = []
    layout = SlurmLayout.of(slurm.gres_layout, profiles)
    node_devices_ = packing_node(devices, slices, layout)
    by_key = {_key(d.id): d for d in devices}
    packed: packing.Packing | None = None
    if layout.want:
        found = packing.pack(node_devices_, layout.want)
        if isinstance(found, packing.Unpackable):
            raise DeviceMismatch(node, r.driver, _unpacked(node, r, slurm.gres_layout, found))
        packed = found
    position = node_devices_.position()
    counts = dict(slurm.gres_layout)
    offsets = slurm.gres_offsets
    for key, indices in given:
        if ":" not in key and key not in profiles:
            by_index = {d.index: d for d in devices if d.index is not None}
            missing = [i for i in indices if i not in by_index]
            if missing:
                raise DeviceAllocationError(
                    node,
                    r.driver,
                    f"Slurm allocated device index {missing[0]}, which no device of the node's "
                    "ResourceSlices has",
                )
            out += [by_index[i] for i in indices]
            continue
        if packed is not None and key in counts:
            kind = key if key in profiles else WHOLE
            order = [by_key[k] for k in packed.devices.get(kind, ())]
            order = order[layout.whole_offset.get(key, 0) :][: counts[key]]
        else:  # Slurm's layout unknown: the type's devices in the node's order
            profile = profiles.get(key)
            order = sorted(
                (d for d in devices if d.is_mig == (profile is not None) and d.profile == profile)
                if profile is not None
                else (d for d in devices if not d.is_mig),
                key=lambda d: position[_key(d.id)],
            )
        offset = offsets.get(key, 0)
        for i in indices:
            k = i - offset
            if not 0 <= k < len(order):
                raise DeviceMismatch(
                    node,
                    r.driver,
                    f"Slurm gave {key} index {i}, which the node's ResourceSlices do not show "
                    f"(they hold {len(order)} devices of it, numbered from {offset})",
                )
            out.append(order[k])
    for d in out:
        why = _unfit(r, d)
        if why is not None:
            raise DeviceMismatch(node, r.driver, f"Slurm gave {d.id.device}, but {why}")
    return out


def _free_devices(
    r: DeviceRequest,
    devices: Sequence[Device],
    slurm: SlurmNodeView,
    profiles: Mapping[str, str],
    slices: Sequence[kobj.Obj],
    taken: set[DeviceId],
) -> list[Device]:
    """Where Slurm only counts: the devices of the request's kind, those a packing of
    Slurm's whole layout with every device held already chooses first (taking one keeps
    what is still free packable), then the others, in the node's order."""
    layout = SlurmLayout.of(slurm.gres_layout, profiles)
    node_devices_ = packing_node(devices, slices, layout)
    position = node_devices_.position()
    fitting = sorted(
        (d for d in devices if _unfit(r, d) is None), key=lambda d: position[_key(d.id)]
    )
    if not layout.want:
        return fitting
    held = {_key(d.id) for d in devices if d.id in taken}
    found = packing.pack(node_devices_, layout.want, fixed=held)
    if isinstance(found, packing.Unpackable):
        return fitting
    first = set(found.devices.get(layout.request_kind(r), ())) - held
    return [d for d in fitting if _key(d.id) in first] + [
        d for d in fitting if _key(d.id) not in first
    ]


def _pick_gres(
    node: str,
    r: DeviceRequest,
    devices: Sequence[Device],
    slurm: SlurmNodeView,
    slices: Sequence[kobj.Obj],
    taken: set[DeviceId],
    profiles: Mapping[str, str],
) -> tuple[DeviceId, ...]:
    given = slurm.given(r.gres or "")
    name = (r.gres or "").split(":")[0]
    other = [k for k in slurm.gres if k.split(":")[0] == name and k != r.gres]
    if not given and other:
        raise DeviceMismatch(
            node, r.driver, f"Slurm gave {', '.join(sorted(other))}, the request asks for {r.gres}"
        )
    if not given:
        raise DeviceMismatch(
            node,
            r.driver,
            f"Slurm gave the job no {r.gres} on the node, the request {r.request!r} asks for "
            f"{r.count}",
        )
    booked = _book(node, r, given, slurm, taken, profiles)
    indexed = [(k, idx) for k, idx in given if idx is not None]
    if indexed:
        candidates = _slurm_devices(node, r, devices, indexed, slurm, profiles, slices)
    else:
        candidates = _free_devices(r, devices, slurm, profiles, slices, taken)
    ledger = Ledger.of(devices, slices, taken)
    picked: list[DeviceId] = []
    refused: tuple[Device, str] | None = None
    for d in candidates:
        if len(picked) == r.count:
            break
        if d.id in taken:
            continue
        why = ledger.why_not(d)
        if why is not None:
            refused = refused or (d, why)
            continue
        ledger.take(d)
        taken.add(d.id)
        picked.append(d.id)
    if len(picked) < r.count:
        what = "Slurm's devices" if indexed else "the node's devices"
        reason = (
            f"{r.count} free {r.device_class} devices needed, {what} leave {len(picked)} "
            f"free of {len(candidates)}"
        )
        if refused is not None:
            reason += f" ({refused[0].id.device}: {refused[1]})"
        partitioned = r.profile is not None or any(d.is_mig or d.consumes for d in candidates)
        raise (DeviceMismatch if partitioned else DeviceAllocationError)(node, r.driver, reason)
    taken.update(booked)
    return tuple(picked)


def _book(
    node: str,
    r: DeviceRequest,
    given: Sequence[tuple[str, tuple[int, ...] | None]],
    slurm: SlurmNodeView,
    taken: set[DeviceId],
    profiles: Mapping[str, str],
) -> list[DeviceId]:
    """The entries of ``taken`` that book ``r.count`` of the devices Slurm gave the job
    on the node (``given``: its indices, or where it only counts, its count of a GRES of
    the request's kind), or the DeviceMismatch saying Slurm's number, less what the job's
    other claims took, is short: a claim never gets more than Slurm gave its job."""
    kind = [(k, idx) for k, idx in given if idx is not None or profiles.get(k) == r.profile]
    if not kind:
        raise DeviceMismatch(
            node,
            r.driver,
            f"Slurm gave {', '.join(sorted(k for k, _ in given))}, the request {r.request!r} "
            "asks for " + (f"{r.profile} slices" if r.profile else "whole devices"),
        )
    out: list[DeviceId] = []
    total = 0
    for key, idx in kind:
        # Slurm's indices, or the places of its count
        slots = idx if idx is not None else range(slurm.counts.get(key, 0))
        total += len(slots)
        free = [_given_id(key, n) for n in slots if _given_id(key, n) not in taken]
        out += free[: r.count - len(out)]
    if len(out) < r.count:
        raise DeviceMismatch(
            node,
            r.driver,
            f"Slurm gave the job {total} {'/'.join(k for k, _ in kind)} on the node "
            f"({total - len(out)} to its other claims already), the request {r.request!r} "
            f"asks for {r.count}",
        )
    return out


def allocate_pod(
    node: str,
    requests: Sequence[DeviceRequest],
    slurm: SlurmNodeView,
    slices: Sequence[kobj.Obj],
    taken: set[DeviceId],
    profiles: Mapping[str, str] = {},
) -> dict[tuple[str | None, str], Picked]:
    """Devices for each of one pod's requests, keyed by (pod claim or None, request).
    ``taken`` gains the devices picked (so the next pod on the node gets others).
    ``profiles``: typed GRES -> MIG profile (``gpu:1g.10gb`` -> ``1g.10gb``), to read
    Slurm's typed indices."""
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
        if not r.is_cpu:
            out[(r.claim, r.request)] = Picked(
                _pick_gres(node, r, devices, slurm, slices, taken, profiles)
            )
            continue
        candidates = _cpu_candidates(node, devices, slurm.cores, r.driver)
        for d in candidates:
            if (why := _tainted(r, d)) is not None:
                raise DeviceMismatch(node, r.driver, f"Slurm gave {d.id.device}, but {why}")
        free = [d.id for d in candidates if d.id not in taken]
        if len(free) < r.count:
            raise DeviceAllocationError(
                node,
                r.driver,
                f"{r.count} free {r.device_class} devices needed, Slurm's cores "
                f"{list(slurm.cores)} leave {len(free)} free of {len(candidates)}",
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
