"""DRA device taints (KEP-5055) end to end against real Slurm, on the sandbox API server
serving Kubernetes 1.37 (DeviceTaintRule at resource.k8s.io/v1): a GPU tainted NoSchedule
is never given to a claim (an external node, where Slurm counts: the other GPU; a
slurmd node, where Slurm picks the index: the job is given back and the node left for the
group, never the device), and tainting an allocated GPU NoExecute ends its pod's hold as
a drained node does (DisruptionTarget, the pod deleted, the Slurm job ended)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bridge.devices.taints import EVICTION_REASON
from bridge.errors import KubeNotFound, SlurmError
from bridge.kube.resources import DEVICE_TAINT_RULES, EVENTS
from bridge.kube.resources import PODS as PODS_RES
from bridge.models import JobSpec
from bridge.wellknown import slurmjob_annotation
from scheduler.dra import RESOURCE_CLAIMS, RESOURCE_SLICES
from tests.integration.bridge_harness import NS, Bridge, job_of
from tests.integration.conftest import SlurmSandbox
from tests.integration.test_dra_e2e import (
    GPU,
    GPU_CLASS,
    devices,
    dra_bridge,
    dra_pod,
    extended_claim,
)

pytestmark = pytest.mark.slurm

HOT = {"key": "example.com/hot", "effect": "NoSchedule"}
BROKEN = {"key": "example.com/broken", "value": "ecc", "effect": "NoExecute"}


@contextlib.asynccontextmanager
async def bridge_137(sandbox: SlurmSandbox, tmp_path: Path, **kw: Any) -> AsyncIterator[Bridge]:
    async with dra_bridge(sandbox, tmp_path, kube_version="1.37", **kw) as b:

        async def watching() -> bool:
            return "devicetaintrules" in b.sched.dra.cache.synced

        await b.wait_for("the scheduler's DeviceTaintRule copy listed", watching)
        yield b


async def taint_rule(
    b: Bridge, name: str, taint: dict[str, Any], **selector: str
) -> dict[str, Any]:
    body = {
        "metadata": {"name": name},
        "spec": {"deviceSelector": {"driver": GPU_CLASS, **selector}, "taint": taint},
    }
    rule: dict[str, Any] = await b.kube.create(DEVICE_TAINT_RULES, body)

    async def seen() -> bool:
        return name in b.sched.dra.cache.taint_rules

    await b.wait_for(f"the scheduler sees rule {name}", seen)
    return rule


async def test_a_gpu_tainted_noschedule_is_never_given_where_slurm_counts(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    async with bridge_137(sandbox, tmp_path) as b:
        # gpu-0 of every node tainted by an admin's rule: the external node's claim gets
        # gpu-1, the free device no taint blocks
        await taint_rule(b, "gpu-0-hot", HOT, device="gpu-0")
        await b.kube.create(PODS_RES, dra_pod("e", requests={GPU: "1"}), NS)
        node = await b.bound("e")
        assert node in sandbox.external_nodes
        assert devices(await extended_claim(b, "e")) == ["gpu-1"]
        # both GPUs of the node tainted: a second pod's claim gets none (never the
        # tainted one); it waits, unbound
        await taint_rule(b, "gpu-1-hot", HOT, device="gpu-1")
        await b.kube.create(PODS_RES, dra_pod("f", requests={GPU: "1"}), NS)

        async def unbound_and_refused() -> bool:
            p = await b.get_pod("f")
            conds = p.get("status", {}).get("conditions") or []
            return not p["spec"].get("nodeName") and any(
                c["type"] == "PodScheduled" and c["status"] == "False" for c in conds
            )

        await b.wait_for("the second pod refused, not bound", unbound_and_refused)
        for c in (await b.kube.list(RESOURCE_CLAIMS, NS)).items:
            for r in (c.get("status") or {}).get("allocation", {}).get("devices", {}).get(
                "results"
            ) or []:
                assert (r["pool"], r["device"]) != (node, "gpu-0")


async def test_a_slurm_picked_tainted_gpu_gives_the_job_back_and_never_the_device(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    """A slurmd node: Slurm picks GPU index 0, which a rule taints. The job is given back
    (SlurmDevicesMismatch naming the taint), the node is left for the group while the
    rule stands, and the pod runs on the other slurmd node with its untainted gpu-0."""
    tainted, other = sandbox.slurmd_nodes[0], sandbox.slurmd_nodes[1]
    async with bridge_137(sandbox, tmp_path) as b:
        await taint_rule(b, "slurmd-gpu-0-hot", HOT, pool=tainted, device="gpu-0")
        on_batch = {
            slurmjob_annotation("partition"): sandbox.batch_partition,
            slurmjob_annotation("exclusive"): "false",
        }
        # a batch job keeps the other node busy first, so Slurm tries the tainted one
        hold = JobSpec(
            name="dra-taint-hold",
            partition=sandbox.batch_partition,
            min_nodes=1,
            tasks=1,
            memory_per_node_mib=500,
            exclusive=True,
            excluded_nodes=tuple(n for n in sandbox.slurmd_nodes if n != other),
            external=False,
            script="#!/bin/sh\nexec sleep 300\n",
        )
        held = await b.slurm.submit(hold)
        try:

            async def holding() -> bool:
                return (await b.slurm.get_job(held)).state.primary == "RUNNING"

            await b.wait_for("the batch job holds the other node", holding)
            await b.kube.create(
                PODS_RES, dra_pod("s", requests={GPU: "1"}, annotations=on_batch), NS
            )

            async def given_back() -> bool:
                events = (await b.kube.list(EVENTS, NS)).items
                return any(
                    e["involvedObject"]["name"] == "s"
                    and "gpu-0 is tainted example.com/hot:NoSchedule" in (e.get("message") or "")
                    for e in events
                )

            await b.wait_for("the job given back, the taint named", given_back)
        finally:
            with contextlib.suppress(SlurmError):
                await b.slurm.cancel(held)
        node = await b.bound("s")
        assert node == other
        claim = await extended_claim(b, "s")
        assert claim["status"]["allocation"]["devices"]["results"][0]["pool"] == other


async def test_tainting_an_allocated_gpu_noexecute_ends_its_pods_hold(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    async with bridge_137(sandbox, tmp_path, controller=True) as b:
        await b.kube.create(PODS_RES, dra_pod("v", requests={GPU: "1"}), NS)
        node = await b.bound("v")
        (device,) = devices(await extended_claim(b, "v"))
        job = job_of(await b.get_pod("v"))

        async def running() -> bool:
            return (await b.get_pod("v")).get("status", {}).get("phase") == "Running"

        await b.wait_for("the pod runs", running)
        await taint_rule(b, "broken", BROKEN, pool=node, device=device)

        disrupted: dict[str, Any] = {}

        async def evicted() -> bool:
            try:
                p = await b.get_pod("v")
            except KubeNotFound:
                return bool(disrupted)
            for c in p.get("status", {}).get("conditions") or []:
                if c["type"] == "DisruptionTarget" and c["status"] == "True":
                    disrupted.update(c)
            return False

        await b.wait_for("the pod evicted (DisruptionTarget, then deleted)", evicted)
        assert disrupted["reason"] == EVICTION_REASON
        assert "example.com/broken=ecc:NoExecute" in disrupted["message"]

        async def job_ended() -> bool:
            try:
                return (await b.slurm.get_job(job)).state.primary != "RUNNING"
            except SlurmError:
                return True

        await b.wait_for("the Slurm job ended", job_ended)


async def test_on_kubernetes_1_36_device_taint_rules_are_never_asked_for(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    """1.36 serves no DeviceTaintRule (beta, off): discovery says so, the scheduler and
    the controller never list or watch them, and a slice's own taint still holds."""
    async with dra_bridge(sandbox, tmp_path, controller=True) as b:
        assert "devicetaintrules" in b.sched.dra.cache.synced  # known: there are none
        node = sandbox.external_nodes[0]
        (s,) = [
            x
            for x in (await b.kube.list(RESOURCE_SLICES)).items
            if x["spec"]["nodeName"] == node and x["spec"]["driver"] == GPU_CLASS
        ]
        s["spec"]["devices"][0]["taints"] = [HOT]
        await b.kube.patch(RESOURCE_SLICES, s["metadata"]["name"], {"spec": s["spec"]})

        async def seen() -> bool:
            return any(
                d.get("taints")
                for x in b.sched.dra.cache.slices_on(node)
                for d in x["spec"].get("devices") or []
            )

        await b.wait_for("the scheduler sees the slice's taint", seen)
        for other in sandbox.external_nodes[1:]:
            b.api.api.set_node_ready(other, ready=False)
        await b.kube.create(PODS_RES, dra_pod("t", requests={GPU: "1"}), NS)
        assert await b.bound("t") == node
        assert devices(await extended_claim(b, "t")) == ["gpu-1"]
        assert b.api.request_log.entries(path="devicetaintrules") == []
