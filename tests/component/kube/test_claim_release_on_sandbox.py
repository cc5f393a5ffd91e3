"""The controller's claim release (controller.apply: ReleaseClaim, DeleteClaim) against the
sandbox API server: only the finished pod leaves ``reservedFor``, the last one deallocates,
repeats and 404s are done, only the pod's own extended-resource claim is deleted, and it
is safe next to the resourceclaim controller stand-in doing the same."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from bridge.errors import KubeNotFound
from bridge.kube.client import KubeClient
from bridge.kube.resources import PODS, RESOURCE_CLAIMS
from bridge.slurm.client import SlurmClient
from bridge.translate.dra import EXTENDED_CLAIM_ANNOTATION
from bridge.wellknown import CLAIM_DELETE_PROTECTION
from controller.apply import Applier
from controller.model import DeleteClaim, ReleaseClaim
from sandbox.cluster import SandboxCluster
from sandbox.kubeapi import SANDBOX_TOKEN
from tests.clients import kube_for_host
from tests.waiting import eventually

NS = "default"
SPEC = {
    "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}
}
ALLOCATION = {
    "devices": {
        "results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"}]
    }
}


@pytest.fixture(params=[False, True], ids=["bridge-alone", "with-kcm-stand-in"])
async def sandbox_kube(request: pytest.FixtureRequest) -> AsyncIterator[KubeClient]:
    async with (
        SandboxCluster(nodes=["n1"], resourceclaim_controller=request.param) as srv,
        kube_for_host(srv.url, request_timeout=5, token=SANDBOX_TOKEN) as client,
    ):
        yield client


def applier(kube: KubeClient) -> Applier:
    return Applier(cast(SlurmClient, None), kube)  # claims never reach Slurm


async def running_pod(kube: KubeClient, name: str) -> str:
    body = {
        "metadata": {"name": name},
        "spec": {"nodeName": "n1", "containers": [{"name": "main", "image": "busybox"}]},
    }
    created = await kube.create(PODS, body, NS)
    await kube.patch_pod_status(NS, name, {"status": {"phase": "Running"}}, patch_type="merge")
    return str(created["metadata"]["uid"])


async def reserved_claim(
    kube: KubeClient, name: str, pods: dict[str, str], owner: str | None = None
) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name, "finalizers": [CLAIM_DELETE_PROTECTION]}
    if owner is not None:
        md["annotations"] = {EXTENDED_CLAIM_ANNOTATION: "true"}
        md["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": owner,
                "uid": pods[owner],
                "controller": True,
            }
        ]
    await kube.create(RESOURCE_CLAIMS, {"metadata": md, "spec": SPEC}, NS)
    refs = [{"resource": "pods", "name": n, "uid": u} for n, u in pods.items()]
    return await kube.patch(
        RESOURCE_CLAIMS,
        name,
        {"status": {"allocation": ALLOCATION, "reservedFor": refs}},
        namespace=NS,
        subresource="status",
    )


async def released(kube: KubeClient, name: str) -> bool:
    claim = await kube.get(RESOURCE_CLAIMS, name, NS)
    return not claim.get("status") and CLAIM_DELETE_PROTECTION not in (
        claim["metadata"].get("finalizers") or []
    )


async def gone(kube: KubeClient, name: str) -> bool:
    try:
        await kube.get(RESOURCE_CLAIMS, name, NS)
    except KubeNotFound:
        return True
    return False


async def test_release_takes_only_the_finished_pod_out_then_the_last_one_deallocates(
    sandbox_kube: KubeClient,
) -> None:
    kube = sandbox_kube
    pods = {"a": await running_pod(kube, "a"), "b": await running_pod(kube, "b")}
    await reserved_claim(kube, "shared", pods)
    await kube.patch_pod_status(NS, "a", {"status": {"phase": "Succeeded"}}, patch_type="merge")
    await applier(kube).apply([ReleaseClaim(NS, "shared", pods["a"])])
    claim = await kube.get(RESOURCE_CLAIMS, "shared", NS)
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["b"]
    assert claim["status"]["allocation"] == ALLOCATION
    assert CLAIM_DELETE_PROTECTION in claim["metadata"]["finalizers"]
    await kube.patch_pod_status(NS, "b", {"status": {"phase": "Failed"}}, patch_type="merge")
    for _ in range(2):  # a repeat (or the stand-in having done it) is a no-op
        await applier(kube).apply([ReleaseClaim(NS, "shared", pods["b"])])
    await eventually(lambda: released(kube, "shared"), within=5, what="claim released")
    await applier(kube).apply([ReleaseClaim(NS, "missing", pods["b"])])  # 404: done


async def test_only_the_pods_own_extended_resource_claim_is_deleted(
    sandbox_kube: KubeClient,
) -> None:
    kube = sandbox_kube
    pods = {"a": await running_pod(kube, "a"), "b": await running_pod(kube, "b")}
    await reserved_claim(kube, "b-extended", {"b": pods["b"]}, owner="b")
    await kube.patch_pod_status(NS, "a", {"status": {"phase": "Succeeded"}}, patch_type="merge")
    await applier(kube).apply([DeleteClaim(NS, "b-extended", pods["a"])])  # not a's
    claim = await kube.get(RESOURCE_CLAIMS, "b-extended", NS)
    assert not claim["metadata"].get("deletionTimestamp")
    await kube.patch_pod_status(NS, "b", {"status": {"phase": "Succeeded"}}, patch_type="merge")
    await applier(kube).apply(
        [ReleaseClaim(NS, "b-extended", pods["b"]), DeleteClaim(NS, "b-extended", pods["b"])]
    )

    await eventually(lambda: gone(kube, "b-extended"), within=5, what="extended claim deleted")


async def test_the_finalizer_of_an_unallocated_claim_goes_only_when_it_is_being_deleted(
    sandbox_kube: KubeClient,
) -> None:
    kube = sandbox_kube
    uid = await running_pod(kube, "a")
    # the scheduler's in-between state: finalizer added, allocation not written yet
    for name in ("pending", "deleting"):
        md = {"name": name, "finalizers": [CLAIM_DELETE_PROTECTION]}
        await kube.create(RESOURCE_CLAIMS, {"metadata": md, "spec": SPEC}, NS)
    await kube.delete(RESOURCE_CLAIMS, "deleting", NS)
    await applier(kube).apply([ReleaseClaim(NS, n, uid) for n in ("pending", "deleting")])
    claim = await kube.get(RESOURCE_CLAIMS, "pending", NS)
    assert claim["metadata"]["finalizers"] == [CLAIM_DELETE_PROTECTION]

    await eventually(lambda: gone(kube, "deleting"), within=5, what="deleted claim finalized")
