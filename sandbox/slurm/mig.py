"""The GPUs of the sandbox's MIG nodes (``up --mig-layout``), pure.

A layout names each GPU of a node, separated by ``,``: a whole GPU by a plain type
(``h100``), a GPU in MIG mode by its instances' profiles joined by ``+``, ``*N`` repeating
one (``3g.40gb+2g.20gb+1g.10gb*2``). The devices are numbered in that order: gres.conf
lists them so (a ``File=`` each), and Slurm's ``IDX`` in ``gres_detail`` is that number,
so the benchmark knows which physical GPU (and so which counters) a held slice is on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from bridge.devices import packing
from bridge.devices.mig import MigGpu
from bridge.errors import ConfigError

MIG_PROFILE = re.compile(r"[0-9]+g\.[0-9]+gb")
_WHOLE_GPU = re.compile(r"[a-z][a-z0-9_]*")
_INSTANCE = re.compile(r"(?P<profile>[0-9]+g\.[0-9]+gb)(?:\*(?P<n>[0-9]+))?")
KEY = "mig_layout"


@dataclass(frozen=True)
class Device:
    """One GRES device of a MIG node: its index (Slurm's ``IDX``), its GPU, its type."""

    index: int
    gpu: int
    type: str

    @property
    def whole(self) -> bool:
        """A whole GPU (not a MIG instance)."""
        return not MIG_PROFILE.fullmatch(self.type)


@dataclass(frozen=True)
class MigLayout:
    """Each GPU of a node as its devices' types, in index order."""

    gpus: tuple[tuple[str, ...], ...]

    @classmethod
    def uniform(cls, profile: str, slices: int) -> MigLayout:
        """One GPU of ``slices`` instances of ``profile`` (``--mig-profile/--mig-slices``)."""
        return cls(((profile,) * slices,))

    @classmethod
    def parse(cls, text: str) -> MigLayout:
        """``h100,3g.40gb+2g.20gb+1g.10gb*2``; ConfigError naming ``mig_layout`` and the
        part at fault."""
        gpus: list[tuple[str, ...]] = []
        for n, part in enumerate(text.split(",")):
            part = part.strip()
            if _WHOLE_GPU.fullmatch(part):
                gpus.append((part,))
                continue
            devices: list[str] = []
            for inst in part.split("+"):
                m = _INSTANCE.fullmatch(inst.strip())
                if not m:
                    raise ConfigError(
                        KEY,
                        f"GPU {n} ({part!r}): {inst!r} is neither a whole GPU's type (h100) "
                        "nor a MIG profile with an optional count (1g.10gb*2)",
                    )
                count = int(m.group("n") or 1)
                if not 1 <= count <= 7:
                    raise ConfigError(KEY, f"GPU {n}: {inst!r} repeats 1..7 times, not {count}")
                devices += [m.group("profile")] * count
            if len(devices) > 7:
                raise ConfigError(KEY, f"GPU {n} ({part!r}): a GPU has at most 7 MIG instances")
            gpus.append(tuple(devices))
        return cls(tuple(gpus))

    def __add__(self, other: MigLayout) -> MigLayout:
        """This node's GPUs, then ``other``'s."""
        return MigLayout(self.gpus + other.gpus)

    def __str__(self) -> str:
        parts = []
        for gpu in self.gpus:
            runs: list[tuple[str, int]] = []
            for t in gpu:
                if runs and runs[-1][0] == t:
                    runs[-1] = (t, runs[-1][1] + 1)
                else:
                    runs.append((t, 1))
            parts.append("+".join(t if n == 1 else f"{t}*{n}" for t, n in runs))
        return ",".join(parts)

    @property
    def devices(self) -> tuple[Device, ...]:
        """Every device of a node in index order."""
        out: list[Device] = []
        for g, types in enumerate(self.gpus):
            out += [Device(len(out) + k, g, t) for k, t in enumerate(types)]
        return tuple(out)

    @property
    def gres(self) -> str:
        """The node's ``Gres=``: ``gpu:h100:1,gpu:3g.40gb:1,gpu:1g.10gb:2`` (types in order
        of first appearance)."""
        counts: dict[str, int] = {}
        for d in self.devices:
            counts[d.type] = counts.get(d.type, 0) + 1
        return ",".join(f"gpu:{t}:{n}" for t, n in counts.items())

    def gres_conf_runs(self) -> tuple[tuple[str, int, int], ...]:
        """``(type, first, last)`` device index runs of one type, for gres.conf lines."""
        runs: list[tuple[str, int, int]] = []
        for d in self.devices:
            if runs and runs[-1][0] == d.type and runs[-1][2] == d.index - 1:
                runs[-1] = (d.type, runs[-1][1], d.index)
            else:
                runs.append((d.type, d.index, d.index))
        return tuple(runs)

    def check(self, model: MigGpu) -> None:
        """Every MIG GPU's instances are ``model``'s profiles, together fit its compute
        and memory slices, and have placements that do not overlap (ConfigError naming
        the GPU and the placement otherwise)."""
        self.placements(model)

    def placements(self, model: MigGpu) -> tuple[tuple[tuple[str, int], ...], ...]:
        """Each GPU's instances as (profile, first memory slice), in the layout's order
        (a whole GPU: ``((type, 0),)``): where the instances sit on a real ``model``,
        found by the bridge's packer over every placement the model allows. ConfigError
        naming the GPU (and the placement short) when they do not fit."""
        out: list[tuple[tuple[str, int], ...]] = []
        for n, types in enumerate(self.gpus):
            if len(types) == 1 and not MIG_PROFILE.fullmatch(types[0]):
                out.append(((types[0], 0),))
                continue
            try:
                profiles = [model.profile(t) for t in types]
            except ConfigError as e:
                raise ConfigError(KEY, f"GPU {n}: {e.reason}") from None
            compute = sum(p.compute for p in profiles)
            memory = sum(p.memory for p in profiles)
            if compute > model.compute or memory > model.memory:
                raise ConfigError(
                    KEY,
                    f"GPU {n} ({'+'.join(types)}) takes {compute} compute and {memory} memory "
                    f"slices; a {model.model} has {model.compute} and {model.memory}",
                )
            out.append(_place(n, types, model))
        return tuple(out)


def model_gpu(model: MigGpu) -> packing.NodeDevices:
    """One GPU of ``model`` with every placement of every profile (what NVIDIA's driver
    publishes for dynamic MIG), for the packer: a unit ``<profile>@<start>`` each."""
    units = [
        packing.Unit(
            f"{p.name}@{start}",
            p.name,
            {("gpu", "compute"): Decimal(p.compute)}
            | {("gpu", f"memory-slice-{k}"): Decimal(1) for k in range(start, start + p.memory)},
            part=True,
            placement=start,
        )
        for p in model.profiles
        for start in p.starts
    ]
    capacity = {("gpu", "compute"): Decimal(model.compute)} | {
        ("gpu", f"memory-slice-{k}"): Decimal(1) for k in range(model.memory)
    }
    return packing.node_of(units, capacity)


def _place(n: int, types: tuple[str, ...], model: MigGpu) -> tuple[tuple[str, int], ...]:
    want: dict[str, int] = {}
    for t in types:
        want[t] = want.get(t, 0) + 1
    found = packing.pack(model_gpu(model), want)
    if isinstance(found, packing.Unpackable):
        raise ConfigError(
            KEY, f"GPU {n} ({'+'.join(types)}): no placement of it fits a {model.model}: {found}"
        )
    left = {t: [int(k.partition("@")[2]) for k in keys] for t, keys in found.devices.items()}
    return tuple((t, left[t].pop(0)) for t in types)
