"""Leader election against a scripted Lease endpoint that is as strict as the real one."""

from __future__ import annotations

import asyncio
import contextlib
import re
from typing import Any

import pytest
from aiohttp import web

from bridge.errors import ConfigError
from bridge.kube.client import KubeClient
from bridge.kube.leader import LeaderElector
from tests.component.kube.scripted import ScriptedServer, status_response, wait_until
from tests.fake_clock import FakeClock

LEASES = "/apis/coordination.k8s.io/v1/namespaces/ns/leases"
MICRO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


class LeaseEndpoint:
    """GET/POST/PUT of one Lease with resourceVersion checks and MicroTime validation."""

    def __init__(self, server: ScriptedServer) -> None:
        self.lease: dict[str, Any] | None = None
        self.rv = 0
        self.fail_with: int | None = None
        server.on("GET", f"{LEASES}/l", self.get)
        server.on("POST", LEASES, self.create)
        server.on("PUT", f"{LEASES}/l", self.put)

    def _check(self, body: dict[str, Any]) -> web.Response | None:
        for k in ("acquireTime", "renewTime"):
            v = body["spec"].get(k)
            if v is not None and not MICRO.match(v):
                return status_response(400, "BadRequest", f"spec.{k}: bad MicroTime {v}")
        return None

    def _store(self, body: dict[str, Any]) -> web.Response:
        self.rv += 1
        body["metadata"]["resourceVersion"] = str(self.rv)
        self.lease = body
        return web.json_response(body, status=200)

    async def get(self, _: web.Request) -> web.StreamResponse:
        if self.fail_with:
            return status_response(self.fail_with, "InternalError", "down")
        if self.lease is None:
            return status_response(404, "NotFound", 'leases "l" not found')
        return web.json_response(self.lease)

    async def create(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if self.lease is not None:
            return status_response(409, "AlreadyExists", 'leases "l" already exists')
        return self._check(body) or self._store(body)

    async def put(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if self.fail_with:
            return status_response(self.fail_with, "InternalError", "down")
        assert self.lease is not None
        if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            return status_response(409, "Conflict", "the object has been modified")
        return self._check(body) or self._store(body)


def elector(kube: KubeClient, identity: str, clock: FakeClock) -> LeaderElector:
    return LeaderElector(
        kube,
        namespace="ns",
        name="l",
        identity=identity,
        lease_duration=15,
        renew_deadline=10,
        retry_period=2,
        clock=clock,
    )


async def test_first_candidate_creates_the_lease_with_micro_times(
    server: ScriptedServer, kube: KubeClient, clock: FakeClock
) -> None:
    ep = LeaseEndpoint(server)
    e = elector(kube, "a", clock)
    assert await e.try_acquire_or_renew()
    assert e.is_leader
    assert ep.lease is not None
    spec = ep.lease["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"], spec["leaseDurationSeconds"]) == (
        "a",
        0,
        15,
    )
    assert spec["renewTime"] == "2026-01-01T00:00:00.000000Z"
    clock.advance(2.5)
    assert await e.try_acquire_or_renew()
    assert ep.lease["spec"]["renewTime"] == "2026-01-01T00:00:02.500000Z"
    assert ep.lease["spec"]["acquireTime"] == "2026-01-01T00:00:00.000000Z"
    assert ep.lease["spec"]["leaseTransitions"] == 0


async def test_takeover_waits_a_full_lease_duration_on_the_observers_clock(
    server: ScriptedServer, kube: KubeClient, clock: FakeClock
) -> None:
    """The holder's renewTime is an hour old by its own clock; that is never compared
    with ours: the follower waits leaseDurationSeconds of seeing no change."""
    ep = LeaseEndpoint(server)
    ep.lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "l", "namespace": "ns", "resourceVersion": "7"},
        "spec": {
            "holderIdentity": "old",
            "leaseDurationSeconds": 15,
            "renewTime": "2025-12-31T23:00:00.000000Z",
            "leaseTransitions": 4,
        },
    }
    e = elector(kube, "b", clock)
    assert not await e.try_acquire_or_renew()
    clock.advance(14.9)
    assert not await e.try_acquire_or_renew()
    clock.advance(0.2)
    assert await e.try_acquire_or_renew()
    assert ep.lease["spec"]["holderIdentity"] == "b"
    assert ep.lease["spec"]["leaseTransitions"] == 5


async def test_a_409_on_the_put_means_the_race_was_lost(
    server: ScriptedServer, kube: KubeClient, clock: FakeClock
) -> None:
    ep = LeaseEndpoint(server)
    a, b = elector(kube, "a", clock), elector(kube, "b", clock)
    assert await a.try_acquire_or_renew()
    clock.advance(20)  # a's lease looks expired to b ...
    assert ep.lease is not None
    assert not await b.try_acquire_or_renew()  # first sight of the record: b waits
    clock.advance(16)
    original_put = ep.put

    async def racing_put(request: web.Request) -> web.StreamResponse:
        # ... but a renews between b's read and b's write.
        assert ep.lease is not None
        ep.rv += 1
        ep.lease["metadata"]["resourceVersion"] = str(ep.rv)
        return await original_put(request)

    server.on("PUT", f"{LEASES}/l", racing_put)
    assert not await b.try_acquire_or_renew()
    assert not b.is_leader


@pytest.mark.parametrize(
    ("kw", "key"),
    [
        pytest.param({"renew_deadline": 15}, "renewDeadlineSeconds", id="deadline-not-below-lease"),
        pytest.param({"retry_period": 10}, "retryPeriodSeconds", id="retry-not-below-deadline"),
        pytest.param({"identity": ""}, "leaderElection", id="empty-identity"),
    ],
)
def test_unsafe_timings_are_config_errors(kw: dict[str, Any], key: str) -> None:
    args: dict[str, Any] = {
        "namespace": "ns",
        "name": "l",
        "identity": "a",
        "lease_duration": 15,
        "renew_deadline": 10,
        "retry_period": 2,
    }
    with pytest.raises(ConfigError, match=key):
        LeaderElector(None, **{**args, **kw})  # type: ignore[arg-type]


async def test_work_is_cancelled_when_renewals_fail_past_the_deadline_and_lease_released(
    server: ScriptedServer, kube: KubeClient, clock: FakeClock
) -> None:
    ep = LeaseEndpoint(server)
    e = elector(kube, "a", clock)
    state = {"running": False, "cancelled": 0}

    async def work() -> None:
        state["running"] = True
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            state["cancelled"] += 1
            raise
        finally:
            state["running"] = False

    task = asyncio.ensure_future(e.run(work))
    try:
        await wait_until(lambda: state["running"] and clock._sleepers, what="leading")
        ep.fail_with = 500
        for _ in range(12):
            clock.advance(1)
            await wait_until(lambda: clock._sleepers or not state["running"], what="idle")
        assert state == {"running": False, "cancelled": 1}
        assert not e.is_leader
        ep.fail_with = None  # the server is back: a re-acquires (it still holds the record)
        clock.advance(2)
        await wait_until(lambda: state["running"], what="re-elected")
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert ep.lease is not None
    assert ep.lease["spec"].get("holderIdentity") is None  # released on shutdown
    assert ep.lease["spec"]["leaseDurationSeconds"] == 1
