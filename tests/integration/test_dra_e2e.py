"""DRA end to end against real Slurm 26.05: the pods' ResourceClaims name exactly the
devices Slurm allocated (GRES index on slurmd-backed nodes, core bitmap for dra.cpu), or
free devices where Slurm only counts (GPUs on external nodes); gangs on one node get
distinct devices; users' claim templates are allocated; a restart mid-allocation leaves no
half-written claim; the bridge's controller releases a finished pod's claims."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bridge.devices.allocation import parse_cpuset
from bridge.errors import SlurmError
from bridge.kube.resources import EVENTS
from bridge.kube.resources import PODS as PODS_RES
from bridge.models import JobSpec
from bridge.wellknown import (
    CLAIM_DELETE_PROTECTION,
    FINALIZER,
    LABEL_POD_GROUP,
    slurmjob_annotation,
)
from sandbox.controllers import dra_driver as sandbox_dra
from scheduler.dra import CLAIM_TEMPLATES, DEVICE_CLASSES, RESOURCE_CLAIMS, RESOURCE_SLICES
from tests.integration.bridge_harness import (
    NS,
    Bridge,
    create_podgroup,
    job_of,
    pod,
    running_bridge,
)
from tests.integration.conftest import SlurmSandbox

pytestmark = pytest.mark.slurm

GPU = "deviceclass.resource.kubernetes.io/gpu.nvidia.com"
CPU = "deviceclass.resource.kubernetes.io/dra.cpu"
GPU_CLASS = sandbox_dra.GPU_DRIVER
ONE_GPU = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS}}]}}


def allocated(pool: str, device: str, node: str | None = None) -> dict[str, Any]:
    """A claim status holding ``device`` of ``pool`` (on ``node``), as an allocator writes it."""
    alloc: dict[str, Any] = {
        "devices": {
            "results": [{"request": "gpu", "driver": GPU_CLASS, "pool": pool, "device": device}]
        }
    }
    if node is not None:
        term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        alloc["nodeSelector"] = {"nodeSelectorTerms": [term]}
    return alloc


@contextlib.asynccontextmanager
async def dra_bridge(sandbox: SlurmSandbox, tmp_path: Path, **kw: Any) -> AsyncIterator[Bridge]:
    """The bridge, with the slurmd-backed nodes as Kubernetes nodes too, and every node's
    GPU and CPU ResourceSlices published as the drivers would (``kw``: to running_bridge)."""
    async with running_bridge(sandbox, tmp_path, **kw) as b:
        for n in sandbox.slurmd_nodes:
            b.api.api.set_node_ready(n)
        await b.sched.refresh_slurm_nodes()
        for obj in sandbox_dra.device_classes():
            await b.kube.create(DEVICE_CLASSES, obj)
        nodes = [*sandbox.external_nodes, *sandbox.slurmd_nodes]
        for obj in sandbox_dra.node_slices(nodes, cpus=sandbox.node_cpus, gpus=sandbox.node_gpus):
            await b.kube.create(RESOURCE_SLICES, obj)
        yield b


def dra_pod(
    name: str,
    *,
    requests: dict[str, str],
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    cpu: bool = True,
) -> dict[str, Any]:
    p = pod(name, annotations=annotations, labels=labels)
    res = p["spec"]["containers"][0]["resources"]["requests"]
    if not cpu:
        res.pop("cpu")
    res.update(requests)
    return p


async def extended_claim(b: Bridge, name: str) -> dict[str, Any]:
    async def named() -> str:
        st = ((await b.get_pod(name)).get("status") or {}).get("extendedResourceClaimStatus")
        return str((st or {}).get("resourceClaimName") or "")

    claim = await b.wait_for(f"{name}'s extended-resource claim", named)
    return await b.kube.get(RESOURCE_CLAIMS, claim, NS)


def devices(claim: dict[str, Any]) -> list[str]:
    return [r["device"] for r in claim["status"]["allocation"]["devices"]["results"]]


def reserved_for(claim: dict[str, Any]) -> list[str]:
    return [r["name"] for r in claim["status"].get("reservedFor") or []]


async def test_gpu_pod_gets_slurms_index_on_a_slurmd_node(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    async with dra_bridge(sandbox, tmp_path) as b:
        # Slurm batch jobs (no claims) hold GPU 0 of every slurmd node: Kubernetes sees
        # gpu-0 free, but Slurm gives the pod index 1, and the claim must say gpu-1.
        batch: list[int] = []
        try:
            for n in sandbox.slurmd_nodes:
                others = tuple(o for o in sandbox.slurmd_nodes if o != n)
                spec = JobSpec(
                    name=f"dra-hold-{n}",
                    partition=sandbox.batch_partition,
                    min_nodes=1,
                    tasks=1,
                    memory_per_node_mib=500,
                    exclusive=False,
                    tres_per_node="gres/gpu:1",
                    excluded_nodes=others,
                    external=False,
                    script="#!/bin/sh\nexec sleep 300\n",
                )
                batch.append(await b.slurm.submit(spec))

            async def holding() -> bool:
                jobs = [await b.slurm.get_job(j) for j in batch]
                return all(j.state.primary == "RUNNING" for j in jobs)

            await b.wait_for("the batch jobs hold GPU 0", holding)
            shared = {
                slurmjob_annotation("partition"): sandbox.batch_partition,
                slurmjob_annotation("exclusive"): "false",
            }
            await b.kube.create(PODS_RES, dra_pod("g", requests={GPU: "1"}, annotations=shared), NS)
            node = await b.bound("g")
            assert node in sandbox.slurmd_nodes
            (res,) = await b.slurm.get_job_resources(job_of(await b.get_pod("g")))
            (gres,) = res.gres
            assert gres.indices == (1,)
            claim = await extended_claim(b, "g")
            assert devices(claim) == ["gpu-1"]
            assert reserved_for(claim) == ["g"]
            terms = claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"]
            assert terms[0]["matchFields"][0]["values"] == [node]
        finally:
            for j in batch:
                with contextlib.suppress(SlurmError):
                    await b.slurm.cancel(j)


async def test_gpu_pod_on_an_external_node_gets_a_free_device(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    async with dra_bridge(sandbox, tmp_path) as b:
        # gpu-0 of every external node is held by another claim
        for i, n in enumerate(sandbox.external_nodes):
            name = f"held-{i}"
            await b.kube.create(RESOURCE_CLAIMS, {"metadata": {"name": name}, "spec": ONE_GPU}, NS)
            await b.kube.patch(
                RESOURCE_CLAIMS,
                name,
                {"status": {"allocation": allocated(n, "gpu-0")}},
                namespace=NS,
                subresource="status",
            )
        await b.kube.create(PODS_RES, dra_pod("e", requests={GPU: "1"}), NS)
        node = await b.bound("e")
        assert node in sandbox.external_nodes
        (res,) = await b.slurm.get_job_resources(job_of(await b.get_pod("e")))
        assert res.gres[0].indices is None  # Slurm only counts on external nodes
        claim = await extended_claim(b, "e")
        assert devices(claim) == ["gpu-1"]
        # the pod ends: kube-controller-manager's stand-in deletes its generated claim
        await b.kube.patch_pod_status(
            NS, "e", {"status": {"phase": "Succeeded"}}, patch_type="merge"
        )

        async def claim_gone() -> bool:
            names = [c["metadata"]["name"] for c in (await b.kube.list(RESOURCE_CLAIMS, NS)).items]
            return claim["metadata"]["name"] not in names

        await b.wait_for("the extended-resource claim deleted", claim_gone)


async def one_node_pair(b: Bridge, name: str) -> None:
    """A PodGroup of 2 that Slurm places on ONE shared node (both pods on it)."""
    shared = {slurmjob_annotation("exclusive"): "false", slurmjob_annotation("max-nodes"): "1"}
    await create_podgroup(b, name, 2, annotations=shared)


async def test_two_pod_gang_on_one_two_gpu_node_gets_distinct_devices(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    async with dra_bridge(sandbox, tmp_path) as b:
        await one_node_pair(b, "gang")
        for i in range(2):
            await b.kube.create(
                PODS_RES,
                dra_pod(f"gang-{i}", requests={GPU: "1"}, labels={LABEL_POD_GROUP: "gang"}),
                NS,
            )
        nodes = {await b.bound(f"gang-{i}") for i in range(2)}
        assert len(nodes) == 1
        got = [devices(await extended_claim(b, f"gang-{i}")) for i in range(2)]
        assert sorted(d for ds in got for d in ds) == ["gpu-0", "gpu-1"]


async def test_pod_with_a_user_claim_template_is_allocated(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    async with dra_bridge(sandbox, tmp_path) as b:
        await b.kube.create(
            CLAIM_TEMPLATES,
            {
                "metadata": {"name": "one-gpu"},
                "spec": {"spec": ONE_GPU},
            },
            NS,
        )
        p = pod("t", annotations={slurmjob_annotation("exclusive"): "false"})
        p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
        p["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
        await b.kube.create(PODS_RES, p, NS)
        node = await b.bound("t")
        (st,) = (await b.get_pod("t"))["status"]["resourceClaimStatuses"]
        claim = await b.kube.get(RESOURCE_CLAIMS, st["resourceClaimName"], NS)
        assert len(devices(claim)) == 1
        assert claim["status"]["allocation"]["devices"]["results"][0]["pool"] == node
        assert reserved_for(claim) == ["t"]
        (res,) = await b.slurm.get_job_resources(job_of(await b.get_pod("t")))
        assert [(g.name, g.count) for g in res.gres] == [("gpu", 1)]


DRA_PLURALS = ("deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates")
NAMED_READ = re.compile(rf"/({'|'.join(DRA_PLURALS)})/[^/]+$")


async def test_a_dra_group_is_scheduled_without_listing_any_dra_object(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    """Counted at the API server: DeviceClasses, ResourceSlices, ResourceClaims and the
    claim templates a group's pods name come from the scheduler's watch-fed copies, so
    neither the cycles nor the binds list resource.k8s.io objects, and the snapshot reads
    none (the template is not read by name either)."""
    async with dra_bridge(sandbox, tmp_path) as b:
        copies = b.sched.dra.cache

        async def synced() -> bool:
            listed = {"deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates"}
            return listed <= copies.synced

        await b.wait_for("the scheduler's DRA copies listed", synced)
        await b.kube.create(
            CLAIM_TEMPLATES, {"metadata": {"name": "counted"}, "spec": {"spec": ONE_GPU}}, NS
        )
        log = b.api.request_log
        log.clear()
        p = pod("by-name", annotations={slurmjob_annotation("exclusive"): "false"})
        p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "counted"}]
        p["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
        await b.kube.create(PODS_RES, p, NS)
        await b.kube.create(PODS_RES, dra_pod("extended", requests={GPU: "1"}), NS)
        for name in ("by-name", "extended"):
            await b.bound(name)

        reads = [
            e
            for e in log.entries(method="GET", path=r"/apis/resource\.k8s\.io/")
            if "watch" not in e.query
        ]
        lists = [f"{e.path}?{e.query}" for e in reads if not NAMED_READ.search(e.path)]
        assert lists == []
        assert not any("/resourceclaimtemplates" in e.path for e in reads)


async def test_dra_cpu_claim_names_exactly_the_cpus_of_slurms_core_bitmap(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    async with dra_bridge(sandbox, tmp_path) as b:
        shared = {slurmjob_annotation("exclusive"): "false"}
        await b.kube.create(
            PODS_RES, dra_pod("c", requests={CPU: "3"}, cpu=False, annotations=shared), NS
        )
        await b.bound("c")
        (res,) = await b.slurm.get_job_resources(job_of(await b.get_pod("c")))
        assert len(res.cores) == 3
        claim = await extended_claim(b, "c")
        assert devices(claim) == [f"cpudev{core:03d}" for core in res.cores]


async def test_grouped_cpu_mode_takes_a_share_pinned_to_slurms_cores(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    async with dra_bridge(sandbox, tmp_path) as b:
        for n in sandbox.external_nodes:
            await b.kube.delete(RESOURCE_SLICES, f"{n}-dra-cpu")
            await b.kube.create(RESOURCE_SLICES, sandbox_dra.cpu_group_slice(n, sandbox.node_cpus))
        shared = {slurmjob_annotation("exclusive"): "false"}
        for name in ("g1", "g2"):
            await b.kube.create(
                PODS_RES, dra_pod(name, requests={CPU: "3"}, cpu=False, annotations=shared), NS
            )
        sets = []
        for name in ("g1", "g2"):
            await b.bound(name)
            (res,) = await b.slurm.get_job_resources(job_of(await b.get_pod(name)))
            claim = await extended_claim(b, name)
            (result,) = claim["status"]["allocation"]["devices"]["results"]
            assert result["device"] == "cpudevmachine"
            assert result["consumedCapacity"] == {"dra.cpu/cpu": "3"}
            (cfg,) = claim["status"]["allocation"]["devices"]["config"]
            cpuset = cfg["opaque"]["parameters"]["cpuConfig"]["cpuset"]
            assert parse_cpuset(cpuset) == res.cores
            sets.append((res.node, set(res.cores)))
        if sets[0][0] == sets[1][0]:
            assert not sets[0][1] & sets[1][1]


async def test_restart_mid_allocation_leaves_no_half_written_claim(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    async with dra_bridge(sandbox, tmp_path) as b:
        stuck = asyncio.Event()

        async def crash(*_: Any, **__: Any) -> None:
            stuck.set()  # the claim exists; its status is never written by this scheduler
            await asyncio.Event().wait()

        b.sched.dra._write_status = crash  # type: ignore[method-assign]
        await b.kube.create(PODS_RES, dra_pod("r", requests={GPU: "1"}), NS)
        await asyncio.wait_for(stuck.wait(), 30)
        await b.stop_scheduler()
        (half,) = [
            c
            for c in (await b.kube.list(RESOURCE_CLAIMS, NS)).items
            if c["metadata"]["ownerReferences"][0]["name"] == "r"
        ]
        assert not half.get("status")  # untouched: no allocation, no reservedFor
        await b.start_scheduler()
        await b.bound("r")
        claims = [
            c
            for c in (await b.kube.list(RESOURCE_CLAIMS, NS)).items
            if c["metadata"]["ownerReferences"][0]["name"] == "r"
        ]
        assert [c["metadata"]["name"] for c in claims] == [half["metadata"]["name"]]
        (claim,) = claims
        assert len(devices(claim)) == 1
        assert reserved_for(claim) == ["r"]
        assert (await extended_claim(b, "r"))["metadata"]["name"] == half["metadata"]["name"]


async def test_node_without_slices_gives_a_condition_naming_node_and_driver(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    async with dra_bridge(sandbox, tmp_path) as b:
        for s in (await b.kube.list(RESOURCE_SLICES)).items:
            if s["spec"]["driver"] == GPU_CLASS:
                await b.kube.delete(RESOURCE_SLICES, s["metadata"]["name"])
        await b.kube.create(PODS_RES, dra_pod("n", requests={GPU: "1"}), NS)

        async def said() -> str:
            msg = await b.scheduled_message("n")
            return msg if "no ResourceSlice" in msg else ""

        msg = await b.wait_for("the DRA condition", said)
        assert GPU_CLASS in msg
        assert any(f"node {n}" in msg for n in sandbox.external_nodes)
        assert not (await b.get_pod("n"))["spec"].get("nodeName")
        events = await b.kube.list(EVENTS, NS, field_selector="involvedObject.name=n")
        assert any("no ResourceSlice" in e.get("message", "") for e in events.items)


async def test_claim_left_on_another_node_by_a_cancelled_job_follows_the_pod(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    async with dra_bridge(sandbox, tmp_path) as b:
        await b.kube.create(
            RESOURCE_CLAIMS,
            {
                "metadata": {"name": "mine"},
                "spec": ONE_GPU,
            },
            NS,
        )
        await b.stop_scheduler()  # the pod exists before its claim is written, as after a cancel
        p = pod("f", annotations={slurmjob_annotation("exclusive"): "false"})
        p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "mine"}]
        created = await b.kube.create(PODS_RES, p, NS)
        stale = {"resource": "pods", "name": "f", "uid": created["metadata"]["uid"]}
        await b.kube.patch(
            RESOURCE_CLAIMS,
            "mine",
            {
                "status": {
                    "allocation": allocated("gone", "gpu-0", node="gone"),
                    "reservedFor": [stale],
                }
            },
            namespace=NS,
            subresource="status",
        )
        await b.start_scheduler()
        node = await b.bound("f")
        claim = await b.kube.get(RESOURCE_CLAIMS, "mine", NS)
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        assert result["pool"] == node
        assert reserved_for(claim) == ["f"]


async def test_a_claim_two_pods_of_a_gang_share_is_allocated_once_and_reserved_for_both(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    async with dra_bridge(sandbox, tmp_path) as b:
        await b.kube.create(RESOURCE_CLAIMS, {"metadata": {"name": "shared"}, "spec": ONE_GPU}, NS)
        await one_node_pair(b, "sh")
        for i in range(2):
            p = pod(f"sh-{i}", labels={LABEL_POD_GROUP: "sh"})
            p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "shared"}]
            await b.kube.create(PODS_RES, p, NS)
        nodes = {await b.bound(f"sh-{i}") for i in range(2)}
        claim = await b.kube.get(RESOURCE_CLAIMS, "shared", NS)
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        assert {result["pool"]} == nodes
        assert sorted(reserved_for(claim)) == ["sh-0", "sh-1"]


async def pod_with_claim_mine(b: Bridge, name: str, requests: dict[str, str]) -> None:
    """A pod using the user claim ``mine`` (created here), bound, the claim reserved for it."""
    await b.kube.create(RESOURCE_CLAIMS, {"metadata": {"name": "mine"}, "spec": ONE_GPU}, NS)
    p = dra_pod(name, requests=requests, annotations={slurmjob_annotation("exclusive"): "false"})
    p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "mine"}]
    await b.kube.create(PODS_RES, p, NS)
    await b.bound(name)
    mine = await b.kube.get(RESOURCE_CLAIMS, "mine", NS)
    assert reserved_for(mine) == [name]
    assert CLAIM_DELETE_PROTECTION in mine["metadata"]["finalizers"]


async def claims_now(b: Bridge) -> dict[str, dict[str, Any]]:
    return {c["metadata"]["name"]: c for c in (await b.kube.list(RESOURCE_CLAIMS, NS)).items}


def released(claim: dict[str, Any] | None) -> bool:
    """Reserved for nobody, not allocated, no delete-protection finalizer."""
    return (
        claim is not None
        and not claim.get("status")
        and CLAIM_DELETE_PROTECTION not in (claim["metadata"].get("finalizers") or [])
    )


# The sandbox does not stand in for kube-controller-manager's resourceclaim controller in
# these two: only the bridge's controller can release the claims.
async def test_the_bridges_controller_releases_a_finished_pods_claims_without_kcm(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    async with dra_bridge(sandbox, tmp_path, controller=True, resourceclaim_controller=False) as b:
        await pod_with_claim_mine(b, "done", {GPU: "1"})
        extended = await extended_claim(b, "done")
        assert reserved_for(extended) == ["done"]
        await b.kube.patch_pod_status(
            NS, "done", {"status": {"phase": "Succeeded"}}, patch_type="merge"
        )

        async def all_released() -> bool:
            claims = await claims_now(b)
            return extended["metadata"]["name"] not in claims and released(claims.get("mine"))

        await b.wait_for("the claims released and the generated one deleted", all_released)


async def test_the_bridges_controller_releases_the_claims_of_a_pod_deleted_while_running(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    async with dra_bridge(sandbox, tmp_path, controller=True, resourceclaim_controller=False) as b:
        await pod_with_claim_mine(b, "vanished", {})
        # gone at once, never seen terminal: only its last state names the claim
        await b.kube.remove_finalizer(PODS_RES, "vanished", FINALIZER, NS)
        await b.kube.delete(PODS_RES, "vanished", NS, grace_period_seconds=0)

        async def mine_released() -> bool:
            return released((await claims_now(b)).get("mine"))

        await b.wait_for("the deleted pod's claim released", mine_released)
