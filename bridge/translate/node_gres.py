"""A node's devices as Slurm GRES, and whether Slurm's GRES and Kubernetes' devices agree
(pure).

**Kubernetes' side** (:func:`kube_inventory`): the devices the node's ResourceSlices publish
for a GPU driver (``scheduler.deviceClassGres``: driver -> GRES name), or, on a node
without such slices, its allocatable extended resources of the mapping table
(``nvidia.com/gpu: 2``, ``nvidia.com/mig-1g.10gb: 7``: the device plugin). A device with
the attribute ``type: mig`` (NVIDIA's DRA driver) is a MIG slice: its ``profile``
(``1g.10gb``) becomes the typed GRES of the table (``nvidia.com/mig-1g.10gb`` ->
``gpu:1g.10gb``); any other device is a whole GPU (untyped ``gpu``).

**Partitionable devices** (KEP-4815): a device may consume counters of a counter set
(``sharedCounters``: a GPU's memory slices and multiprocessors); a full GPU and each MIG
placement of it consume from the same set, so they are alternatives, not all usable at
once. Slurm's configuration is one choice among them.

**Slurm's side** (:func:`parse_slurm_gres`): the node's ``gres`` as slurmrestd gives it
(``gpu:2``, ``gpu:1g.10gb:7(S:0)``, ``gpu:a100:1,gpu:1g.10gb:7``). A GPU typed by model
(``gpu:a100``) counts as a whole GPU; a type that names a MIG profile as a slice.

**Agreement** (:func:`compare`, the Node condition ``SlinkySlurmGRESCompatible``):

- every GRES Slurm has is backed by that many distinct devices of its kind, and all of
  them fit their GPUs' counters together (else a job Slurm starts there can never get its
  devices: the pod waits forever);
- Kubernetes has no kind of device Slurm lacks, and (devices without counters) no more of
  a kind than Slurm has (else pods asking for them wait forever, or Slurm never uses them);
- every GPU whose devices consume counters is used by some GRES Slurm has.

The devices for Slurm's GRES are picked greedily: kinds that consume the most first, each
device the first (in the slices' order) whose counter sets still have room. A device
without counters is independent.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from enum import Enum

from bridge.errors import InvalidInput
from bridge.text import checked_token
from bridge.translate import kobj
from bridge.translate.quantity import parse_non_negative, whole_count

MIG_TYPE = "mig"
# NVIDIA's MIG profile names: <compute slices>g.<memory>gb[+me...]
_MIG_PROFILE = re.compile(r"\d+g\.\d+gb")
_GRES_ITEM = re.compile(r"^([A-Za-z0-9_.-]+)(?::([A-Za-z0-9_.+-]+))?(?::(\d+))?$")


@dataclass(frozen=True, order=True)
class GresKind:
    """A Slurm GRES name and type (``gpu``/``""``: untyped, a whole GPU)."""

    name: str
    type: str = ""

    def __str__(self) -> str:
        return f"{self.name}:{self.type}" if self.type else self.name


Inventory = Mapping[GresKind, int]


def gres_text(inv: Inventory) -> str:
    """``gpu:1,gpu:1g.10gb:7``: what ``Gres=`` takes (kinds in order, counts > 0)."""
    return ",".join(f"{k}:{n}" for k, n in sorted(inv.items()) if n > 0)


def parse_slurm_gres(text: str, *, field_name: str = "gres") -> dict[GresKind, int]:
    """A Slurm node's ``gres`` (``gpu:2``, ``gpu:1g.10gb:7(S:0-1)``, ``gpu:a100:1,gpu:2``;
    ``""`` and ``(null)`` are none) as counts per kind, or InvalidInput naming the item."""
    out: dict[GresKind, int] = {}
    text = re.sub(r"\([^)]*\)", "", text.strip())  # socket bindings (S:0-1), IDX lists
    if text in ("", "null"):
        return out
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        m = _GRES_ITEM.fullmatch(item)
        if m is None:
            raise InvalidInput(field_name, f"{item!r} is not a Slurm GRES (name[:type][:count])")
        name, typ, count = m.group(1), m.group(2) or "", m.group(3)
        if count is None and typ.isdigit():
            typ, count = "", typ  # gpu:2
        kind = GresKind(name, typ)
        out[kind] = out.get(kind, 0) + (1 if count is None else int(count))
    return out


@dataclass(frozen=True)
class GresTable:
    """The mapping table (extended resource -> GRES) and what the comparison derives from
    it once: the GRES types of MIG profiles and the GRES names of devices."""

    mapping: Mapping[str, str]
    mig: frozenset[str]  # the types MIG profiles map to (``1g.10gb``, ``a100_1g.10gb``)
    names: frozenset[str]  # GRES names the table maps to (``gpu``)

    @classmethod
    def of(cls, mapping: Mapping[str, str]) -> GresTable:
        mig = {
            gres.partition(":")[2]
            for resource, gres in mapping.items()
            if resource.startswith("nvidia.com/mig-") and ":" in gres
        }
        names = {gres.partition(":")[0] for gres in mapping.values()}
        return cls(dict(mapping), frozenset(mig), frozenset(names))

    def is_slice(self, kind: GresKind) -> bool:
        return kind.type in self.mig or bool(_MIG_PROFILE.match(kind.type))

    def profile_kind(self, profile: str, gres_name: str, field: str = "profile") -> GresKind:
        """The typed GRES of a MIG profile: the table's (``nvidia.com/mig-<profile>``),
        else ``<gres_name>:<profile>``. The profile is driver text that becomes a word of
        Slurm's ``Gres=``: InvalidInput naming ``field`` unless it is a Slurm word."""
        checked_token(profile, field)
        mapped = self.mapping.get(f"nvidia.com/mig-{profile}")
        if mapped and ":" in mapped:
            name, _, typ = mapped.partition(":")
            return GresKind(name, typ)
        return GresKind(gres_name, profile)


