"""Every MIG layout a user can cut (``python -m tests.bench.fit --mig-layouts random --seed
S``, and the enumeration property test tests/unit/devices/test_mig_enumeration.py): the
bridge's one packer and its claim mapping against random valid nodes, in process.

**The configurations** (:func:`gpu_configs`) are enumerated from NVIDIA's placement table
(bridge/devices/mig.py ``NVIDIA_MIG_GPUS``) by brute force, apart from the packer: every set
of placements whose memory slices do not overlap and whose compute slices fit the model,
one per distinct multiset of profiles. A **node** (:class:`Node`) is a model, optionally
whole GPUs first (``gpu:<whole>``), and one configuration per MIG GPU; Slurm's ``Gres=``
lists the types in gres.conf order (GPU by GPU, as ``nvidia-smi`` lists the instances),
each type's devices together (:meth:`Node.layout`).

**The publication forms** (:data:`FORMS`): NVIDIA's current dynamic MIG (counters in their
own slice, names ``gpu-<minor>-mig-<profile>-<start>[-<end>]``, ``parentMinor``), the
sandbox's (``gpu-<minor>-mig-<profile>-<id>-<start>``, ``parentIndex``, ``placement``),
the oldest scheme (``gpu-<minor>-mig-<id>-<start>-<size>``) and static MIG (only the
instances, no counters).

**The replay** (:func:`replay`): Slurm-style jobs of one device each arrive and end
(seeded); Slurm starts a job when its type has a free index (``IDX`` in Slurm's
numbering, chosen at random among the free ones) or, counting only, a free count; the
bridge maps it with :func:`bridge.devices.allocation.allocate_pod` given the devices the
running jobs hold. Counted: packing failures (the condition False, or the layout not
packed), give-backs (a job Slurm placed that the bridge refused), counter overcommits,
double allocations, jobs given another profile, the time of each packing and each job's
wait (arrival to start, in steps). Times are CPU ms, the least of three runs (a shared
machine's other processes do not count): ``model_ms`` reads the node's ResourceSlices into
the packer's model, ``packing_ms`` packs Slurm's layout on it.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from bridge.config import DEFAULT_GRES_MAPPING
from bridge.devices import packing
from bridge.devices.allocation import (
    DeviceId,
    Ledger,
    SlurmLayout,
    SlurmNodeView,
    allocate_pod,
    node_devices,
    packing_node,
)
from bridge.devices.mig import NVIDIA_MIG_GPUS, MigGpu
from bridge.devices.node_gres import Agreement, GresTable, compare, slice_inventory
from bridge.errors import DeviceAllocationError
from bridge.translate.dra import DeviceRequest
from sandbox.controllers import dra_driver
from sandbox.controllers.dra_driver import (
    NAMING_ID_START_SIZE,
    NVIDIA_CURRENT,
    PUBLISH_STATIC,
    MigPublish,
)

DRIVER = dra_driver.GPU_DRIVER
WHOLE_TYPE = "a100"
TABLE = GresTable.of(DEFAULT_GRES_MAPPING)
FORMS: dict[str, MigPublish] = {
    "nvidia": NVIDIA_CURRENT,
    "sandbox": MigPublish(),
    "oldest": MigPublish(naming=NAMING_ID_START_SIZE),
    "static": MigPublish(PUBLISH_STATIC, parent_attr="parentMinor", placement=False),
}
Config = tuple[tuple[str, int], ...]  # (profile, first memory slice) per instance


@cache
def gpu_configs(model: MigGpu) -> tuple[Config, ...]:
    """Every valid configuration of one GPU of ``model``: one set of placements per
    distinct multiset of profiles (the first found), from the placement table alone."""
    places = [
        (p.name, s, p.compute, frozenset(range(s, s + p.memory)))
        for p in model.profiles
        for s in p.starts
    ]
    found: dict[tuple[str, ...], Config] = {}

    def walk(i: int, chosen: list[tuple[str, int]], compute: int, used: frozenset[int]) -> None:
        if chosen:
            found.setdefault(tuple(sorted(n for n, _ in chosen)), tuple(chosen))
        for j in range(i, len(places)):
            name, start, c, memory = places[j]
            if compute + c <= model.compute and not used & memory:
                walk(j + 1, [*chosen, (name, start)], compute + c, used | memory)

    walk(0, [], 0, frozenset())
    return tuple(sorted(found[k], key=lambda pl: pl[1]) for k in sorted(found))


@dataclass(frozen=True)
class Node:
    """A node: ``whole`` whole GPUs (``gpu:a100``), then MIG GPUs of ``model``."""

    model: MigGpu
    gpus: tuple[Config, ...]
    whole: int = 0
    form: str = "nvidia"

    def layout(self) -> tuple[tuple[str, int], ...]:
        """Slurm's ``Gres=`` in gres.conf order: the whole GPUs, then each GPU's instances
        in placement order; a type listed once, at its first appearance."""
        counts: dict[str, int] = {}
        if self.whole:
            counts[f"gpu:{WHOLE_TYPE}"] = self.whole
        for config in self.gpus:
            for profile, _ in config:
                counts[f"gpu:{profile}"] = counts.get(f"gpu:{profile}", 0) + 1
        return tuple(counts.items())

    def gres(self) -> str:
        return ",".join(f"{k}:{n}" for k, n in self.layout())

    def slices(self, name: str = "n1") -> list[dict[str, Any]]:
        return dra_driver.mig_slices(
            name,
            len(self.gpus),
            full_gpus=self.whole,
            model=self.model,
            form=FORMS[self.form],
            static=self.gpus,
        )

    def profiles(self) -> dict[str, str]:
        return {k: k.partition(":")[2] for k, _ in self.layout() if k != f"gpu:{WHOLE_TYPE}"}

    def __str__(self) -> str:
        gpus = ["+".join(p for p, _ in c) for c in self.gpus]
        return f"{self.model.model}[{self.form}]:" + ",".join([WHOLE_TYPE] * self.whole + gpus)


def random_node(rng: random.Random, most_gpus: int = 8, gpus: int = 0) -> Node:
    """A random valid node: a model, 1..``most_gpus`` GPUs (``gpus``: exactly that many),
    sometimes a whole GPU first, a random configuration each, a random form."""
    model = rng.choice(NVIDIA_MIG_GPUS)
    configs = gpu_configs(model)
    n = gpus or rng.randint(1, most_gpus)
    whole = rng.choice([0, 0, 0, 1]) if n > 1 else 0
    gpus = tuple(rng.choice(configs) for _ in range(n - whole))
    return Node(model, gpus, whole, rng.choice(list(FORMS)))


def every_node(model: MigGpu, gpus: int) -> Iterator[tuple[Config, ...]]:
    """Every node of ``gpus`` MIG GPUs of ``model`` (combinations with repetition)."""
    configs = gpu_configs(model)

    def walk(first: int, acc: tuple[Config, ...]) -> Iterator[tuple[Config, ...]]:
        if len(acc) == gpus:
            yield acc
            return
        for i in range(first, len(configs)):
            yield from walk(i, (*acc, configs[i]))

    yield from walk(0, ())


@dataclass
class Tally:
    nodes: int = 0
    packing_failures: int = 0
    condition_false: int = 0
    givebacks: int = 0
    overcommits: int = 0
    doubles: int = 0
    wrong_profile: int = 0
    jobs: int = 0
    packing_ms: list[float] = field(default_factory=list)
    model_ms: list[float] = field(default_factory=list)
    packing_ms_8: list[float] = field(default_factory=list)
    total_ms_8: list[float] = field(default_factory=list)
    waits: list[int] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def fail(self, node: Node, what: str) -> None:
        if len(self.failures) < 5:
            self.failures.append(f"{node}: {what}")

    @property
    def ok(self) -> bool:
        return not (
            self.packing_failures
            or self.condition_false
            or self.givebacks
            or self.overcommits
            or self.doubles
            or self.wrong_profile
        )


def _cpu_ms(work: Callable[[], object], repeat: int = 3) -> tuple[float, Any]:
    """The least CPU time (ms) of ``repeat`` runs of ``work`` (a shared machine's other
    processes do not count) and its result."""
    best = float("inf")
    out: Any = None
    for _ in range(repeat):
        start = time.process_time()
        out = work()
        best = min(best, (time.process_time() - start) * 1000)
    return best, out


def check_packs(node: Node, tally: Tally) -> None:
    """The packer places the node's layout and the condition is True; the time to read
    the node's devices into the packer's model and to pack Slurm's layout, each."""
    slices = node.slices()
    layout = SlurmLayout.of(node.layout(), node.profiles())
    model_ms, model = _cpu_ms(lambda: packing_node(node_devices(slices, DRIVER), slices, layout))
    pack_ms, found = _cpu_ms(lambda: packing.pack(model, layout.want))
    tally.packing_ms.append(pack_ms)
    tally.model_ms.append(model_ms)
    if len(node.gpus) + node.whole == 8:
        tally.packing_ms_8.append(pack_ms)
        tally.total_ms_8.append(model_ms + pack_ms)
    if isinstance(found, packing.Unpackable):
        tally.packing_failures += 1
        tally.fail(node, f"not packed: {found}")
    inv = slice_inventory(slices, {DRIVER: "gpu"}, TABLE)
    verdict = compare(node.gres(), inv, slurm_node="n1", table=TABLE)
    if verdict.status is not Agreement.COMPATIBLE:
        tally.condition_false += 1
        tally.fail(node, verdict.message)


