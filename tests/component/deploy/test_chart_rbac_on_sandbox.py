"""The chart's rendered RBAC, applied to the sandbox API server (which authorizes like
kube-apiserver 1.36), lets each component make the writes it makes, and nothing more:
the scheduler writes a ResourceClaim's allocation (which needs ``resourceclaims/binding``
since Kubernetes 1.36), the controller takes a pod out of ``reservedFor``, the admission
webhook only reads namespaces. This test fails on a chart without
``resourceclaims/binding``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from chart_helpers import Helm

from bridge.errors import KubeForbidden
from bridge.kube.client import KubeClient
from bridge.kube.resources import DEVICE_TAINT_RULES, NAMESPACES, PODS, Resource
from bridge.kube.watch import Watcher
from sandbox import chart_rbac
from sandbox.cluster import SandboxCluster
from sandbox.kubeapi import SANDBOX_TOKEN
from tests.clients import kube_for_host

CLAIMS = Resource("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True)
NS = "team"
CLAIM = {
    "metadata": {"name": "c"},
    "spec": {
        "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}
    },
}
ALLOCATION = {"devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com",
                                       "pool": "n0", "device": "gpu-0"}]}}  # fmt: skip
CONSUMER = {"resource": "pods", "name": "p", "uid": "u-1"}


@pytest.fixture
def kube_version() -> str:
    return "1.36"


@pytest.fixture
async def admin(kube_version: str) -> AsyncIterator[KubeClient]:
    async with (
        SandboxCluster(port=0, resourceclaim_controller=False, kube_version=kube_version) as srv,
        kube_for_host(srv.url, request_timeout=5, token=SANDBOX_TOKEN) as kube,
    ):
        await kube.create(NAMESPACES, {"metadata": {"name": NS}})
        yield kube


async def as_component(admin: KubeClient, helm: Helm, component: str, *sets: str) -> KubeClient:
    ids = chart_rbac.render(helm=helm.binary, sets=sets)
    await chart_rbac.apply(admin, ids)
    token = await chart_rbac.service_account_token(admin, *ids.service_accounts[component])
    return kube_for_host(str(admin.configuration.host), request_timeout=5, token=token)


async def patch_status(kube: KubeClient, status: dict[str, Any]) -> None:
    await kube.patch(CLAIMS, "c", {"status": status}, namespace=NS, subresource="status")


async def test_the_charts_scheduler_writes_a_claims_allocation_and_reservation(
    admin: KubeClient, helm: Helm
) -> None:
    await admin.create(CLAIMS, CLAIM, NS)
    async with await as_component(admin, helm, "scheduler") as sched:
        await patch_status(sched, {"allocation": ALLOCATION, "reservedFor": [CONSUMER]})
    claim = await admin.get(CLAIMS, "c", NS)
    assert claim["status"]["reservedFor"] == [CONSUMER]


async def test_the_charts_controller_releases_a_claim(admin: KubeClient, helm: Helm) -> None:
    await admin.create(CLAIMS, CLAIM, NS)
    await patch_status(admin, {"allocation": ALLOCATION, "reservedFor": [CONSUMER]})
    async with await as_component(admin, helm, "controller") as ctl:
        await patch_status(ctl, {"allocation": None, "reservedFor": None})
    assert not (await admin.get(CLAIMS, "c", NS)).get("status", {}).get("allocation")


async def test_the_charts_admission_webhook_may_only_get_namespaces(
    admin: KubeClient, helm: Helm
) -> None:
    async with await as_component(admin, helm, "admission") as adm:
        assert (await adm.get(NAMESPACES, NS))["metadata"]["name"] == NS
        with pytest.raises(KubeForbidden, match='cannot list resource "namespaces"'):
            await adm.list(NAMESPACES)
        with pytest.raises(KubeForbidden, match='cannot list resource "pods"'):
            await adm.list(PODS, NS)


async def test_the_charts_controller_may_not_read_namespaces_without_a_selector(
    admin: KubeClient, helm: Helm
) -> None:
    async with await as_component(admin, helm, "controller") as ctl:
        with pytest.raises(KubeForbidden, match='cannot get resource "namespaces"'):
            await ctl.get(NAMESPACES, NS)


async def test_the_charts_controller_gets_a_namespace_with_a_selector(
    admin: KubeClient, helm: Helm
) -> None:
    """With managedNamespaceSelector, the controller GETs a pod's namespace before it
    believes the pod's job-id label (controller.ownership): get, and nothing more."""
    selector = "config.managedNamespaceSelector.matchLabels.tenant=team"
    async with await as_component(admin, helm, "controller", selector) as ctl:
        assert (await ctl.get(NAMESPACES, NS))["metadata"]["name"] == NS
        with pytest.raises(KubeForbidden, match='cannot list resource "namespaces"'):
            await ctl.list(NAMESPACES)


@pytest.mark.parametrize("kube_version", ["1.37"])
@pytest.mark.parametrize("component", ["scheduler", "controller"])
async def test_the_charts_scheduler_and_controller_may_list_and_watch_device_taint_rules(
    admin: KubeClient, helm: Helm, component: str
) -> None:
    """Kubernetes 1.37 serves DeviceTaintRules: both components list and watch them."""
    rule = {"metadata": {"name": "r"}, "spec": {"taint": {"key": "k", "effect": "NoSchedule"}}}
    await admin.create(DEVICE_TAINT_RULES, rule)
    async with await as_component(admin, helm, component) as kube:
        assert await kube.serves(DEVICE_TAINT_RULES)
        async with Watcher(kube, DEVICE_TAINT_RULES) as w:
            assert [ev.key for ev in await w.relist()] == ["r"]
