"""The controller's node reconciliation end to end: REAL Slurm sandbox + sandbox API server.

Drains are made the way admins make them (``scontrol`` inside the sandbox chroot, or the
REST API); every test resumes what it drained and deletes what it registered.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from bridge.errors import BridgeError, SlurmError, SlurmNotFound
from bridge.kube.client import KubeClient
from bridge.kube.resources import EVENTS, NODES
from bridge.models import JobSpec
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import SlurmNode
from bridge.wellknown import (
    ANNOTATION_CORDONED_BY_BRIDGE,
    ANNOTATION_EXTERNAL_NODE_PARTITIONS,
    EVENT_EXTERNAL_NODE_INVALID,
    EVENT_EXTERNAL_NODE_NO_GPUS,
    EVENT_EXTERNAL_NODE_PARTITION,
    EVENT_EXTERNAL_NODE_REGISTERED,
    EXTERNAL_NODE_COMMENT_PREFIX,
    LABEL_EXTERNAL_NODE,
    MANAGED_NODE_TAINT,
    TAINT_SLURM_NODE_UNAVAILABLE,
)
from controller.nodes import CORDON_REASON, DEREGISTER_REASON
from controller.runtime import Controller
from tests.integration.conftest import SlurmSandbox, load_sandbox, remove_dynamic_node
from tests.integration.controller_harness import (
    controller_config,
    running_controller,
    sandbox_kube,
    unique_mcs,
    wait_for,
)

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]


# --------------------------------------------------------------------------- helpers
async def scontrol(*args: str) -> None:
    """``scontrol ARGS`` in the sandbox chroot."""
    await sandbox_cli("exec", "--", "scontrol", *args)


async def sandbox_cli(*args: str) -> None:
    """``slurm-bridge sandbox slurm ARGS`` on the sandbox the tests use."""
    proc = await asyncio.to_thread(load_sandbox().cli, *args)
    assert proc.returncode == 0, f"{' '.join(args)}: {proc.stdout} {proc.stderr}"


@contextlib.asynccontextmanager
async def resumed_after(slurm: SlurmClient, *names: str) -> AsyncIterator[None]:
    """Whatever the test does to these Slurm nodes, they end IDLE (no drain)."""
    try:
        yield
    finally:
        for name in names:
            with contextlib.suppress(BridgeError):
                await slurm.resume_node(name)


async def slurm_node(slurm: SlurmClient, name: str) -> SlurmNode | None:
    try:
        return await slurm.get_node(name)
    except SlurmNotFound:
        return None


def taint_of(node: dict[str, Any], key: str) -> dict[str, Any] | None:
    for t in (node.get("spec") or {}).get("taints") or []:
        if t.get("key") == key:
            return dict(t)
    return None


async def node_events(kube: KubeClient, name: str) -> list[dict[str, Any]]:
    items = (await kube.list(EVENTS, "default")).items
    return [e for e in items if (e.get("involvedObject") or {}).get("name") == name]


async def settle(ctl: Controller) -> None:
    """One full resync (Slurm nodes listed, every node key reconciled), then idle."""
    await ctl.sweep_once()

    async def idle() -> bool:
        return ctl.queue.idle()

    await wait_for(idle, what="controller queue idle after a sweep")


# --------------------------------------------------------------------------- state sync
async def test_cordon_drains_the_slurm_node_uncordon_resumes_and_admin_drains_stay(
    sandbox: SlurmSandbox, slurm: SlurmClient
) -> None:
    node = sandbox.external_nodes[0]
    cfg = controller_config(sandbox, unique_mcs())
    async with (
        resumed_after(slurm, node),
        sandbox_kube(sandbox) as (_, kube),
        running_controller(cfg, kube) as ctl,
    ):
        await kube.patch(NODES, node, {"spec": {"unschedulable": True}})

        async def drained_by_bridge() -> bool:
            n = await slurm.get_node(node)
            return n.drain and n.reason == CORDON_REASON

        await wait_for(drained_by_bridge, what="cordon -> Slurm DRAIN with the bridge's reason")
        # Our own drain never taints the node back.
        assert taint_of(await kube.get(NODES, node), TAINT_SLURM_NODE_UNAVAILABLE) is None

        await kube.patch(NODES, node, {"spec": {"unschedulable": False}})

        async def resumed() -> bool:
            return not (await slurm.get_node(node)).drain

        await wait_for(resumed, what="uncordon -> Slurm RESUME")

        # An admin's drain (REST API, another reason) is never resumed by an uncordon.
        await slurm.drain_node(node, "maint")

        async def tainted() -> bool:
            t = taint_of(await kube.get(NODES, node), TAINT_SLURM_NODE_UNAVAILABLE)
            return t is not None and t.get("value") == "maint"

        await wait_for(tainted, what="admin drain -> taint naming the reason")
        await kube.patch(NODES, node, {"spec": {"unschedulable": True}})
        await kube.patch(NODES, node, {"spec": {"unschedulable": False}})
        await settle(ctl)  # the controller has seen the uncordon and reconciled the node
        after = await slurm.get_node(node)
        assert after.drain
        assert after.reason == "maint"


async def test_scontrol_drain_taints_the_kubernetes_node_and_resume_removes_the_taint(
    sandbox: SlurmSandbox, slurm: SlurmClient
) -> None:
    node = sandbox.external_nodes[1]
    cfg = controller_config(sandbox, unique_mcs())
    async with (
        resumed_after(slurm, node),
        sandbox_kube(sandbox) as (_, kube),
        running_controller(cfg, kube),
    ):
        await scontrol("update", f"nodename={node}", "state=drain", "reason=maint window")

        async def tainted() -> bool:
            t = taint_of(await kube.get(NODES, node), TAINT_SLURM_NODE_UNAVAILABLE)
            return t is not None and t["value"] == "maint_window" and t["effect"] == "NoSchedule"

        await wait_for(tainted, what="scontrol drain -> taint naming the reason")
        # cordonOnSlurmDrain is off by default: no cordon.
        assert not (await kube.get(NODES, node)).get("spec", {}).get("unschedulable")

        await scontrol("update", f"nodename={node}", "state=resume")

        async def untainted() -> bool:
            return taint_of(await kube.get(NODES, node), TAINT_SLURM_NODE_UNAVAILABLE) is None

        await wait_for(untainted, what="scontrol resume -> taint removed")


async def test_cordon_on_slurm_drain_cordons_and_undoes_only_its_own_cordon(
    sandbox: SlurmSandbox, slurm: SlurmClient
) -> None:
    mine, admins = sandbox.external_nodes[1], sandbox.external_nodes[2]
    cfg = controller_config(sandbox, unique_mcs(), controller={"cordonOnSlurmDrain": True})
    async with (
        resumed_after(slurm, mine, admins),
        sandbox_kube(sandbox) as (_, kube),
        running_controller(cfg, kube),
    ):
        # Slurm drains -> the bridge cordons and marks the cordon as its own.
        await scontrol("update", f"nodename={mine}", "state=drain", "reason=maint")

        async def cordoned_by_bridge() -> bool:
            n = await kube.get(NODES, mine)
            marked = ANNOTATION_CORDONED_BY_BRIDGE in (n["metadata"].get("annotations") or {})
            return bool(n["spec"].get("unschedulable")) and marked

        await wait_for(cordoned_by_bridge, what="Slurm drain -> cordon marked as the bridge's")
        # Its own cordon does not turn into a second drain (the admin's reason stays).
        assert (await slurm.get_node(mine)).reason == "maint"

        await scontrol("update", f"nodename={mine}", "state=resume")

        async def uncordoned() -> bool:
            n = await kube.get(NODES, mine)
            marked = ANNOTATION_CORDONED_BY_BRIDGE in (n["metadata"].get("annotations") or {})
            return not n["spec"].get("unschedulable") and not marked

        await wait_for(uncordoned, what="Slurm resume -> the bridge's cordon undone")

        # An admin's cordon: Slurm drains and resumes underneath, the cordon stays.
        await kube.patch(NODES, admins, {"spec": {"unschedulable": True}})

        async def drained_for_cordon() -> bool:
            return (await slurm.get_node(admins)).reason == CORDON_REASON

        await wait_for(drained_for_cordon, what="admin cordon -> Slurm drain")
        await scontrol("update", f"nodename={admins}", "state=drain", "reason=maint")

        async def tainted() -> bool:
            return taint_of(await kube.get(NODES, admins), TAINT_SLURM_NODE_UNAVAILABLE) is not None

        await wait_for(tainted, what="admin's Slurm drain -> taint")
        await scontrol("update", f"nodename={admins}", "state=resume")

        async def untainted() -> bool:
            return taint_of(await kube.get(NODES, admins), TAINT_SLURM_NODE_UNAVAILABLE) is None

        await wait_for(untainted, what="Slurm resume -> taint removed")
        n = await kube.get(NODES, admins)
        assert n["spec"].get("unschedulable") is True, "an admin's cordon was undone"
        assert ANNOTATION_CORDONED_BY_BRIDGE not in (n["metadata"].get("annotations") or {})
        await kube.patch(NODES, admins, {"spec": {"unschedulable": False}})


# --------------------------------------------------------------------------- managed taint
async def test_managed_node_taint_only_on_nodes_in_bridge_partitions(
    sandbox: SlurmSandbox, slurm: SlurmClient
) -> None:
    cfg = controller_config(sandbox, unique_mcs())
    bridge_node, batch_node = sandbox.external_nodes[0], sandbox.slurmd_nodes[0]
    async with sandbox_kube(sandbox) as (srv, kube):
        srv.set_node_ready(batch_node)  # a Kubernetes node whose Slurm node is in `batch`
        srv.set_node_ready("no-slurm-node")
        async with running_controller(cfg, kube) as ctl:

            async def tainted() -> bool:
                t = taint_of(await kube.get(NODES, bridge_node), MANAGED_NODE_TAINT)
                return t == {
                    "key": MANAGED_NODE_TAINT,
                    "value": cfg.scheduler_name,
                    "effect": "NoExecute",
                    "timeAdded": (t or {}).get("timeAdded"),
                }

            await wait_for(tainted, what="managed-node taint on a node of the bridge partition")
            await settle(ctl)
            assert taint_of(await kube.get(NODES, batch_node), MANAGED_NODE_TAINT) is None
            assert taint_of(await kube.get(NODES, "no-slurm-node"), MANAGED_NODE_TAINT) is None


# --------------------------------------------------------------------------- external nodes
@contextlib.asynccontextmanager
async def deleted_after(slurm: SlurmClient, name: str) -> AsyncIterator[None]:
    try:
        yield
    finally:
        await remove_dynamic_node(slurm, name)


async def label_external(kube: KubeClient, name: str, partitions: str | None) -> None:
    annotations = {ANNOTATION_EXTERNAL_NODE_PARTITIONS: partitions} if partitions else {}
    patch = {"metadata": {"labels": {LABEL_EXTERNAL_NODE: "true"}, "annotations": annotations}}
    await kube.patch_node(name, patch, patch_type="merge")


async def test_external_node_registered_then_drained_and_deleted_once_its_job_ends(
    sandbox: SlurmSandbox, slurm: SlurmClient, track_jobs: Callable[[int], int]
) -> None:
    mcs = unique_mcs()
    cfg = controller_config(sandbox, mcs)
    name = "ext-" + secrets.token_hex(3)
    missing = "nosuch" + secrets.token_hex(2)
    async with deleted_after(slurm, name), sandbox_kube(sandbox) as (srv, kube):
        srv.set_node_ready(name)  # cpu 8, memory 32Gi
        gpus = {"nvidia.com/gpu": "2"}
        await kube.patch(
            NODES,
            name,
            {"status": {"capacity": gpus, "allocatable": gpus}},
            subresource="status",
        )
        async with running_controller(cfg, kube) as ctl:
            await label_external(kube, name, f"{sandbox.partition},{missing}")

            async def registered() -> bool:
                n = await slurm_node(slurm, name)
                return n is not None and sandbox.partition in n.partitions

            await wait_for(registered, what="labelled node registered and in its partition")
            sn = await slurm.get_node(name)
            assert sn.external
            assert (sn.cpus, sn.real_memory_mib) == (8, 32 * 1024)
            assert set(sn.features) == {sandbox.partition, missing}
            assert sn.comment == EXTERNAL_NODE_COMMENT_PREFIX + mcs

            reasons = {e["reason"]: e for e in await node_events(kube, name)}
            assert reasons[EVENT_EXTERNAL_NODE_REGISTERED]["type"] == "Normal"
            # Slurm 26.05 refuses file-less GPUs on dynamic nodes: said, not hidden.
            assert reasons[EVENT_EXTERNAL_NODE_NO_GPUS]["type"] == "Warning"
            assert "gpu:2" in reasons[EVENT_EXTERNAL_NODE_NO_GPUS]["message"]
            assert missing in reasons[EVENT_EXTERNAL_NODE_PARTITION]["message"]

            async def managed() -> bool:
                return taint_of(await kube.get(NODES, name), MANAGED_NODE_TAINT) is not None

            await wait_for(managed, what="managed-node taint on the registered node")

            # Idempotent: a full resync changes nothing in Slurm.
            await settle(ctl)
            assert await slurm.get_node(name) == sn

            # A job runs on it (every other node of the partition excluded).
            spec = JobSpec(
                name="ext-node-job",
                partition=sandbox.partition,
                min_nodes=1,
                tasks=1,
                exclusive=False,
                excluded_nodes=sandbox.external_nodes,
            )
            job = track_jobs(await slurm.submit(spec))

            async def running() -> bool:
                return (await slurm.get_job(job)).state.primary == "RUNNING"

            await wait_for(running, what="a job running on the external node")

            # Label removed: drained at once, NOT deleted while the job runs.
            await kube.patch_node(
                name, {"metadata": {"labels": {LABEL_EXTERNAL_NODE: None}}}, patch_type="merge"
            )

            async def draining() -> bool:
                n = await slurm_node(slurm, name)
                return n is not None and n.drain and n.reason == DEREGISTER_REASON

            await wait_for(draining, what="unlabelled node drained")
            await settle(ctl)
            assert await slurm_node(slurm, name) is not None, "deleted while a job ran on it"

            await slurm.cancel(job)

            async def deleted() -> bool:
                return await slurm_node(slurm, name) is None

            await wait_for(deleted, what="drained node deleted once no job runs on it")

            async def unmanaged() -> bool:
                return taint_of(await kube.get(NODES, name), MANAGED_NODE_TAINT) is None

            await wait_for(unmanaged, what="managed-node taint removed with the Slurm node")


async def test_deleting_the_kubernetes_node_deletes_its_external_slurm_node(
    sandbox: SlurmSandbox, slurm: SlurmClient
) -> None:
    cfg = controller_config(sandbox, unique_mcs())
    name = "ext-" + secrets.token_hex(3)
    async with deleted_after(slurm, name), sandbox_kube(sandbox) as (srv, kube):
        srv.set_node_ready(name)
        async with running_controller(cfg, kube):
            await label_external(kube, name, None)

            async def registered() -> bool:
                n = await slurm_node(slurm, name)
                return n is not None and cfg.partition in n.partitions

            await wait_for(registered, what="registered in the default partition")
            await kube.delete(NODES, name)

            async def deleted() -> bool:
                return await slurm_node(slurm, name) is None

            await wait_for(deleted, what="orphaned external node drained and deleted")


async def test_bad_partition_annotation_gives_a_warning_event_naming_the_field(
    sandbox: SlurmSandbox, slurm: SlurmClient
) -> None:
    cfg = controller_config(sandbox, unique_mcs())
    name = "ext-" + secrets.token_hex(3)
    async with deleted_after(slurm, name), sandbox_kube(sandbox) as (srv, kube):
        srv.set_node_ready(name)
        async with running_controller(cfg, kube) as ctl:
            await label_external(kube, name, "good,bad name")

            async def warned() -> list[dict[str, Any]]:
                return [
                    e
                    for e in await node_events(kube, name)
                    if e["reason"] == EVENT_EXTERNAL_NODE_INVALID
                ]

            async def has_warning() -> bool:
                return bool(await warned())

            await wait_for(has_warning, what="Warning event on the node")
            (event,) = await warned()
            assert event["type"] == "Warning"
            assert ANNOTATION_EXTERNAL_NODE_PARTITIONS in event["message"]
            assert "'bad name'" in event["message"]
            await settle(ctl)
            await settle(ctl)
            assert await slurm_node(slurm, name) is None
            # Said once, not once per resync.
            (again,) = await warned()
            assert again.get("count", 1) == 1


async def test_external_node_rejoins_its_partition_after_slurmctld_restart(
    sandbox: SlurmSandbox, slurm: SlurmClient
) -> None:
    """Slurm 26.05 keeps a dynamic node (and its comment) over a restart, but forgets the
    partition membership ``scontrol update nodes+=`` gave it; the controller repairs it."""
    cfg = controller_config(sandbox, unique_mcs())
    name = "ext-" + secrets.token_hex(3)

    async def in_partition() -> bool:
        n = await slurm_node(slurm, name)
        return n is not None and cfg.partition in n.partitions

    async with deleted_after(slurm, name), sandbox_kube(sandbox) as (srv, kube):
        srv.set_node_ready(name)
        async with running_controller(cfg, kube):
            await label_external(kube, name, None)
            await wait_for(in_partition, what="registered in the default partition")
        # Controller stopped: restart slurmctld and see what Slurm kept.
        await sandbox_cli("restart-ctld")

        async def answering() -> bool:
            try:
                return await slurm_node(slurm, name) is not None
            except SlurmError:
                return False  # still starting

        await wait_for(answering, what="slurmctld back with the dynamic node")
        kept = await slurm.get_node(name)
        assert kept.comment == EXTERNAL_NODE_COMMENT_PREFIX + cfg.mcs_label
        assert cfg.partition not in kept.partitions
        async with running_controller(cfg, kube):
            await wait_for(in_partition, what="partition membership repaired")
