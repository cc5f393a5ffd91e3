"""topology/block end to end: REAL Slurm 26.05 with two blocks of four external nodes
(``--topology block:2x4``, tests/topology_sandbox.py), the sandbox API server, the
scheduler and the controller.

What Slurm does here that the bridge must cope with: a job no block has room for is
queued, yet its submit answer is HTTP 500 with error 7203 "No suitable topology unit
found" (and the job id); and a node's Topology= naming a block topology.yaml lacks is
refused with 2178 "Requested topology configuration is not available".
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge.errors import SlurmError
from bridge.wellknown import (
    ANNOTATION_TOPOLOGY_SPEC,
    EVENT_EXTERNAL_NODE_TOPOLOGY,
    LABEL_EXTERNAL_NODE,
    slurmjob_annotation,
)
from tests.clients import list_jobs
from tests.integration.bridge_harness import NS, kubectl_plugin, podgroup, running_bridge
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
from tests.integration.sched_proc import jobs_by_group_uid
from tests.integration.test_controller_nodes_e2e import node_events
from tests.integration.test_topology_e2e import busy
from tests.topology_sandbox import leaf_of, topology_sandbox
from tests.waiting import eventually

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]

SEGMENT = slurmjob_annotation("segment")


@pytest.fixture(scope="module")
def blocks() -> Iterator[SlurmSandbox]:
    with topology_sandbox(topology="block:2x4") as env_file:
        yield load_sandbox(env_file)


async def test_segment_gang_waits_for_a_block_as_one_job_despite_http_500_why_names_the_block(
    blocks: SlurmSandbox, tmp_path: Path
) -> None:
    async with (
        busy(blocks) as (slurm, block1_job),
        running_bridge(blocks, tmp_path, scheduler={"rejectBackoffSeconds": 0.2}) as b,
    ):
        group = "seg-" + secrets.token_hex(2)
        pods = await podgroup(b, group, 4, annotations={SEGMENT: "4"})

        async def waiting() -> str:
            msg = await b.scheduled_message(pods[0])
            return msg if "topology request: segments of 4 nodes" in msg else ""

        msg = await eventually(waiting, within=30, what="the pending message")
        # Slurm's reason as of the bridge's read: its submit said 7203, its queue says either
        reason = msg.split(" is pending: ", 1)[1].split(";", 1)[0]
        assert reason in ("Resources", "No suitable topology unit found"), msg
        (pg,) = [
            o
            for o in b.api.store.list(("scheduling.x-k8s.io", "podgroups"))
            if o["metadata"]["name"] == group
        ]
        uid = pg["metadata"]["uid"]
        jobs = jobs_by_group_uid((await list_jobs(slurm)).jobs).get(uid, [])
        # Slurm's HTTP 500 + job id is a queued job: never submitted a second time
        assert [j.state.primary for j in jobs] == ["PENDING"]

        # why: each block's free nodes against the segment. Slurm reports a node's block
        # only when it was set on the node, as the controller does for the external nodes
        # it registers (docs/topology.md), not from topology.yaml alone
        for node in blocks.external_nodes:
            await slurm.set_node_topology(node, f"net:block-{leaf_of(node)}")
        proc = await kubectl_plugin(b, tmp_path, "why", f"{NS}/{pods[0]}")
        assert proc.returncode == 0, proc.stderr
        said = proc.stdout
        print(said)
        # kube-node-0,1 and kube-node-4 are busy: 5 nodes free, yet no block has 4
        assert "of the 8 nodes of partition slurm-bridge, 5 can take that now" in said
        assert (
            "topology: it asks segments of 4 nodes, each inside one block; "
            "block-0: 2 of 4 nodes free, block-1: 3 of 4 nodes free"
        ) in said
        assert "1 node short of a block with 4 free nodes" in said

        await slurm.cancel(block1_job)
        assert {leaf_of(await b.bound(p)) for p in pods} == {1}


async def test_a_block_topology_yaml_lacks_is_refused_in_slurms_words_on_the_node(
    blocks: SlurmSandbox,
) -> None:
    name = "ext-" + secrets.token_hex(3)
    cfg = controller_config(blocks, unique_mcs())
    async with make_client(blocks) as slurm:
        try:
            async with sandbox_kube(blocks) as (srv, kube), running_controller(cfg, kube):
                srv.set_node_ready(name)

                async def annotate(spec: str) -> None:
                    patch: dict[str, Any] = {
                        "metadata": {
                            "labels": {LABEL_EXTERNAL_NODE: "true"},
                            "annotations": {ANNOTATION_TOPOLOGY_SPEC: spec},
                        }
                    }
                    await kube.patch_node(name, patch, patch_type="merge")

                await annotate("net:block-9")

                async def refused() -> str:
                    for e in await node_events(kube, name):
                        if e.get("reason") == EVENT_EXTERNAL_NODE_TOPOLOGY:
                            return str(e.get("message"))
                    return ""

                msg = await eventually(refused, within=30, what="the refusal on the node")
                assert "Requested topology configuration is not available" in msg

                await annotate("net:block-1")

                async def synced() -> bool:
                    with contextlib.suppress(SlurmError):
                        return (await slurm.get_node(name)).topology == "net:block-1"
                    return False

                await eventually(synced, within=30, what="Topology=net:block-1 in Slurm")
        finally:
            await remove_dynamic_node(slurm, name)