# --------------------------------------------------------------------------- Kubernetes
@dataclass(frozen=True)
class KubeDevice:
    """One device Kubernetes publishes, as a GRES kind, and the counters it consumes
    (``counter set -> counter -> amount``; empty: independent of every other device)."""

    name: str
    kind: GresKind
    consumes: Mapping[str, Mapping[str, Decimal]] = field(default_factory=dict)


@dataclass(frozen=True)
class KubeInventory:
    """What a node publishes: its devices, the counter sets they draw on, and where that
    came from (``ResourceSlices`` or ``allocatable``)."""

    devices: tuple[KubeDevice, ...] = ()
    counters: Mapping[str, Mapping[str, Decimal]] = field(default_factory=dict)
    source: str = "ResourceSlices"

    def counts(self) -> dict[GresKind, int]:
        out: dict[GresKind, int] = {}
        for d in self.devices:
            out[d.kind] = out.get(d.kind, 0) + 1
        return out


def _amounts(counters: Mapping[str, object], where: str) -> dict[str, Decimal]:
    out = {}
    for name, raw in counters.items():
        value = kobj.get(raw, "value")
        out[name] = parse_non_negative(str(value), field=f"{where}.{name}.value")
    return out


def _attr(device: Mapping[str, object], name: str, driver: str) -> str:
    for key in (name, f"{driver}/{name}"):
        raw = kobj.mapping(device, "attributes", key)
        for kind in ("string", "int", "version"):
            if kind in raw:
                return str(raw[kind])
    return ""


