"""A node shared with native Slurm jobs, end to end (issue #33, part 4): ``batch-node-0``
runs a real slurmd (its two GPUs are gres.conf ``File=`` character devices, so Slurm
picks indices) and is also a Kubernetes node with the sandbox kubelet and a ResourceSlice
of two GPUs. An ``sbatch`` job holds one GPU (the index Slurm picks); a pod asking
for one GPU (``exclusive: "false"``, partition ``batch``) is placed on the same node with
the OTHER index, and its ResourceClaim names that device; a second such pod waits with
Slurm's own reason; when the batch job ends it starts on the GPU the batch job held. The
controller's ``SlinkySlurmGRESCompatible`` says True for the node (Slurm's ``gpu:2``, two
devices in its slice)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
from pathlib import Path

import pytest

from bridge.errors import SlurmError
from bridge.kube.resources import NODES, PODS
from bridge.wellknown import CONDITION_SLURM_GRES_COMPATIBLE, slurmjob_annotation
from tests.integration.bridge_harness import NS, Bridge, job_of
from tests.integration.conftest import SlurmSandbox, load_sandbox
from tests.integration.test_dra_e2e import GPU, devices, dra_bridge, dra_pod, extended_claim

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]

_IDX = re.compile(r"IDX:(\d+)\)")


async def sbatch(*args: str) -> int:
    """A native batch job, submitted with ``sbatch`` inside the Slurm sandbox."""
    proc = await asyncio.to_thread(load_sandbox().cli, "exec", "--", "sbatch", "--parsable", *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return int(proc.stdout.strip().split(";")[0])


async def gpu_index(b: Bridge, job_id: int) -> int:
    """The one GPU index Slurm gave ``job_id`` (``gres_detail`` ``gpu:1(IDX:n)``)."""
    job = await b.slurm.get_job(job_id)
    (detail,) = job.gres_detail
    m = _IDX.search(detail)
    assert m, detail
    return int(m.group(1))


async def hold_gpus(b: Bridge, part: str, shared: str, other: str, native: list[int]) -> int:
    """Native jobs (added to ``native``) holding one GPU of ``shared`` and both of
    ``other``, running; the first one's id."""
    held = await sbatch(
        "-p", part, "-w", shared, "--gres=gpu:1", "--mem=500", "--wrap", "sleep 300"
    )
    native.append(held)
    native.append(
        await sbatch("-p", part, "-w", other, "--gres=gpu:2", "--mem=500", "--wrap", "sleep 300")
    )

    async def running() -> bool:
        jobs = [await b.slurm.get_job(j) for j in native]
        return all(j.state.primary == "RUNNING" for j in jobs)

    await b.wait_for("the batch jobs run", running)
    return held


async def test_a_batch_job_and_pods_share_a_slurmd_node_each_on_its_own_gpu(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    if sandbox.node_gpus != 2 or len(sandbox.slurmd_nodes) < 2:
        pytest.skip("needs two slurmd nodes with two GPUs each (the default sandbox)")
    shared, other = sandbox.slurmd_nodes[0], sandbox.slurmd_nodes[1]
    part = sandbox.batch_partition
    native: list[int] = []
    # The bridge's partition is the shared node's (a partition only the pods name becomes
    # the bridge's once the controller has read a job of the bridge there).
    async with dra_bridge(sandbox, tmp_path, controller=True, partition=part) as b:
        try:
            held = await hold_gpus(b, part, shared, other, native)
            batch_index = await gpu_index(b, held)

            shares = {
                slurmjob_annotation("partition"): part,
                slurmjob_annotation("exclusive"): "false",
            }
            first, second = (f"share-{secrets.token_hex(2)}-{i}" for i in range(2))
            await b.kube.create(PODS, dra_pod(first, requests={GPU: "1"}, annotations=shares), NS)
            assert await b.bound(first, deadline=60) == shared
            pod_index = await gpu_index(b, job_of(await b.get_pod(first)))
            assert pod_index != batch_index  # Slurm gave the pod the other GPU
            assert devices(await extended_claim(b, first)) == [f"gpu-{pod_index}"]

            async def pod_runs() -> bool:
                return (await b.get_pod(first)).get("status", {}).get("phase") == "Running"

            await b.wait_for("the pod's containers run beside the batch job", pod_runs)
            assert (await b.slurm.get_job(held)).state.primary == "RUNNING"

            # a third consumer of the node's GPUs waits with Slurm's reason
            await b.kube.create(PODS, dra_pod(second, requests={GPU: "1"}, annotations=shares), NS)

            async def waiting() -> str:
                msg = await b.scheduled_message(second)
                return msg if "pending" in msg else ""

            msg = await b.wait_for("the second pod's pending reason", waiting, deadline=60)
            assert msg.startswith("False "), msg
            assert "Resources" in msg, msg

            # the controller: the shared node's Slurm GRES and its slice agree
            async def condition() -> dict[str, str]:
                node = await b.kube.get(NODES, shared)
                for c in node["status"].get("conditions") or []:
                    if c["type"] == CONDITION_SLURM_GRES_COMPATIBLE:
                        return {k: str(v) for k, v in c.items()}
                return {}

            said = await b.wait_for("SlinkySlurmGRESCompatible on the shared node", condition)
            assert said["status"] == "True", said
            assert f"Slurm node {shared} has Gres=gpu:2" in said["message"]

            # the batch job ends: the waiting pod gets the GPU it held, never the pod's
            await b.slurm.cancel(held)
            assert await b.bound(second, deadline=60) == shared
            assert await gpu_index(b, job_of(await b.get_pod(second))) == batch_index
            assert devices(await extended_claim(b, second)) == [f"gpu-{batch_index}"]
        finally:
            for j in native:
                with contextlib.suppress(SlurmError):
                    await b.slurm.cancel(j)
