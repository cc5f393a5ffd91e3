"""Fixtures: a function-scoped scripted loopback server and an adapter client on it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from bridge.kube.client import KubeClient
from tests.clients import kube_for_host
from tests.component.kube.scripted import ScriptedServer
from tests.fake_clock import FakeClock


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    srv = ScriptedServer()
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def kube(server: ScriptedServer, clock: FakeClock) -> AsyncIterator[KubeClient]:
    client = kube_for_host(server.url, request_timeout=5.0, token="t0ken", clock=clock)
    try:
        yield client
    finally:
        await client.close()
