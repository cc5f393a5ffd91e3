"""The controller's node reconcile against the sandbox API server: the Node condition
``SlinkySlurmGRESCompatible`` (upstream's name and reasons) says whether the Slurm node's
GRES and the node's ResourceSlices agree, with a Warning ``IncompatibleSlurmGRES`` when
they do not; the kubelet's conditions stay; nothing is said before the slices are known;
the condition leaves a node the bridge no longer manages. Slurm is a stand-in holding the
node list (the pure comparison: tests/unit/devices/test_node_gres.py; real Slurm:
tests/integration/test_controller_nodes_e2e.py)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

from bridge.config import parse_config
from bridge.errors import KubeNotFound
from bridge.kube.client import KubeClient
from bridge.kube.events import EventRecorder
from bridge.kube.resources import DEVICE_TAINT_RULES, EVENTS, NODES, RESOURCE_SLICES
from bridge.kube.watch import WatchEvent
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import SlurmNode
from bridge.wellknown import CONDITION_SLURM_GRES_COMPATIBLE
from controller.model import node_key
from controller.runtime import Controller
from sandbox.cluster import SandboxCluster
from sandbox.controllers import dra_driver as sandbox_dra
from sandbox.kubeapi import SANDBOX_TOKEN
from tests.clients import kube_for_host

NODE = "gpu-node-0"


def slice_of(node: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    s = sandbox_dra.gpu_slice(node, 0)
    s["spec"]["devices"] = devices
    return s


def gpus(n: int) -> list[dict[str, Any]]:
    return [
        {"name": f"gpu-{i}", "attributes": {"type": {"string": "gpu"}, "index": {"int": i}}}
        for i in range(n)
    ]


def slices_1g(n: int) -> list[dict[str, Any]]:
    return [
        {
            "name": f"gpu-0-mig-1g10gb-{k}",
            "attributes": {"type": {"string": "mig"}, "profile": {"string": "1g.10gb"}},
        }
        for k in range(n)
    ]


def slurm_node(gres: str, partitions: tuple[str, ...] = ("slurm-bridge",)) -> SlurmNode:
    return SlurmNode(name=NODE, state=frozenset({"IDLE"}), gres=gres, partitions=partitions)


class Rig:
    def __init__(self, ctl: Controller, kube: KubeClient) -> None:
        self.ctl = ctl
        self.kube = kube

    async def sync(self, slurm: SlurmNode) -> dict[str, Any] | None:
        """Feed what the watches and the sweep would, reconcile the node, and return its
        condition as the API server has it now."""
        for n in (await self.kube.list(NODES)).items:
            await self.ctl.on_node(WatchEvent("MODIFIED", n))
        self.ctl.node_reconcile.slurm_nodes_listed([slurm])
        await self.ctl.reconcile(node_key(NODE))
        return await self.condition()

    async def condition(self) -> dict[str, Any] | None:
        node = await self.kube.get(NODES, NODE)
        for c in node["status"].get("conditions") or []:
            if c["type"] == CONDITION_SLURM_GRES_COMPATIBLE:
                return dict(c)
        return None

    async def put_slice(self, devices: list[dict[str, Any]]) -> None:
        obj = slice_of(NODE, devices)
        with contextlib.suppress(KubeNotFound):
            await self.kube.delete(RESOURCE_SLICES, obj["metadata"]["name"])
        made = await self.kube.create(RESOURCE_SLICES, obj)
        await self.ctl.on_slice(WatchEvent("ADDED", made))

    async def warnings(self) -> list[str]:
        events = (await self.kube.list(EVENTS, "default")).items
        return [
            e["message"]
            for e in events
            if e.get("reason") == "IncompatibleSlurmGRES" and e["involvedObject"]["name"] == NODE
        ]


@asynccontextmanager
async def rig(kube_version: str = "1.36") -> AsyncIterator[Rig]:
    cfg = parse_config({"partition": "slurm-bridge"}, env={})
    async with (
        SandboxCluster(port=0, kube_version=kube_version) as srv,
        kube_for_host(srv.url, request_timeout=5, token=SANDBOX_TOKEN) as kube,
    ):
        srv.api.set_node_ready(NODE)
        events = EventRecorder(kube, "slurm-bridge-controller")
        yield Rig(Controller(cfg, cast(SlurmClient, None), kube, events=events), kube)


async def test_nothing_is_said_until_the_nodes_slices_are_known() -> None:
    async with rig() as r:
        assert await r.sync(slurm_node("gpu:2")) is None


async def test_slices_that_agree_with_slurm_set_the_condition_true_beside_ready() -> None:
    async with rig() as r:
        await r.put_slice(gpus(2))
        r.ctl.slices_listed()
        cond = await r.sync(slurm_node("gpu:2(S:0)"))
        assert cond is not None
        assert (cond["status"], cond["reason"]) == ("True", "SlurmGRESCompatible")
        assert "Slurm node gpu-node-0 has Gres=gpu:2" in cond["message"]
        node = await r.kube.get(NODES, NODE)
        assert "Ready" in [c["type"] for c in node["status"]["conditions"]]
        assert await r.warnings() == []


async def test_slices_that_disagree_set_it_false_with_one_warning_then_true_when_fixed() -> None:
    async with rig() as r:
        await r.put_slice(slices_1g(7))
        r.ctl.slices_listed()
        cond = await r.sync(slurm_node("gpu:2"))
        assert cond is not None
        assert (cond["status"], cond["reason"]) == ("False", "IncompatibleSlurmGRES")
        assert (
            "Slurm has gpu:2 but the node's ResourceSlices have 0 such device(s)"
            in (cond["message"])
        )
        assert "7 device(s) of gpu:1g.10gb that Slurm does not have" in cond["message"]
        since = cond["lastTransitionTime"]
        again = await r.sync(slurm_node("gpu:2"))
        assert again is not None
        assert again["lastTransitionTime"] == since
        assert await r.warnings() == [cond["message"]]  # said once, not per reconcile
        fixed = await r.sync(slurm_node("gpu:1g.10gb:7"))
        assert fixed is not None
        assert (fixed["status"], fixed["reason"]) == ("True", "SlurmGRESCompatible")


async def test_a_slice_change_queues_the_node_and_flips_the_condition() -> None:
    async with rig() as r:
        await r.put_slice(gpus(2))
        r.ctl.slices_listed()
        cond = await r.sync(slurm_node("gpu:2"))
        assert cond is not None
        assert cond["status"] == "True"
        q = r.ctl.queue
        while len(q):
            q.done(await q.get())  # type: ignore[arg-type]
        await r.put_slice(gpus(1))
        assert len(q) == 1
        assert await q.get() == node_key(NODE)
        cond = await r.sync(slurm_node("gpu:2"))
        assert cond is not None
        assert cond["status"] == "False"
        assert (
            "Slurm has gpu:2 but the node's ResourceSlices have 1 such device(s)"
            in (cond["message"])
        )


async def test_the_condition_leaves_a_node_the_bridge_no_longer_manages() -> None:
    async with rig() as r:
        r.ctl.slices_listed()
        cond = await r.sync(slurm_node(""))
        assert cond is not None
        assert cond["status"] == "True"  # no GPUs on either side
        assert await r.sync(slurm_node("", partitions=("batch",))) is None


async def test_tainted_devices_count_as_unavailable_by_slice_or_device_taint_rule() -> None:
    """Kubernetes 1.37 (DeviceTaintRule served): a device tainted NoSchedule in its slice,
    then one a DeviceTaintRule taints NoExecute, no longer back Slurm's GRES; an
    informational (None) taint still does; the condition names the tainted devices."""
    async with rig(kube_version="1.37") as r:
        devices = gpus(2)
        devices[0]["taints"] = [{"key": "example.com/hot", "effect": "NoSchedule"}]
        devices[1]["taints"] = [{"key": "example.com/info", "effect": "None"}]
        await r.put_slice(devices)
        r.ctl.slices_listed()
        cond = await r.sync(slurm_node("gpu:2"))
        assert cond is not None
        assert (cond["status"], cond["reason"]) == ("False", "IncompatibleSlurmGRES")
        assert (
            "Slurm has gpu:2 but the node's ResourceSlices have 1 such device(s)"
            in (cond["message"])
        )
        assert (
            "tainted devices not counted: gpu-0 (example.com/hot:NoSchedule)" in (cond["message"])
        )
        rule = {
            "metadata": {"name": "gpu-1-broken"},
            "spec": {
                "deviceSelector": {"pool": NODE, "device": "gpu-1"},
                "taint": {"key": "example.com/broken", "value": "ecc", "effect": "NoExecute"},
            },
        }
        made = await r.kube.create(DEVICE_TAINT_RULES, rule)
        await r.ctl.on_taint_rule(WatchEvent("ADDED", made))
        cond = await r.sync(slurm_node("gpu:2"))
        assert cond is not None
        assert "have 0 such device(s)" in cond["message"]
        assert "gpu-1 (example.com/broken=ecc:NoExecute)" in cond["message"]
        await r.ctl.on_taint_rule(WatchEvent("DELETED", made))
        cond = await r.sync(slurm_node("gpu:1"))
        assert cond is not None
        assert (cond["status"], cond["reason"]) == ("True", "SlurmGRESCompatible")
