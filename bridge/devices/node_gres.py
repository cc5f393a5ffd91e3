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

Whether Slurm's GRES fit is asked of the one packer (:mod:`bridge.devices.packing`):
exact (a packing of the whole layout whenever one exists, using every GPU), by the
devices' attributes and counters. A device without counters is independent; a static
MIG slice and its GPU's full device exclude each other (``parentUUID``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from enum import Enum

from bridge import kobj
from bridge.devices import packing
from bridge.errors import InvalidInput
from bridge.text import checked_token
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


def tres_gres(text: str, *, field_name: str = "tres") -> dict[GresKind, int]:
    """The GRES of a job's ``tres_per_node`` or ``tres_per_task`` (``gres/gpu:1,
    gres/gpu:a100:2``) as counts per kind; the other TRES are left out, and text that is
    not a GRES list gives none."""
    items = [i.removeprefix("gres/") for i in text.split(",") if i.startswith("gres/")]
    try:
        return parse_slurm_gres(",".join(items), field_name=field_name)
    except InvalidInput:
        return {}


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
    part: bool = False  # a MIG slice
    uuid: str | None = None
    parent: str | None = None  # parentUUID of a slice
    gpu: int | None = None  # the GPU's number (parentIndex/parentMinor, index/minor)
    placement: int | None = None


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


def _int_attr(device: Mapping[str, object], driver: str) -> Callable[[str], int | None]:
    def read(name: str) -> int | None:
        for key in (name, f"{driver}/{name}"):
            value = kobj.mapping(device, "attributes", key).get("int")
            if isinstance(value, int):
                return value
        return None

    return read


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
            part = _attr(d, "type", driver) == MIG_TYPE and bool(profile)
            if part:
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
            numbers = ("parentIndex", "parentMinor") if part else ("index", "minor")
            number = next((n for n in map(_int_attr(d, driver), numbers) if n is not None), None)
            devices.append(
                KubeDevice(
                    name,
                    kind,
                    consumes,
                    part=part,
                    uuid=_attr(d, "uuid", driver) or None,
                    parent=_attr(d, "parentUUID", driver) or None,
                    gpu=number,
                    placement=_int_attr(d, driver)("placement"),
                )
            )
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
def packing_node(inv: KubeInventory) -> packing.NodeDevices:
    """The inventory's devices for the packer (by attributes and counters)."""
    capacity = {(cs, c): n for cs, counters in inv.counters.items() for c, n in counters.items()}
    return packing.node_of(
        (
            packing.Unit(
                d.name,
                d.kind,
                {(cs, c): n for cs, want in d.consumes.items() for c, n in want.items()},
                part=d.part,
                uuid=d.uuid,
                parent=d.parent,
                gpu=d.gpu,
                placement=d.placement,
            )
            for d in inv.devices
        ),
        capacity,
    )


def registration_gres(inv: KubeInventory) -> dict[GresKind, int]:
    """What to register in Slurm for a node: per GPU, its devices in order, each that
    still fits its counters (a partitionable GPU publishing the whole GPU first is one
    GPU; slices set up ahead, with no whole-GPU device, are the slices)."""
    return dict(packing.first_fit(packing_node(inv)))


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


def _used_up(reasons: str) -> str:
    m = re.search(r" \(used up: [^)]*\)", reasons)
    return m.group(0) if m else ""


def _unused(node: packing.NodeDevices, want: Mapping[GresKind, int]) -> list[str]:
    """The GPUs a packing of ``want`` leaves without a device (devices without counters
    are named by the independent-device check)."""
    found = packing.pack(node, want)
    if not isinstance(found, packing.Packing):
        return []
    used = found.keys()
    return [g.describe() for g in node.gpus if g.shared and not any(u.key in used for u in g.units)]


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
    node = packing_node(inv)
    found = packing.pack(node, want, every_gpu=True)
    if isinstance(found, packing.Unpackable):
        for kind, n in found.short.items():
            if not isinstance(kind, GresKind):
                continue
            if have.get(kind, 0) < want[kind]:
                problems.append(
                    f"Slurm has {kind}:{want[kind]} but the node's {inv.source} have "
                    f"{have.get(kind, 0)} such device(s)"
                )
            else:
                problems.append(
                    f"Slurm has {kind}:{want[kind]} but only {want[kind] - n} of them fit the "
                    "GPUs' shared counters together with the rest of Slurm's GRES"
                    + _used_up(str(found))
                )
        if not found.short:
            # everything fits, but not so that each GPU of shared counters is used
            unused = _unused(node, want) or ["some GPU of the node"]
            problems.append(f"no GRES of Slurm uses the GPU(s) of {'; '.join(unused)}")
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
