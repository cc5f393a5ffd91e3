"""Slurm and Kubernetes agree on a node's devices, end to end: REAL Slurm sandbox (its
nodes' ``gres`` read from slurmrestd) + sandbox API server + the controller as the chart's
ServiceAccount. A node whose ResourceSlices disagree with Slurm's GRES gets
``SlinkySlurmGRESCompatible=False`` (reason ``IncompatibleSlurmGRES``) and a Warning Event
naming both sides; one that agrees gets ``True``; fixing the slices flips it back. An
external node registered from its slices whose GPUs Slurm refuses shows the same."""

from __future__ import annotations

import contextlib
import secrets
from typing import Any

import pytest

from bridge.errors import KubeNotFound
from bridge.kube.client import KubeClient
from bridge.kube.resources import EVENTS, NODES, RESOURCE_SLICES
from bridge.slurm.client import SlurmClient
from bridge.wellknown import (
    CONDITION_SLURM_GRES_COMPATIBLE,
    EVENT_EXTERNAL_NODE_NO_GPUS,
    LABEL_EXTERNAL_NODE,
)
from sandbox.controllers import dra_driver as sandbox_dra
from tests.integration.conftest import SlurmSandbox, remove_dynamic_node
from tests.integration.controller_harness import (
    controller_config,
    running_controller,
    sandbox_kube,
    unique_mcs,
    wait_for,
)

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]


def mig_slice(node: str, slices: int, profile: str = "1g.10gb") -> dict[str, Any]:
    """``slices`` MIG devices of one GPU, as NVIDIA's DRA driver names them."""
    devices = [
        {
            "name": f"gpu-0-mig-{profile.replace('.', '')}-{k}",
            "attributes": {
                "type": {"string": "mig"},
                "profile": {"string": profile},
                "parentIndex": {"int": 0},
            },
        }
        for k in range(slices)
    ]
    s = sandbox_dra.gpu_slice(node, 0)
    s["spec"]["devices"] = devices
    return s


async def publish(kube: KubeClient, obj: dict[str, Any]) -> None:
    """Create the slice, replacing one of the same name."""
    with contextlib.suppress(KubeNotFound):
        await kube.delete(RESOURCE_SLICES, obj["metadata"]["name"])
    await kube.create(RESOURCE_SLICES, obj)


async def condition(kube: KubeClient, node: str) -> dict[str, Any]:
    n = await kube.get(NODES, node)
    for c in (n.get("status") or {}).get("conditions") or []:
        if c.get("type") == CONDITION_SLURM_GRES_COMPATIBLE:
            return dict(c)
    return {}


async def wait_condition(kube: KubeClient, node: str, status: str) -> dict[str, Any]:
    async def said() -> bool:
        return (await condition(kube, node)).get("status") == status

    await wait_for(said, what=f"{node}: {CONDITION_SLURM_GRES_COMPATIBLE}={status}")
    return await condition(kube, node)


async def warnings(kube: KubeClient, node: str, reason: str) -> list[str]:
    items = (await kube.list(EVENTS, "default")).items
    return [
        str(e.get("message"))
        for e in items
        if (e.get("involvedObject") or {}).get("name") == node
        and e.get("reason") == reason
        and e.get("type") == "Warning"
    ]


async def test_slices_that_disagree_with_slurms_gres_give_false_and_a_warning_agreeing_true(
    sandbox: SlurmSandbox, slurm: SlurmClient
) -> None:
    if sandbox.node_gpus < 1:
        pytest.skip("the sandbox's external nodes have no GPUs (--node-gpus 0)")
    cfg = controller_config(sandbox, unique_mcs())
    agree, differ = sandbox.external_nodes[0], sandbox.external_nodes[1]
    gpus = sandbox.node_gpus
    assert (await slurm.get_node(differ)).gres.startswith(f"gpu:{gpus}")
    async with sandbox_kube(sandbox) as (_srv, kube), running_controller(cfg, kube):
        await publish(kube, sandbox_dra.gpu_slice(agree, gpus))
        await publish(kube, mig_slice(differ, 7))
        ok = await wait_condition(kube, agree, "True")
        assert ok["reason"] == "SlurmGRESCompatible"
        assert f"Slurm node {agree} has Gres=gpu:{gpus}" in ok["message"]

        bad = await wait_condition(kube, differ, "False")
        assert bad["reason"] == "IncompatibleSlurmGRES"
        assert (
            f"Slurm has gpu:{gpus} but the node's ResourceSlices have 0 such device(s)"
            in (bad["message"])
        )
        assert "7 device(s) of gpu:1g.10gb that Slurm does not have" in bad["message"]

        async def warned() -> bool:
            return bad["message"] in await warnings(kube, differ, "IncompatibleSlurmGRES")

        await wait_for(warned, what="an IncompatibleSlurmGRES Warning on the node")

        # the operator fixes the node's devices: the condition follows the slices
        await publish(kube, sandbox_dra.gpu_slice(differ, gpus))
        fixed = await wait_condition(kube, differ, "True")
        assert fixed["reason"] == "SlurmGRESCompatible"


async def test_an_external_node_registered_from_its_slices_shows_gpus_slurm_refused(
    sandbox: SlurmSandbox, slurm: SlurmClient
) -> None:
    # Slurm 26.05 refuses GPU GRES on a node created at run time without a gres.conf line
    # for it: the node is registered without GPUs, and the condition says so.
    cfg = controller_config(sandbox, unique_mcs())
    name = "ext-" + secrets.token_hex(3)
    try:
        async with sandbox_kube(sandbox) as (srv, kube), running_controller(cfg, kube):
            srv.set_node_ready(name)
            await publish(kube, sandbox_dra.gpu_slice(name, 2))
            await kube.patch_node(
                name, {"metadata": {"labels": {LABEL_EXTERNAL_NODE: "true"}}}, patch_type="merge"
            )

            async def refused() -> bool:
                return bool(await warnings(kube, name, EVENT_EXTERNAL_NODE_NO_GPUS))

            await wait_for(refused, what="Slurm refused the slices' GPUs on the dynamic node")
            (said,) = await warnings(kube, name, EVENT_EXTERNAL_NODE_NO_GPUS)
            assert "Gres=gpu:2" in said
            assert (await slurm.get_node(name)).gres in ("", "(null)")
            bad = await wait_condition(kube, name, "False")
            assert f"Slurm node {name} has Gres=none" in bad["message"]
            assert "2 device(s) of gpu that Slurm does not have" in bad["message"]
    finally:
        await remove_dynamic_node(slurm, name)
