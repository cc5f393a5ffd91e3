"""bridge.ops: the one health/readiness/metrics server every component uses."""

from __future__ import annotations

import aiohttp
import pytest
from prometheus_client import CollectorRegistry, Counter

from bridge.config import parse_config
from bridge.ops import OpsServer, component_ops, readiness


async def _get(port: int, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{port}{path}") as r:
        return r.status, await r.text()


async def test_readyz_answers_503_with_the_reason_until_ready_then_200() -> None:
    state = {"ok": False}
    ops = OpsServer(
        CollectorRegistry(),
        ready=readiness(lambda: state["ok"], not_ready="syncing"),
        host="127.0.0.1",
        port=0,
    )
    await ops.start()
    try:
        (port,) = ops.bound_ports
        assert await _get(port, "/healthz") == (200, "ok")
        assert await _get(port, "/readyz") == (503, "syncing")
        state["ok"] = True
        assert await _get(port, "/readyz") == (200, "ok")
    finally:
        await ops.stop()


async def test_a_distinct_metrics_port_gets_its_own_listener_serving_the_components_registry() -> (
    None
):
    registry = CollectorRegistry()
    Counter("demo_things", "things", registry=registry).inc(3)
    probe = OpsServer(CollectorRegistry(), ready=readiness(lambda: True), host="127.0.0.1", port=0)
    await probe.start()
    free = probe.bound_ports[0]
    await probe.stop()
    ops = OpsServer(
        registry, ready=readiness(lambda: True), host="127.0.0.1", port=0, metrics_port=free
    )
    await ops.start()
    try:
        health, metrics = ops.bound_ports
        assert metrics == free
        assert health != free
        status, text = await _get(metrics, "/metrics")
        assert status == 200
        assert "demo_things_total 3.0" in text
    finally:
        await ops.stop()


async def test_two_servers_never_share_metrics() -> None:
    a, b = CollectorRegistry(), CollectorRegistry()
    Counter("only_in_a", "x", registry=a).inc()
    ops = OpsServer(b, ready=readiness(lambda: True), host="127.0.0.1", port=0)
    await ops.start()
    try:
        _, text = await _get(ops.bound_ports[0], "/metrics")
        assert "only_in_a" not in text
    finally:
        await ops.stop()


class _Elector:
    def __init__(self, leading: bool) -> None:
        self.is_leader = leading


@pytest.mark.parametrize(
    ("elector", "synced", "ready"),
    [
        pytest.param(_Elector(False), False, True, id="standby-replica-is-a-ready-warm-spare"),
        pytest.param(_Elector(True), False, False, id="leader-not-synced-is-not-ready"),
        pytest.param(_Elector(True), True, True, id="leader-synced-is-ready"),
        pytest.param(None, False, False, id="single-replica-not-synced-is-not-ready"),
        pytest.param(None, True, True, id="single-replica-synced-is-ready"),
    ],
)
def test_component_readiness_by_leadership_and_sync(
    elector: _Elector | None, synced: bool, ready: bool
) -> None:
    cfg = parse_config({}, env={})
    ops = component_ops(cfg, CollectorRegistry(), synced=lambda: synced, elector=elector)
    assert ops.ready()[0] is ready