def slice_inventory(
    slices: Iterable[kobj.Obj], drivers: Mapping[str, str], table: GresTable
) -> KubeInventory:
    """The GPU devices of a node's ResourceSlices (``drivers``: driver -> GRES name), and
    the counter sets of their pools. A malformed counter is InvalidInput naming it."""
    devices: list[KubeDevice] = []
    counters: dict[str, dict[str, Decimal]] = {}
    ordered = sorted(slices, key=kobj.name)
    for s in ordered:
        driver = kobj.text(s, "spec", "driver")
        if driver not in drivers:
            continue
        where = f"ResourceSlice {kobj.name(s)}: spec.sharedCounters"
        for cs in kobj.sequence(s, "spec", "sharedCounters"):
            cname = kobj.text(cs, "name")
            counters[cname] = _amounts(kobj.mapping(cs, "counters"), f"{where}[{cname}]")
    for s in ordered:
        driver = kobj.text(s, "spec", "driver")
        gres_name = drivers.get(driver)
        if gres_name is None:
            continue
        for d in kobj.sequence(s, "spec", "devices"):
            name = kobj.text(d, "name")
            profile = _attr(d, "profile", driver)
            if _attr(d, "type", driver) == MIG_TYPE and profile:
                field = f"ResourceSlice {kobj.name(s)}: device {name}: attributes.profile"
                kind = table.profile_kind(profile, gres_name, field)
            else:
                kind = GresKind(gres_name)
            where = f"ResourceSlice {kobj.name(s)}: device {name}: consumesCounters"
            consumes = {
                kobj.text(c, "counterSet"): _amounts(
                    kobj.mapping(c, "counters"), f"{where}[{kobj.text(c, 'counterSet')}]"
                )
                for c in kobj.sequence(d, "consumesCounters")
            }
            devices.append(KubeDevice(name, kind, consumes))
    return KubeInventory(tuple(devices), counters)


def allocatable_inventory(node: kobj.Obj, table: GresTable) -> KubeInventory:
    """The node's allocatable extended resources of the mapping table (the device plugin:
    ``nvidia.com/gpu: 2``), one independent device each."""
    devices: list[KubeDevice] = []
    alloc = kobj.mapping(node, "status", "allocatable") or kobj.mapping(node, "status", "capacity")
    for resource in sorted(alloc):
        gres = table.mapping.get(resource)
        if gres is None:
            continue
        n = whole_count(str(alloc[resource]), field=f"status.allocatable[{resource}]")
        name, _, typ = gres.partition(":")
        devices += [KubeDevice(f"{resource}-{i}", GresKind(name, typ)) for i in range(n)]
    return KubeInventory(tuple(devices), source="allocatable")


def kube_inventory(
    node: kobj.Obj,
    slices: Iterable[kobj.Obj],
    drivers: Mapping[str, str],
    table: GresTable,
) -> KubeInventory:
    """The node's GPU devices: its ResourceSlices' when it has any of a GPU driver, else
    its allocatable extended resources."""
    inv = slice_inventory(slices, drivers, table)
    return inv if inv.devices else allocatable_inventory(node, table)


# --------------------------------------------------------------------------- choosing
def _weight(d: KubeDevice) -> Decimal:
    return sum((sum(c.values(), Decimal(0)) for c in d.consumes.values()), Decimal(0))


@dataclass
class _Room:
    left: dict[str, dict[str, Decimal]]

    def fits(self, d: KubeDevice) -> bool:
        for cset, want in d.consumes.items():
            have = self.left.get(cset)
            if have is None:
                return False  # names a counter set the pool does not publish
            if any(have.get(c, Decimal(0)) < amount for c, amount in want.items()):
                return False
        return True

    def take(self, d: KubeDevice) -> None:
        for cset, want in d.consumes.items():
            for c, amount in want.items():
                self.left[cset][c] = self.left[cset].get(c, Decimal(0)) - amount


def pick(
    inv: KubeInventory, want: Mapping[GresKind, int]
) -> tuple[list[KubeDevice], dict[GresKind, int]]:
    """Devices for ``want`` that fit the counters together (greedy, kinds consuming the
    most first), and per kind how many could not be found."""
    room = _Room({k: dict(v) for k, v in inv.counters.items()})
    chosen: list[KubeDevice] = []
    short: dict[GresKind, int] = {}
    by_kind: dict[GresKind, list[KubeDevice]] = {}
    for d in inv.devices:
        by_kind.setdefault(d.kind, []).append(d)
    heaviest = sorted(want, key=lambda k: (-max(map(_weight, by_kind.get(k, [])), default=0), k))
    for kind in heaviest:
        need = want[kind]
        # independent devices first: a partitionable GPU may be needed for its slices
        for d in sorted(by_kind.get(kind, []), key=lambda d: bool(d.consumes)):
            if need == 0:
                break
            if room.fits(d):
                room.take(d)
                chosen.append(d)
                need -= 1
        if need:
            short[kind] = need
    return chosen, short


