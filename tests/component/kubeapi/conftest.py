"""Fixtures for the sandbox API server conformance suite: a fresh server per test and a
REAL kubernetes_asyncio client configured from the kubeconfig the server writes.

Every test runs against each Kubernetes release the sandbox serves (``--kube-version``:
1.36 and 1.37); a test of one release's API overrides ``kube_version``
(``pytest.mark.parametrize("kube_version", ["1.37"], indirect=True)``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client, config

from sandbox.cluster import SandboxCluster
from sandbox.kubeapi.registry import KUBE_VERSIONS
from tests.component.kubeapi.webhook_server import Webhook


@pytest.fixture(params=KUBE_VERSIONS, ids=[f"kube{v}" for v in KUBE_VERSIONS])
def kube_version(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def srv(kube_version: str) -> AsyncIterator[SandboxCluster]:
    async with SandboxCluster(
        port=0, bookmark_interval=0.2, serviceaccount_delay=0.01, kube_version=kube_version
    ) as s:
        yield s


@pytest.fixture
async def api(srv: SandboxCluster, tmp_path: Path) -> AsyncIterator[client.ApiClient]:
    path = srv.write_kubeconfig(tmp_path / "kubeconfig")
    cfg = client.Configuration()
    await config.load_kube_config(config_file=str(path), client_configuration=cfg)
    async with client.ApiClient(cfg) as c:
        yield c


@pytest.fixture
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


@pytest.fixture
async def webhook() -> AsyncIterator[Webhook]:
    """A real HTTPS admission webhook recording what it is sent (see webhook_server)."""
    hook = Webhook()
    await hook.start()
    try:
        yield hook
    finally:
        await hook.stop()
