"""Device exactness against real Slurm 26.05 (issue 39, first row): a claim is given only
devices Slurm accounted to its own job.

The attack: a native Slurm job holds a GPU of a node the bridge shares
(``batch-node-0``); a pod asking for a GPU sets ``slurmjob.slinky.slurm.net/gres:
gpu:0``, so its Slurm job gets no GPU beside the native job, and the claim fell back to
"any free device": the native job's GPU. Now the scheduler refuses the annotation (it
would lower what the pod needs), and were a job without the GPU ever to reach binding,
the allocation says so (``SlurmDevicesMismatch``) and writes nothing; on an external node
a claim never gets more devices than Slurm counted."""

from __future__ import annotations

import contextlib
import secrets
from pathlib import Path
from typing import Any

import pytest

from bridge.errors import DeviceMismatch, SlurmError
from bridge.kube.resources import PODS
from bridge.models import JobSpec
from bridge.wellknown import slurmjob_annotation
from scheduler.dra import RESOURCE_CLAIMS
from tests.integration.bridge_harness import NS, Bridge
from tests.integration.conftest import SlurmSandbox
from tests.integration.test_dra_e2e import GPU, dra_bridge, dra_pod
from tests.integration.test_shared_node_e2e import gpu_index, hold_gpus, sbatch

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]


async def running(b: Bridge, jobs: list[int]) -> None:
    async def all_run() -> bool:
        states = [(await b.slurm.get_job(j)).state.primary for j in jobs]
        return all(s == "RUNNING" for s in states)

    await b.wait_for(f"jobs {jobs} run", all_run, deadline=60)


async def allocated_claims(b: Bridge) -> list[dict[str, Any]]:
    claims = (await b.kube.list(RESOURCE_CLAIMS, NS)).items
    return [c for c in claims if (c.get("status") or {}).get("allocation")]


async def test_a_gres_annotation_never_gets_a_pod_the_gpu_of_a_native_job(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    if sandbox.node_gpus != 2 or len(sandbox.slurmd_nodes) < 2:
        pytest.skip("needs two slurmd nodes with two GPUs each (the default sandbox)")
    shared, other = sandbox.slurmd_nodes[0], sandbox.slurmd_nodes[1]
    part = sandbox.batch_partition
    native: list[int] = []
    # gres opened (a policed key, closed by default: tests/security/test_annotation_policy.py):
    # the floor applies where an admin lets pods set it
    opened = {"allowPodKeys": ["gres"]}
    async with dra_bridge(sandbox, tmp_path, partition=part, defaultNamespacePolicy=opened) as b:
        try:
            # the native job holds one GPU of the shared node; the other node is full
            held = await hold_gpus(b, part, shared, other, native)
            notes = {
                slurmjob_annotation("partition"): part,
                slurmjob_annotation("exclusive"): "false",
                slurmjob_annotation("gres"): "gpu:0",
            }
            name = f"lower-{secrets.token_hex(2)}"
            await b.kube.create(PODS, dra_pod(name, requests={GPU: "1"}, annotations=notes), NS)

            async def refused() -> str:
                msg = await b.scheduled_message(name)
                return msg if slurmjob_annotation("gres") in msg else ""

            msg = await b.wait_for("the pod refused naming the annotation", refused)
            assert "'gpu:0' would replace or lower" in msg, msg
            assert "spec.resourceClaims" in msg, msg
            pod = await b.get_pod(name)
            assert not (pod.get("spec") or {}).get("nodeName")
            assert await allocated_claims(b) == []  # the native job's GPU is nobody's claim
            assert (await b.slurm.get_job(held)).state.primary == "RUNNING"
        finally:
            for j in native:
                with contextlib.suppress(SlurmError):
                    await b.slurm.cancel(j)


def _job(sandbox: SlurmSandbox, node: str, tres: str | None) -> JobSpec:
    """A job on ``node`` alone: a batch job on a slurmd node, a placeholder elsewhere."""
    slurmd = node in sandbox.slurmd_nodes
    return JobSpec(
        name=f"exact-{secrets.token_hex(2)}",
        partition=sandbox.batch_partition if slurmd else sandbox.partition,
        min_nodes=1,
        tasks=1,
        memory_per_node_mib=500,
        exclusive=False,
        tres_per_node=tres,
        excluded_nodes=tuple(
            n for n in (*sandbox.slurmd_nodes, *sandbox.external_nodes) if n != node
        ),
        external=not slurmd,
        script="#!/bin/sh\nexec sleep 300\n" if slurmd else None,
    )


@pytest.mark.parametrize(
    ("where", "tres", "ask", "words"),
    [
        # the Slurm job of the attack: no GPU beside a native job holding one
        pytest.param("slurmd", None, "1", ["gave the job no gpu"], id="no-gpu-beside-a-native"),
        # an external node: Slurm counted 1, the pod asks 2
        pytest.param(
            "external",
            "gres/gpu:1",
            "2",
            ["gave the job 1 gpu on the node", "asks for 2"],
            id="counted",
        ),
    ],
)
async def test_a_claim_is_given_only_what_slurm_gave_its_job(
    sandbox: SlurmSandbox, tmp_path: Path, where: str, tres: str | None, ask: str, words: list[str]
) -> None:
    if sandbox.node_gpus != 2 or not sandbox.slurmd_nodes or not sandbox.external_nodes:
        pytest.skip("needs slurmd and external nodes with two GPUs each (the default sandbox)")
    node = sandbox.slurmd_nodes[0] if where == "slurmd" else sandbox.external_nodes[0]
    jobs: list[int] = []
    async with dra_bridge(sandbox, tmp_path) as b:
        try:
            if where == "slurmd":
                held = await sbatch(
                    "-p",
                    sandbox.batch_partition,
                    "-w",
                    node,
                    "--gres=gpu:1",
                    "--mem=500",
                    "--wrap",
                    "sleep 300",
                )
                jobs.append(held)
            spec = _job(sandbox, node, tres)
            jobs.append(await b.slurm.submit(spec))
            await running(b, jobs)
            if where == "slurmd":
                assert await gpu_index(b, jobs[0]) in (0, 1)
            # the pod as a job that reached binding would carry it (another scheduler's
            # name: the running scheduler leaves it alone)
            name = f"exact-{secrets.token_hex(2)}"
            body = dra_pod(name, requests={GPU: ask})
            body["spec"]["schedulerName"] = "someone-else"
            pod = await b.kube.create(PODS, body, NS)
            to_kube = b.sched.state.node_set.to_kube()
            with pytest.raises(DeviceMismatch) as e:
                await b.sched.dra.allocate(jobs[-1], [(pod, to_kube.get(node, node))], to_kube)
            for w in words:
                assert w in str(e.value), str(e.value)
            assert await allocated_claims(b) == []  # nothing written
        finally:
            for j in jobs:
                with contextlib.suppress(SlurmError):
                    await b.slurm.cancel(j)
