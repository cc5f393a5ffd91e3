"""What DRA drivers would publish on the sandbox's nodes: the DeviceClasses and one
ResourceSlice per node and driver, as NVIDIA's GPU driver (``gpu.nvidia.com``, devices
``gpu-<i>`` with attributes ``type: gpu`` and ``index``) and the DRA CPU driver
(``dra.cpu``, devices ``cpudev<NNN>`` with ``dra.cpu/cpuID``, ``coreID``, ``socketID``)
publish them.

**MIG** (:func:`mig_slices`, :func:`mig_pool` for a sandbox MIG node's layout): NVIDIA's
driver on a node whose GPUs are cut into MIG slices, in either form it publishes.
Dynamic (partitionable devices, KEP-4815): per GPU a counter set ``gpu-<i>-counter-set``
(``multiprocessors``, ``memory``, one ``memory-slice-<k>`` of 1 per memory slice); the
full GPU ``gpu-<i>`` consumes all of it, and every placement of every profile of the GPU
model (bridge/devices/mig.py ``NVIDIA_MIG_GPUS``: NVIDIA's placement table) is a device
consuming its share and its memory slices. Static: only the instances of the layout
(where they sit on the GPU), without counters or full device. Devices are named in one
of NVIDIA's three schemes (``gpu-0-mig-1g10gb-19-3``, ``gpu-0-mig-19-3-1``,
``gpu-0-mig-3g40gb-4-7``), with attributes ``type: mig``, ``profile``, ``parentUUID`` and
``parentIndex`` or (NVIDIA's current driver) ``parentMinor``, and the sandbox's own
``placement`` unless it is NVIDIA's current form. As a real 1.36 API server requires,
the counter sets are in their own ResourceSlice of the pool (``sharedCounters`` and
``devices`` never share a slice; at most 64 devices and 8 counter sets a slice). The
DeviceClasses ``gpu.nvidia.com`` and ``mig.nvidia.com`` select ``type == "gpu"`` and
``"mig"``.

The CPU layout follows the Slurm sandbox's nodes: ``CPUs=N`` only, so Slurm counts N
sockets of one core each (core ``i`` of a core bitmap is CPU ``i``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from bridge.devices.mig import MigGpu, MigProfile, nvidia_mig_gpu
from bridge.errors import ConfigError
from sandbox.slurm.mig import MIG_PROFILE, MigLayout

GPU_DRIVER = "gpu.nvidia.com"
CPU_DRIVER = "dra.cpu"

Obj = dict[str, Any]


MIG_CLASS = "mig.nvidia.com"
DEVICES_WITH_COUNTERS_MAX = 64  # resource.k8s.io/v1: devices per slice when any consumes counters
COUNTER_SETS_MAX = 8  # counter sets per slice


def _class(name: str, expression: str, extended: str | None = None) -> Obj:
    spec: Obj = {"selectors": [{"cel": {"expression": expression}}]}
    if extended:
        spec["extendedResourceName"] = extended
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": spec,
    }


def _typed(kind: str) -> str:
    return f'device.driver == "{GPU_DRIVER}" && device.attributes["{GPU_DRIVER}"].type == "{kind}"'


def device_classes() -> list[Obj]:
    """``gpu.nvidia.com`` (full GPUs), ``mig.nvidia.com`` (MIG slices) and ``dra.cpu``,
    with the selectors NVIDIA's and the CPU driver's charts install."""
    return [
        _class(GPU_DRIVER, _typed("gpu")),
        _class(MIG_CLASS, _typed("mig")),
        _class(CPU_DRIVER, f'device.driver == "{CPU_DRIVER}"'),
    ]


def mig_profile_class(profile: str, extended_resource: str | None = None) -> Obj:
    """A DeviceClass of one MIG profile (``mig-1g.10gb.nvidia.com``), optionally the DRA
    extended-resource form (``spec.extendedResourceName``)."""
    return _class(
        f"mig-{profile}.nvidia.com",
        f'{_typed("mig")} && device.attributes["{GPU_DRIVER}"].profile == "{profile}"',
        extended_resource,
    )


def _slice(node: str, driver: str, devices: list[Obj], *, count: int = 1, suffix: str = "") -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver.replace('.', '-')}{suffix}"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": count},
            "devices": devices,
        },
    }


def gpu_slice(node: str, gpus: int) -> Obj:
    return _slice(
        node,
        GPU_DRIVER,
        [
            {
                "name": f"gpu-{i}",
                "attributes": {
                    "type": {"string": "gpu"},
                    "index": {"int": i},
                    "uuid": {"string": f"GPU-{node}-{i}"},
                    "productName": {"string": "Sandbox GPU"},
                },
            }
            for i in range(gpus)
        ],
    )


def cpu_slice(node: str, cpus: int) -> Obj:
    return _slice(
        node,
        CPU_DRIVER,
        [
            {
                "name": f"cpudev{i:03d}",
                "attributes": {
                    f"{CPU_DRIVER}/cpuID": {"int": i},
                    f"{CPU_DRIVER}/coreID": {"int": 0},
                    f"{CPU_DRIVER}/socketID": {"int": i},
                },
            }
            for i in range(cpus)
        ],
    )


def cpu_group_slice(node: str, cpus: int) -> Obj:
    """The DRA CPU driver in grouped mode, ``groupBy: machine``: one shareable device
    with consumable capacity ``dra.cpu/cpu``."""
    return _slice(
        node,
        CPU_DRIVER,
        [
            {
                "name": "cpudevmachine",
                "allowMultipleAllocations": True,
                "attributes": {f"{CPU_DRIVER}/numCPUs": {"int": cpus}},
                "capacity": {f"{CPU_DRIVER}/cpu": {"value": str(cpus)}},
            }
        ],
    )


def node_slices(nodes: Iterable[str], *, cpus: int, gpus: int) -> list[Obj]:
    """A GPU slice (when ``gpus``) and a CPU slice per node."""
    out = []
    for n in nodes:
        if gpus:
            out.append(gpu_slice(n, gpus))
        out.append(cpu_slice(n, cpus))
    return out


@dataclass(frozen=True)
class MigPlacements:
    """Where one MIG profile may be cut from a GPU: the profile and its counters (from the
    bridge's NVIDIA table, :data:`bridge.devices.mig.NVIDIA_MIG_GPUS`), its GPU-instance
    profile id, and the memory-slice starts it may be placed at."""

    profile: MigProfile
    profile_id: int
    starts: tuple[int, ...]


# A100-SXM4-80GB / H100-80GB (7 compute slices of 14 SMs, 8 memory slices of 10 GiB)
A100_80GB = nvidia_mig_gpu("A100-80GB")
SM_PER_SLICE = 14
MEMORY_SLICE_GIB = 10


def placements(name: str, profile_id: int, starts: tuple[int, ...]) -> MigPlacements:
    """``name``'s placements on an A100-80GB, its counters from the bridge's table."""
    return MigPlacements(A100_80GB.profile(name), profile_id, starts)


def model_placements(model: MigGpu) -> tuple[MigPlacements, ...]:
    """Every placement of every profile of ``model``, as its table has them (what
    ``nvidia-smi mig -lgipp`` lists on a real GPU)."""
    return tuple(MigPlacements(p, p.profile_id, p.starts) for p in model.profiles)


A100_80GB_PROFILES = model_placements(A100_80GB)

# How NVIDIA's driver has named a MIG device over its versions (``--mig-naming``)
NAMING_ID_START_SIZE = "id-start-size"  # gpu-<minor>-mig-<giProfileId>-<start>-<size>
NAMING_PROFILE_ID_START = "profile-id-start"  # gpu-<minor>-mig-<profile>-<giProfileId>-<start>
NAMING_PROFILE_START_END = "profile-start-end"  # gpu-<minor>-mig-<profile>-<start>[-<end>]
NAMINGS = (NAMING_PROFILE_ID_START, NAMING_ID_START_SIZE, NAMING_PROFILE_START_END)
PUBLISH_DYNAMIC = "dynamic"  # every placement, with counters (KEP-4815)
PUBLISH_STATIC = "static"  # only the instances the admin created, no counters
PUBLISHES = (PUBLISH_DYNAMIC, PUBLISH_STATIC)


def _counters(sms: int, mem_gib: int, slices: Iterable[int]) -> dict[str, Obj]:
    out: dict[str, Obj] = {
        "multiprocessors": {"value": str(sms)},
        "memory": {"value": f"{mem_gib}Gi"},
    }
    for k in slices:
        out[f"memory-slice-{k}"] = {"value": "1"}
    return out


def mig_device_name(
    gpu: int,
    profile: str,
    profile_id: int,
    start: int,
    *,
    size: int = 1,
    naming: str = NAMING_PROFILE_ID_START,
) -> str:
    """NVIDIA's name of a MIG placement under ``naming``: ``gpu-0-mig-1g10gb-19-3``
    (the default), ``gpu-0-mig-19-3-1``, ``gpu-0-mig-3g40gb-4-7``."""
    short = profile.replace(".", "")
    if naming == NAMING_ID_START_SIZE:
        return f"gpu-{gpu}-mig-{profile_id}-{start}-{size}"
    if naming == NAMING_PROFILE_START_END:
        return f"gpu-{gpu}-mig-{short}-{start}" + (f"-{start + size - 1}" if size > 1 else "")
    return f"gpu-{gpu}-mig-{short}-{profile_id}-{start}"


def counter_set_name(gpu: int) -> str:
    return f"gpu-{gpu}-counter-set"


@dataclass(frozen=True)
class MigPublish:
    """How the stand-in publishes a node's MIG GPUs: ``dynamic`` (every placement of
    every profile, with counters) or ``static`` (the instances of ``layout`` only, no
    counters, no full device), the naming scheme, and the attribute naming the parent GPU
    (``parentIndex`` or ``parentMinor``); ``placement``: also publish the attribute
    ``placement`` (the sandbox's own, which NVIDIA's driver does not)."""

    publish: str = PUBLISH_DYNAMIC
    naming: str = NAMING_PROFILE_ID_START
    parent_attr: str = "parentIndex"
    placement: bool = True


NVIDIA_CURRENT = MigPublish(PUBLISH_DYNAMIC, NAMING_PROFILE_START_END, "parentMinor", False)


def _mig_device(
    g: int,
    uuid: str,
    p: MigProfile,
    profile_id: int,
    start: int,
    form: MigPublish,
    cset: str | None,
) -> Obj:
    attributes: Obj = {
        "type": {"string": "mig"},
        "profile": {"string": p.name},
        "parentUUID": {"string": uuid},
        form.parent_attr: {"int": g},
        "productName": {"string": "Sandbox GPU"},
    }
    if form.placement:
        attributes["placement"] = {"int": start}
    device: Obj = {
        "name": mig_device_name(g, p.name, profile_id, start, size=p.memory, naming=form.naming),
        "attributes": attributes,
        "capacity": {
            "multiprocessors": {"value": str(p.compute * SM_PER_SLICE)},
            "memory": {"value": f"{p.memory * MEMORY_SLICE_GIB}Gi"},
        },
    }
    if cset is None:  # static: a created instance, its own uuid, placement as capacity
        attributes["uuid"] = {"string": f"MIG-{uuid}-{start}"}
        for k in range(start, start + p.memory):
            device["capacity"][f"memorySlice{k}"] = {"value": "1"}
    else:
        device["consumesCounters"] = [
            {
                "counterSet": cset,
                "counters": _counters(
                    p.compute * SM_PER_SLICE,
                    p.memory * MEMORY_SLICE_GIB,
                    range(start, start + p.memory),
                ),
            }
        ]
    return device


def mig_slices(
    node: str,
    gpus: int,
    *,
    profiles: Sequence[MigPlacements] | None = None,
    full_gpus: int = 0,
    model: MigGpu = A100_80GB,
    form: MigPublish = MigPublish(),
    static: Sequence[Sequence[tuple[str, int]]] = (),
) -> list[Obj]:
    """The GPU driver's pool on a node with ``full_gpus`` GPUs that are not partitionable
    (``gpu-0`` ...) and then ``gpus`` MIG GPUs of ``model``. Dynamic (``form``): a slice
    of devices (the full GPUs, and each partitionable GPU with every placement of
    ``profiles``, default all of the model's, all consuming counters) and a slice of the
    partitionable GPUs' counter sets. Static: each MIG GPU's instances ``static[i]``
    (profile, start), without counters. A mixed node is ``full_gpus=1, gpus=1``."""
    devices: list[Obj] = list(gpu_slice(node, full_gpus)["spec"]["devices"])
    first_gpu = full_gpus
    counter_sets: list[Obj] = []
    full_sms = model.compute * SM_PER_SLICE
    full_mem = model.memory * MEMORY_SLICE_GIB
    cut = model_placements(model) if profiles is None else tuple(profiles)
    for g in range(first_gpu, first_gpu + gpus):
        uuid = f"GPU-{node}-{g}"
        if form.publish == PUBLISH_STATIC:
            for name, start in static[g - first_gpu]:
                p = model.profile(name)
                devices.append(_mig_device(g, uuid, p, p.profile_id, start, form, None))
            continue
        cset = counter_set_name(g)
        counter_sets.append(
            {"name": cset, "counters": _counters(full_sms, full_mem, range(model.memory))}
        )
        devices.append(
            {
                "name": f"gpu-{g}",
                "attributes": {
                    "type": {"string": "gpu"},
                    "index": {"int": g},
                    "uuid": {"string": uuid},
                    "productName": {"string": "Sandbox GPU"},
                },
                "capacity": {"memory": {"value": f"{full_mem}Gi"}},
                "consumesCounters": [
                    {
                        "counterSet": cset,
                        "counters": _counters(full_sms, full_mem, range(model.memory)),
                    }
                ],
            }
        )
        for pl in cut:
            for start in pl.starts:
                devices.append(_mig_device(g, uuid, pl.profile, pl.profile_id, start, form, cset))
    # a slice holds at most 64 devices that consume counters, and 8 counter sets
    step = DEVICES_WITH_COUNTERS_MAX
    chunks = [devices[i : i + step] for i in range(0, len(devices), step)]
    sets = [
        counter_sets[i : i + COUNTER_SETS_MAX]
        for i in range(0, len(counter_sets), COUNTER_SETS_MAX)
    ]
    count = len(chunks) + len(sets)
    out = [
        _slice(node, GPU_DRIVER, chunk, count=count, suffix=f"-{k}" if k else "")
        for k, chunk in enumerate(chunks)
    ]
    for k, part in enumerate(sets):
        counters = _slice(node, GPU_DRIVER, [], count=count, suffix=f"-counters{k or ''}")
        del counters["spec"]["devices"]
        counters["spec"]["sharedCounters"] = part
        out.append(counters)
    return out


def mig_pool(
    node: str,
    layout: MigLayout,
    model: MigGpu = A100_80GB,
    *,
    publish: str = PUBLISH_DYNAMIC,
    naming: str = NAMING_PROFILE_ID_START,
) -> list[Obj]:
    """The stand-in's pool of a sandbox MIG node (``up --mig-layout/--mig-publish/
    --mig-naming``): its whole GPUs (first in the layout) and its MIG GPUs of ``model``,
    static (the layout's instances where the packer places them) or dynamic (every
    placement); NVIDIA's current scheme (``profile-start-end``) names the parent GPU by
    ``parentMinor`` and publishes no ``placement``, as NVIDIA's driver does."""
    whole = sum(1 for g in layout.gpus if len(g) == 1 and not MIG_PROFILE.fullmatch(g[0]))
    if any(len(g) == 1 and not MIG_PROFILE.fullmatch(g[0]) for g in layout.gpus[whole:]):
        raise ConfigError("mig_layout", f"{layout}: the stand-in needs the whole GPUs first")
    current = naming == NAMING_PROFILE_START_END
    form = MigPublish(
        publish, naming, "parentMinor" if current else "parentIndex", placement=not current
    )
    placed = layout.placements(model)[whole:]
    return mig_slices(node, len(placed), full_gpus=whole, model=model, form=form, static=placed)
