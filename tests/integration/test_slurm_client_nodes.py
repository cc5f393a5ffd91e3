"""SlurmClient's node-registration calls against the REAL slurmrestd (Slurm 26.05).

Each test registers its own uniquely named dynamic node and deletes it at the end.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import pytest

from bridge.errors import SlurmNotFound, SlurmRejected
from bridge.slurm.client import NODE_ALREADY_EXISTS, SlurmClient
from tests.integration.conftest import SlurmSandbox, remove_dynamic_node

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
