"""Topology-aware gangs end to end: REAL Slurm 26.05 with a tree topology (two leaf switches
of four external nodes, tests/topology_sandbox.py), the sandbox API server, the scheduler
and the controller.

The cluster is made busy the same way in each test: jobs hold kube-node-0 and -1 (leaf-0)
and kube-node-4 (leaf-1), so a gang of four fits under no single leaf switch until the
job on kube-node-4 ends. Then:

* none: Slurm straddles the two leaves at once;
* required (Kueue's podset-required-topology, a level mapped to ``switch``): the gang waits,
  saying so, and lands under leaf-1 once it has room;
* preferred (podset-preferred-topology): Slurm waits ``preferredSwitchWaitSeconds`` for one
  leaf, then starts the gang on what it has.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge.errors import SlurmError
from bridge.models import JobSpec
from bridge.slurm.client import SlurmClient
from bridge.wellknown import (
    ANNOTATION_KUEUE_PREFERRED_TOPOLOGY,
    ANNOTATION_KUEUE_REQUIRED_TOPOLOGY,
    ANNOTATION_TOPOLOGY_SPEC,
    LABEL_EXTERNAL_NODE,
)
from tests.integration.bridge_harness import Bridge, podgroup, running_bridge
from tests.integration.conftest import (
    SlurmSandbox,
    load_sandbox,
    make_client,
    remove_dynamic_node,
)
from tests.integration.controller_harness import (
    controller_config,
    running_controller,
    sandbox_kube,
    unique_mcs,
)
from tests.topology_sandbox import leaf_of, topology_sandbox
from tests.waiting import eventually

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]

RACK = "network.example.com/rack"
TOPOLOGY = {"levels": {RACK: "switch"}, "preferredSwitchWaitSeconds": 3}


@pytest.fixture(scope="module")
def topo() -> Iterator[SlurmSandbox]:
    with topology_sandbox() as env_file:
        yield load_sandbox(env_file)


def holding(sb: SlurmSandbox, name: str, nodes: list[int]) -> JobSpec:
    """An external job on exactly ``kube-node-<i>`` for i in ``nodes``."""
    keep = {f"kube-node-{i}" for i in nodes}
    return JobSpec(
        name=name,
        partition=sb.partition,
        min_nodes=len(nodes),
        tasks=len(nodes),
        tasks_per_node=1,
        excluded_nodes=tuple(n for n in sb.external_nodes if n not in keep),
    )


@contextlib.asynccontextmanager
async def busy(sb: SlurmSandbox) -> AsyncIterator[tuple[SlurmClient, int]]:
    """Jobs on kube-node-0,1 and kube-node-4 (both RUNNING); yields the client and the id
    of the one on kube-node-4. Both are cancelled at the end."""
    async with make_client(sb) as slurm:
        ids = [
            await slurm.submit(holding(sb, "leaf0-busy", [0, 1])),
            await slurm.submit(holding(sb, "leaf1-busy", [4])),
        ]
        try:

            async def running() -> bool:
                jobs = [await slurm.get_job(i) for i in ids]
                return all(j.state.primary == "RUNNING" for j in jobs)

            await eventually(running, within=30, what="the jobs that make the cluster busy")
            yield slurm, ids[1]
        finally:
            for i in ids:
                with contextlib.suppress(SlurmError):
                    await slurm.cancel(i)


async def leaves(b: Bridge, names: list[str]) -> set[int]:
    return {leaf_of(await b.bound(n)) for n in names}


async def test_without_a_request_slurm_straddles_the_leaf_switches(
    topo: SlurmSandbox, tmp_path: Path
) -> None:
    async with busy(topo), running_bridge(topo, tmp_path, topology=TOPOLOGY) as b:
        pods = await podgroup(b, "none-" + secrets.token_hex(2), 4)
        assert await leaves(b, pods) == {0, 1}


async def test_required_topology_waits_rather_than_straddle_and_says_why(
    topo: SlurmSandbox, tmp_path: Path
) -> None:
    ann = {ANNOTATION_KUEUE_REQUIRED_TOPOLOGY: RACK}
    async with (
        busy(topo) as (slurm, leaf1_job),
        running_bridge(topo, tmp_path, topology=TOPOLOGY) as b,
    ):
        pods = await podgroup(b, "req-" + secrets.token_hex(2), 4, annotations=ann)

        async def waiting() -> str:
            msg = await b.scheduled_message(pods[0])
            return msg if "topology request: at most 1 leaf switch" in msg else ""

        msg = await eventually(waiting, within=30, what="the pending message")
        assert " is pending: " in msg
        assert not (await b.get_pod(pods[0]))["spec"].get("nodeName")
        await slurm.cancel(leaf1_job)  # leaf-1 has room now
        assert await leaves(b, pods) == {1}


async def test_preferred_topology_waits_a_while_then_starts_anyway(
    topo: SlurmSandbox, tmp_path: Path
) -> None:
    ann = {ANNOTATION_KUEUE_PREFERRED_TOPOLOGY: RACK}
    async with busy(topo), running_bridge(topo, tmp_path, topology=TOPOLOGY) as b:
        pods = await podgroup(b, "pref-" + secrets.token_hex(2), 4, annotations=ann)
        # no leaf frees up: after preferredSwitchWaitSeconds Slurm takes what it has
        assert await leaves(b, pods) == {0, 1}


async def test_gang_that_fits_one_leaf_gets_it_and_ranks_follow_the_leaf(
    topo: SlurmSandbox, tmp_path: Path
) -> None:
    """Only leaf-1 has room for three: the required gang gets it at once, pod i on the
    i-th node of Slurm's (network-ordered) allocation."""
    ann = {ANNOTATION_KUEUE_REQUIRED_TOPOLOGY: RACK}
    async with busy(topo), running_bridge(topo, tmp_path, topology=TOPOLOGY) as b:
        pods = await podgroup(b, "fit-" + secrets.token_hex(2), 3, annotations=ann)
        nodes = [await b.bound(p) for p in pods]
        assert {leaf_of(n) for n in nodes} == {1}
        assert nodes == sorted(nodes)


async def test_controller_sets_an_external_nodes_topology_from_its_annotation(
    topo: SlurmSandbox,
) -> None:
    """A dynamic external node: Topology= from topology.slinky.slurm.net/spec, set again
    when the annotation changes; a leaf switch topology.yaml lacks is created by Slurm
    (tree: "Intermediate switch names ... will be created if needed")."""
    name = "ext-" + secrets.token_hex(3)
    cfg = controller_config(topo, unique_mcs())
    async with make_client(topo) as slurm:
        try:
            async with sandbox_kube(topo) as (srv, kube), running_controller(cfg, kube) as _ctl:
                srv.set_node_ready(name)

                async def annotate(spec: str) -> None:
                    patch: dict[str, Any] = {
                        "metadata": {
                            "labels": {LABEL_EXTERNAL_NODE: "true"},
                            "annotations": {ANNOTATION_TOPOLOGY_SPEC: spec},
                        }
                    }
                    await kube.patch_node(name, patch, patch_type="merge")

                for spec in ("net:spine:leaf-1", "net:spine:leaf-0"):
                    await annotate(spec)

                    async def synced(spec: str = spec) -> bool:
                        with contextlib.suppress(SlurmError):
                            return (await slurm.get_node(name)).topology == spec
                        return False

                    await eventually(synced, within=30, what=f"Topology={spec} in Slurm")
        finally:
            await remove_dynamic_node(slurm, name)
