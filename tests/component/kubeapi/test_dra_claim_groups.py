"""A claim belongs to one group (issue 39, third row), and an allocation writes nothing
when any of its pods is refused (first row), against the sandbox API server.

A ResourceClaim shared by pods of two groups put the second pod on the first job's device
while its own Slurm job held another; when the first job ended, Slurm gave that device to
someone else while the pod still used it. Now a claim reserved by a pod of another group
(another Slurm job) or another scheduler's pod is refused for the second pod,
naming the claim and who holds it; pods of one group share a claim as before."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from bridge.config import DEFAULT_GRES_MAPPING
from bridge.errors import DeviceMismatch, InvalidInput
from bridge.kube.client import KubeClient
from bridge.kube.resources import PODS, RESOURCE_CLAIMS
from bridge.slurm.models import GresAllocation, NodeResources
from bridge.wellknown import LABEL_JOB_ID
from sandbox.cluster import SandboxCluster
from sandbox.controllers import dra_driver
from sandbox.kubeapi.identity import SANDBOX_TOKEN
from scheduler.dra import DEVICE_CLASSES, RESOURCE_SLICES
from tests.clients import kube_for_host
from tests.component.kubeapi.test_dra_allocate_concurrent import NODE, NS, claim, pod
from tests.scheduler_caches import ListingDraAllocator


class OneGpu:
    """Slurm's answer for every job: ``count`` GPUs on the node, indexed from ``first``
    (a slurmd-backed node), or counted (``indexed=False``: an external node)."""

    def __init__(self, count: int = 1, *, indexed: bool = True, first: int = 0) -> None:
        indices = tuple(range(first, first + count)) if indexed else None
        self.gres = GresAllocation(name="gpu", count=count, indices=indices)

    async def get_job_resources(self, job_id: int) -> tuple[NodeResources, ...]:
        return (NodeResources(node=NODE, gres=(self.gres,)),)


@contextlib.asynccontextmanager
async def cluster(
    srv: SandboxCluster, slurm: OneGpu
) -> AsyncIterator[tuple[KubeClient, ListingDraAllocator]]:
    async with kube_for_host(srv.url, token=SANDBOX_TOKEN, request_timeout=10) as kube:
        for obj in dra_driver.device_classes():
            await kube.create(DEVICE_CLASSES, obj)
        await kube.create(RESOURCE_SLICES, dra_driver.gpu_slice(NODE, 2))
        dra = ListingDraAllocator(
            kube,
            slurm,  # type: ignore[arg-type]
            device_class_gres={"gpu.nvidia.com": "gpu"},
            gres_mapping=DEFAULT_GRES_MAPPING,
        )
        yield kube, dra


async def group_pod(kube: KubeClient, name: str, claim_name: str, job: int | None) -> Any:
    body = pod(name, claim_name)
    if job is not None:
        body["metadata"]["labels"] = {LABEL_JOB_ID: str(job)}
    return await kube.create(PODS, body, NS)


def reserved(c: dict[str, Any]) -> list[str]:
    return [r["name"] for r in (c.get("status") or {}).get("reservedFor") or []]


@pytest.mark.parametrize(
    ("holder_job", "words"),
    [
        pytest.param(7, ["reserved by pods first", "of Slurm job 7"], id="another-job"),
        pytest.param(None, ["of no Slurm job of the bridge"], id="another-scheduler"),
    ],
)
async def test_a_claim_reserved_by_a_pod_of_another_group_is_refused_naming_both(
    srv: SandboxCluster, holder_job: int | None, words: list[str]
) -> None:
    async with cluster(srv, OneGpu()) as (kube, dra):
        await kube.create(RESOURCE_CLAIMS, claim("shared"), NS)
        first = await group_pod(kube, "first", "shared", holder_job)
        assert await dra.allocate(7, [(first, NODE)], {}) == 1
        second = await group_pod(kube, "second", "shared", 8)
        with pytest.raises(InvalidInput) as e:
            await dra.allocate(8, [(second, NODE)], {})
        assert "ResourceClaim 'shared'" in str(e.value)
        assert "not of this pod's group (Slurm job 8)" in str(e.value)
        for w in words:
            assert w in str(e.value), str(e.value)
        assert reserved(await kube.get(RESOURCE_CLAIMS, "shared", NS)) == ["first"]


async def test_pods_of_one_group_share_a_claim_across_allocations(srv: SandboxCluster) -> None:
    async with cluster(srv, OneGpu()) as (kube, dra):
        await kube.create(RESOURCE_CLAIMS, claim("shared"), NS)
        first = await group_pod(kube, "first", "shared", 7)
        second = await group_pod(kube, "second", "shared", 7)
        assert await dra.allocate(7, [(first, NODE)], {}) == 1
        # a later allocation of the same group (a hetjob's other component, a retry)
        assert await dra.allocate(7, [(second, NODE)], {}) == 1
        c = await kube.get(RESOURCE_CLAIMS, "shared", NS)
        assert reserved(c) == ["first", "second"]
        assert [r["device"] for r in c["status"]["allocation"]["devices"]["results"]] == ["gpu-0"]


@pytest.mark.parametrize("indexed", [True, False], ids=["indexed", "counted"])
async def test_an_allocation_with_one_pod_refused_writes_nothing(
    srv: SandboxCluster, indexed: bool
) -> None:
    # Slurm gave the job one GPU on the node; its two pods ask one each
    async with cluster(srv, OneGpu(indexed=indexed)) as (kube, dra):
        pods = []
        for i in range(2):
            await kube.create(RESOURCE_CLAIMS, claim(f"c{i}"), NS)
            pods.append(await group_pod(kube, f"p{i}", f"c{i}", 7))
        with pytest.raises(DeviceMismatch):
            await dra.allocate(7, [(p, NODE) for p in pods], {})
        for i in range(2):
            assert not (await kube.get(RESOURCE_CLAIMS, f"c{i}", NS)).get("status")


async def test_a_claim_left_allocated_by_an_earlier_job_of_the_pod_is_allocated_afresh(
    srv: SandboxCluster,
) -> None:
    # job 7 gave the pod GPU 1 and was given back before the pod was bound; job 8, on the
    # same node, has GPU 0 (GPU 1 may be another job's now): the claim follows job 8
    slurm = OneGpu(first=1)
    async with cluster(srv, slurm) as (kube, dra):
        await kube.create(RESOURCE_CLAIMS, claim("mine"), NS)
        p = await group_pod(kube, "p", "mine", 7)
        assert await dra.allocate(7, [(p, NODE)], {}) == 1
        slurm.gres = OneGpu(first=0).gres
        assert await dra.allocate(8, [(p, NODE)], {}) == 1
        c = await kube.get(RESOURCE_CLAIMS, "mine", NS)
        assert [r["device"] for r in c["status"]["allocation"]["devices"]["results"]] == ["gpu-0"]
        assert reserved(c) == ["p"]
