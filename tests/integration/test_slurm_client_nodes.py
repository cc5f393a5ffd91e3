"""SlurmClient's node-registration calls against the REAL slurmrestd (Slurm 26.05).

Each test registers its own uniquely named dynamic node and deletes it at the end.
"""

from __future__ import annotations

import asyncio
import secrets
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bridge.errors import SlurmNotFound, SlurmRejected
from bridge.slurm.client import SlurmClient
from bridge.slurm.updating import NODE_ALREADY_EXISTS
from sandbox.slurm.launcher import parse_env_file
from tests.integration.conftest import SlurmSandbox, env_path, remove_dynamic_node
from tests.waiting import eventually

pytestmark = pytest.mark.slurm


@pytest.fixture
async def dyn_node(slurm: SlurmClient) -> AsyncIterator[str]:
    name = "it-dyn-" + secrets.token_hex(3)
    yield name
    await remove_dynamic_node(slurm, name)


async def test_registered_node_joins_an_existing_partition_and_keeps_its_comment(
    slurm: SlurmClient, sandbox: SlurmSandbox, dyn_node: str
) -> None:
    await slurm.create_external_node(dyn_node, cpus=2, memory_mib=1000, features=["f1"])
    await slurm.set_node_comment(dyn_node, "mark")
    assert await slurm.add_node_to_partition(sandbox.partition, dyn_node) is True
    node = await slurm.get_node(dyn_node)
    assert node.external
    assert "DYNAMIC_NORM" in node.state
    assert node.partitions == (sandbox.partition,)
    assert node.features == ("f1",)
    assert node.comment == "mark"
    # The other members of the partition are untouched.
    part = await slurm.get_partition(sandbox.partition)
    assert set(sandbox.external_nodes) | {dyn_node} == set(part.nodes)


async def test_joining_a_missing_partition_never_creates_it(
    slurm: SlurmClient, dyn_node: str
) -> None:
    await slurm.create_external_node(dyn_node, cpus=1, memory_mib=100)
    missing = "nosuch" + secrets.token_hex(3)
    with pytest.raises(SlurmNotFound):
        await slurm.add_node_to_partition(missing, dyn_node)
    with pytest.raises(SlurmNotFound):
        await slurm.get_partition(missing)


async def test_registering_twice_says_already_exists_by_error_number(
    slurm: SlurmClient, dyn_node: str
) -> None:
    await slurm.create_external_node(dyn_node, cpus=1, memory_mib=100)
    with pytest.raises(SlurmRejected) as e:
        await slurm.create_external_node(dyn_node, cpus=1, memory_mib=100)
    assert e.value.error_number == NODE_ALREADY_EXISTS


async def test_slurm_2605_refuses_gpu_gres_on_a_dynamic_node(
    slurm: SlurmClient, dyn_node: str
) -> None:
    """Pins the Slurm behaviour the controller's GPU fallback exists for."""
    with pytest.raises(SlurmRejected):
        await slurm.create_external_node(dyn_node, cpus=1, memory_mib=100, gres="gpu:1")
    with pytest.raises(SlurmNotFound):
        await slurm.get_node(dyn_node)


async def test_slurmctld_restarts_without_resolving_retries_for_a_saved_dynamic_node(
    slurm: SlurmClient, sandbox: SlurmSandbox, dyn_node: str
) -> None:
    # A dynamic node left in slurmctld's saved state (a test that died before deleting it)
    # used to cost 10 s of getaddrinfo retries at every start: the sandbox resolves it now.
    # (slurmctld resolves a node's name once a job runs on it, and again at each start)
    await slurm.create_external_node(dyn_node, cpus=1, memory_mib=100)
    assert await slurm.add_node_to_partition(sandbox.partition, dyn_node) is True
    chroot = Path(parse_env_file(env_path().read_text())["SLURM_CHROOT"])
    job = await asyncio.to_thread(
        subprocess.run,
        ["chroot", str(chroot), "sbatch", "--external", "-p", sandbox.partition, "-w", dyn_node],
        capture_output=True,
        text=True,
        check=False,
    )
    assert job.returncode == 0, job.stderr
    job_id = int(job.stdout.split()[-1])
    try:

        async def running() -> bool:
            return (await slurm.get_job(job_id)).state.primary == "RUNNING"

        await eventually(running, within=30, what=f"job {job_id} RUNNING on {dyn_node}")
        await restart_and_check(sandbox, chroot, dyn_node)
        assert (await slurm.get_node(dyn_node)).name == dyn_node
    finally:
        await slurm.cancel(job_id)


async def restart_and_check(sandbox: SlurmSandbox, chroot: Path, dyn_node: str) -> None:
    log = chroot / "var/log/slurm/slurmctld.log"
    before = log.stat().st_size
    proc = await asyncio.to_thread(sandbox.cli, "restart-ctld")
    assert proc.returncode == 0, proc.stderr
    since = log.read_bytes()[before:].decode(errors="replace")
    assert "Running as primary controller" in since
    assert f'Unable to resolve "{dyn_node}"' not in since, since
