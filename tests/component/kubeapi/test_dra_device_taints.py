"""The scheduler's claim allocation against the sandbox API server serving Kubernetes
1.37 (``--kube-version 1.37``: DeviceTaintRule at resource.k8s.io/v1, KEP-5055): a device
a DeviceTaintRule or its slice taints NoSchedule/NoExecute is never given to a request
that does not tolerate it, a request that tolerates it may have it, and a claim holding a
device tainted NoExecute takes no new pod. The rules are read from the API until the
scheduler's copy is synced, then from the copy."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.errors import DeviceAllocationError, InvalidInput
from bridge.kube.resources import DEVICE_TAINT_RULES, RESOURCE_CLAIMS
from sandbox.cluster import SandboxCluster
from tests.component.kubeapi.test_dra_allocate_concurrent import NODE, NS, claim
from tests.component.kubeapi.test_dra_claim_groups import OneGpu, cluster, group_pod

pytestmark = pytest.mark.parametrize("kube_version", ["1.37"], indirect=True)

HOT = {"key": "example.com/hot", "effect": "NoSchedule"}
BROKEN = {"key": "example.com/broken", "value": "ecc", "effect": "NoExecute"}


def rule(name: str, taint: dict[str, Any], device: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"deviceSelector": {"pool": NODE, "device": device}, "taint": taint},
    }


def devices(c: dict[str, Any]) -> list[str]:
    return [r["device"] for r in c["status"]["allocation"]["devices"]["results"]]


async def test_a_device_a_rule_taints_is_skipped_where_slurm_counts(srv: SandboxCluster) -> None:
    async with cluster(srv, OneGpu(indexed=False)) as (kube, dra):
        await kube.create(DEVICE_TAINT_RULES, rule("gpu-0-hot", HOT, "gpu-0"))
        await kube.create(RESOURCE_CLAIMS, claim("c"), NS)
        p = await group_pod(kube, "p", "c", 7)
        assert await dra.allocate(7, [(p, NODE)], {}) == 1
        assert devices(await kube.get(RESOURCE_CLAIMS, "c", NS)) == ["gpu-1"]
        # both tainted: no device for the next claim, never a tainted one
        await kube.create(DEVICE_TAINT_RULES, rule("gpu-1-hot", HOT, "gpu-1"))
        await kube.create(RESOURCE_CLAIMS, claim("d"), NS)
        q = await group_pod(kube, "q", "d", 8)
        with pytest.raises(DeviceAllocationError):
            await dra.allocate(8, [(q, NODE)], {})
        assert not (await kube.get(RESOURCE_CLAIMS, "d", NS)).get("status")


async def test_a_request_tolerating_the_taint_may_have_the_device(srv: SandboxCluster) -> None:
    async with cluster(srv, OneGpu(indexed=False)) as (kube, dra):
        await kube.create(DEVICE_TAINT_RULES, rule("gpu-0-broken", BROKEN, "gpu-0"))
        body = claim("c")
        exactly = body["spec"]["devices"]["requests"][0]["exactly"]
        exactly["tolerations"] = [{"key": BROKEN["key"], "operator": "Exists"}]
        await kube.create(RESOURCE_CLAIMS, body, NS)
        p = await group_pod(kube, "p", "c", 7)
        assert await dra.allocate(7, [(p, NODE)], {}) == 1
        assert devices(await kube.get(RESOURCE_CLAIMS, "c", NS)) == ["gpu-0"]


async def test_a_shared_claim_holding_a_noexecute_device_takes_no_new_pod(
    srv: SandboxCluster,
) -> None:
    async with cluster(srv, OneGpu()) as (kube, dra):
        await kube.create(RESOURCE_CLAIMS, claim("shared"), NS)
        first = await group_pod(kube, "first", "shared", 7)
        assert await dra.allocate(7, [(first, NODE)], {}) == 1
        await kube.create(DEVICE_TAINT_RULES, rule("gpu-0-broken", BROKEN, "gpu-0"))
        second = await group_pod(kube, "second", "shared", 7)
        with pytest.raises(InvalidInput) as e:
            await dra.allocate(7, [(second, NODE)], {})
        assert "holds device gpu.nvidia.com/n1/gpu-0, tainted example.com/broken=ecc" in str(
            e.value
        )
        c = await kube.get(RESOURCE_CLAIMS, "shared", NS)
        assert [r["name"] for r in c["status"]["reservedFor"]] == ["first"]