def _request(key: str, profiles: dict[str, str]) -> DeviceRequest:
    profile = profiles.get(key)
    return DeviceRequest(
        claim="g",
        request="r",
        device_class="mig.nvidia.com" if profile else DRIVER,
        driver=DRIVER,
        gres=key,
        count=1,
        profile=profile,
    )


def replay(node: Node, seed: int, steps: int, tally: Tally, *, indexed: bool = True) -> None:
    """Slurm-style jobs of one device each arriving and ending on ``node`` (seeded)."""
    rng = random.Random(seed)
    slices = node.slices()
    devices = node_devices(slices, DRIVER)
    layout = node.layout()
    profiles = node.profiles()
    first: dict[str, int] = {}
    n = 0
    for key, count in layout:
        first[key] = n
        n += count
    free = {key: set(range(first[key], first[key] + count)) for key, count in layout}
    kinds = [key for key, count in layout for _ in range(count)]
    pending: list[tuple[int, str]] = []
    running: list[tuple[str, int, DeviceId]] = []  # type, index, device
    for step in range(steps):
        if running and rng.random() < 0.4:
            key, idx, _ = running.pop(rng.randrange(len(running)))
            free[key].add(idx)
        else:
            pending.append((step, rng.choice(kinds)))
        still: list[tuple[int, str]] = []
        for arrived, key in pending:
            if not free[key]:
                still.append((arrived, key))
                continue
            idx = rng.choice(sorted(free[key]))
            free[key].discard(idx)
            tally.jobs += 1
            tally.waits.append(step - arrived)
            view = SlurmNodeView(
                gres={key: (idx,) if indexed else None},
                gres_layout=layout,
                counts={key: 1},
            )
            taken = {d for _, _, d in running}
            try:
                got = allocate_pod("n1", [_request(key, profiles)], view, slices, taken, profiles)
            except DeviceAllocationError as e:
                tally.givebacks += 1
                tally.fail(node, f"job of {key} (IDX {idx}) given back: {e}")
                free[key].add(idx)
                continue
            (picked,) = got.values()
            (device,) = picked.devices
            d = next(x for x in devices if x.id == device)
            want = profiles.get(key)
            if (d.profile if d.is_mig else None) != want:
                tally.wrong_profile += 1
                tally.fail(node, f"job of {key} got {device.device}")
            if device in {r for _, _, r in running}:
                tally.doubles += 1
                tally.fail(node, f"{device.device} given twice")
            running.append((key, idx, device))
            over = Ledger.of(devices, slices, {r for _, _, r in running}).overcommitted()
            if over:
                tally.overcommits += 1
                tally.fail(node, f"overcommitted: {over}")
        pending = still