def registration_gres(inv: KubeInventory) -> dict[GresKind, int]:
    """What to register in Slurm for a node: its devices in order, each that still fits
    its GPU's counters (a partitionable GPU publishing the whole GPU first is one GPU;
    slices set up ahead, with no whole-GPU device, are the slices)."""
    room = _Room({k: dict(v) for k, v in inv.counters.items()})
    out: dict[GresKind, int] = {}
    for d in inv.devices:
        if room.fits(d):
            room.take(d)
            out[d.kind] = out.get(d.kind, 0) + 1
    return out


# --------------------------------------------------------------------------- comparing
class Agreement(Enum):
    COMPATIBLE = "True"
    INCOMPATIBLE = "False"
    UNKNOWN = "Unknown"


# The condition's reasons (upstream's names)
REASON_COMPATIBLE = "SlurmGRESCompatible"
REASON_INCOMPATIBLE = "IncompatibleSlurmGRES"
REASON_UNVERIFIED = "SlurmGRESVerificationError"


@dataclass(frozen=True)
class Verdict:
    status: Agreement
    reason: str
    message: str


def _counted(counts: Mapping[GresKind, int]) -> str:
    return gres_text(counts) or "none"


def compare(
    slurm_gres: str,
    inv: KubeInventory,
    *,
    slurm_node: str,
    table: GresTable,
) -> Verdict:
    """Do Slurm's GRES of ``slurm_node`` (its ``gres``) and the node's devices agree?"""
    try:
        slurm = parse_slurm_gres(slurm_gres, field_name=f"Slurm node {slurm_node}: gres")
    except InvalidInput as e:
        return Verdict(Agreement.UNKNOWN, REASON_UNVERIFIED, f"Could not verify Slurm GRES: {e}")
    # Only the GRES Kubernetes can publish (GPUs): Slurm's other GRES are not compared.
    have = inv.counts()
    names = table.names | {h.name for h in have}
    slurm = {k: n for k, n in slurm.items() if k.name in names}
    # A GPU typed by model (gpu:a100) is a whole GPU: Kubernetes publishes it untyped.
    want: dict[GresKind, int] = {}
    for k, n in slurm.items():
        key = k if table.is_slice(k) else GresKind(k.name)
        want[key] = want.get(key, 0) + n
    problems: list[str] = []
    chosen, short = pick(inv, want)
    for kind, n in sorted(short.items()):
        if have.get(kind, 0) < want[kind]:
            problems.append(
                f"Slurm has {kind}:{want[kind]} but the node's {inv.source} have "
                f"{have.get(kind, 0)} such device(s)"
            )
        else:
            problems.append(
                f"Slurm has {kind}:{want[kind]} but only {want[kind] - n} of them fit the "
                "GPUs' shared counters together with the rest of Slurm's GRES"
            )
    # Devices without counters are all usable at once: Slurm must have every one of them.
    independent: dict[GresKind, int] = {}
    for d in inv.devices:
        if not d.consumes:
            independent[d.kind] = independent.get(d.kind, 0) + 1
    for kind, n in sorted(independent.items()):
        if kind not in want:
            problems.append(
                f"the node's {inv.source} have {n} device(s) of {kind} that Slurm does not have"
            )
        elif want[kind] < n:
            problems.append(
                f"the node's {inv.source} have {n} device(s) of {kind} but Slurm has {want[kind]}"
            )
    # A partitionable GPU (its devices alternatives) must be used by some GRES of Slurm.
    used = {cs for d in chosen for cs in d.consumes}
    unused = sorted({cs for d in inv.devices for cs in d.consumes} - used)
    if unused:
        problems.append(f"no GRES of Slurm uses the GPU(s) of counter set(s) {', '.join(unused)}")
    if problems:
        return Verdict(
            Agreement.INCOMPATIBLE,
            REASON_INCOMPATIBLE,
            f"Slurm node {slurm_node} has Gres={_counted(slurm)}, the node's {inv.source} "
            f"publish {_counted(have)}: " + "; ".join(problems),
        )
    return Verdict(
        Agreement.COMPATIBLE,
        REASON_COMPATIBLE,
        f"Slurm node {slurm_node} has Gres={_counted(slurm)}, which the node's "
        f"{inv.source} back ({_counted(have)})",
    )
