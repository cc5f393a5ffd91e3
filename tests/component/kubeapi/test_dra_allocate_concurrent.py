"""DRA allocation of several jobs at once (the scheduler's workers run in parallel, and
jobs of several groups start on one node together): each allocation reads what the claims
hold, picks and writes before the next one reads, so two claims never get one device.
Without that, every job started together on an external node (Slurm only counts its
GPUs) gave its claim the same lowest free device."""

from __future__ import annotations

import asyncio
from typing import Any

from bridge.config import DEFAULT_GRES_MAPPING
from bridge.kube.resources import PODS, RESOURCE_CLAIMS
from bridge.slurm.models import GresAllocation, NodeResources
from sandbox.cluster import SandboxCluster
from sandbox.controllers import dra_driver
from sandbox.kubeapi.identity import SANDBOX_TOKEN
from scheduler.dra import DEVICE_CLASSES, RESOURCE_SLICES
from tests.clients import kube_for_host
from tests.scheduler_caches import ListingDraAllocator

NS = "default"
NODE = "n1"
JOBS = 4


class CountingSlurm:
    """Slurm's answer for every job: one GPU on the node, counted (an external node: no
    index), so each claim gets a free device of the class."""

    async def get_job_resources(self, job_id: int) -> tuple[NodeResources, ...]:
        await asyncio.sleep(0)
        return (NodeResources(node=NODE, gres=(GresAllocation(name="gpu", count=1),)),)


def claim(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
            }
        },
    }


def pod(name: str, claim_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "schedulerName": "slurm-bridge-scheduler",
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}],
            "containers": [
                {"name": "c", "image": "pause", "resources": {"claims": [{"name": "gpu"}]}}
            ],
        },
    }


async def test_jobs_allocated_at_once_on_one_node_never_get_the_same_device(
    srv: SandboxCluster,
) -> None:
    async with kube_for_host(srv.url, token=SANDBOX_TOKEN, request_timeout=10) as kube:
        for obj in dra_driver.device_classes():
            await kube.create(DEVICE_CLASSES, obj)
        await kube.create(RESOURCE_SLICES, dra_driver.gpu_slice(NODE, JOBS))
        pods = []
        for i in range(JOBS):
            await kube.create(RESOURCE_CLAIMS, claim(f"c{i}"), NS)
            pods.append(await kube.create(PODS, pod(f"p{i}", f"c{i}"), NS))
        dra = ListingDraAllocator(
            kube,
            CountingSlurm(),  # type: ignore[arg-type]
            device_class_gres={"gpu.nvidia.com": "gpu"},
            gres_mapping=DEFAULT_GRES_MAPPING,
        )
        written = await asyncio.gather(
            *(dra.allocate(i, [(p, NODE)], {}) for i, p in enumerate(pods))
        )
        assert written == [1] * JOBS
        devices = []
        for i in range(JOBS):
            c = await kube.get(RESOURCE_CLAIMS, f"c{i}", NS)
            devices += [r["device"] for r in c["status"]["allocation"]["devices"]["results"]]
        assert sorted(devices) == [f"gpu-{i}" for i in range(JOBS)], devices
