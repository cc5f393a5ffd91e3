"""What DRA drivers would publish on the sandbox's nodes: the DeviceClasses and one
ResourceSlice per node and driver, as NVIDIA's GPU driver (``gpu.nvidia.com``, devices
``gpu-<i>`` with attribute ``index``) and the DRA CPU driver (``dra.cpu``, devices
``cpudev<NNN>`` with ``dra.cpu/cpuID``, ``coreID``, ``socketID``) publish them.

The CPU layout follows the Slurm sandbox's nodes: ``CPUs=N`` only, so Slurm counts N
sockets of one core each (core ``i`` of a core bitmap is CPU ``i``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

GPU_DRIVER = "gpu.nvidia.com"
CPU_DRIVER = "dra.cpu"

Obj = dict[str, Any]


def device_classes() -> list[Obj]:
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{name}"'}}]},
        }
        for name in (GPU_DRIVER, CPU_DRIVER)
    ]


def _slice(node: str, driver: str, devices: list[Obj]) -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver.replace('.', '-')}"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
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