def _pct(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_random(seed: int, nodes: int, steps: int, gpus: int = 0) -> dict[str, Any]:
    """``--mig-layouts random``: ``nodes`` random valid nodes (1-8 GPUs, or ``gpus``;
    every model in the table, mixed forms), each packed, compared, and replayed with
    Slurm's indices and with counts only. The last line of the benchmark is this, as JSON."""
    rng = random.Random(seed)
    tally = Tally()
    started = time.perf_counter()
    for i in range(nodes):
        node = random_node(rng, gpus=gpus)
        tally.nodes += 1
        check_packs(node, tally)
        replay(node, seed * 1000 + i, steps, tally, indexed=True)
        replay(node, seed * 1000 + i, steps, tally, indexed=False)
    return {
        "mig_layouts": "random",
        "seed": seed,
        "mig_nodes": tally.nodes,
        "jobs": tally.jobs,
        "mig_packing_failures": tally.packing_failures,
        "condition_false": tally.condition_false,
        "mig_givebacks": tally.givebacks,
        "counter_overcommits": tally.overcommits,
        "double_allocations": tally.doubles,
        "wrong_profile": tally.wrong_profile,
        "packing_ms_p50": round(statistics.median(tally.packing_ms or [0.0]), 3),
        "packing_ms_p99": round(_pct(tally.packing_ms, 0.99), 3),
        "packing_ms_8gpu_p50": round(statistics.median(tally.packing_ms_8 or [0.0]), 3),
        "packing_ms_8gpu_p99": round(_pct(tally.packing_ms_8, 0.99), 3),
        "model_ms_p50": round(statistics.median(tally.model_ms or [0.0]), 3),
        "model_ms_p99": round(_pct(tally.model_ms, 0.99), 3),
        "model_and_packing_ms_8gpu_p50": round(statistics.median(tally.total_ms_8 or [0.0]), 3),
        "model_and_packing_ms_8gpu_p99": round(_pct(tally.total_ms_8, 0.99), 3),
        "nodes_of_8_gpus": len(tally.packing_ms_8),
        "wait_steps_p50": _pct(tally.waits, 0.5),
        "wait_steps_p99": _pct(tally.waits, 0.99),
        "failures": tally.failures,
        "elapsed_s": round(time.perf_counter() - started, 1),
    }
