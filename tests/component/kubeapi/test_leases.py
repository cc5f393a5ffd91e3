"""KUBE.md: Lease MicroTime format and renewal with the current resourceVersion."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

NS = "slurm-bridge"


def _lease(renew: str, holder: str = "a") -> dict[str, object]:
    return {
        "metadata": {"name": "leader"},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": 15,
            "acquireTime": renew,
            "renewTime": renew,
        },
    }


@pytest.fixture
def coord(api: client.ApiClient) -> client.CoordinationV1Api:
    return client.CoordinationV1Api(api)


async def test_lease_microtime_with_six_digits_and_z_is_accepted(
    coord: client.CoordinationV1Api,
) -> None:
    out = await coord.create_namespaced_lease(NS, _lease("2026-01-01T00:00:00.123456Z"))
    assert out.spec.renew_time == datetime(2026, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("2026-01-01T00:00:00.123456+00:00", id="plus-offset"),
        pytest.param("2026-01-01T00:00:00Z", id="no-fraction"),
        pytest.param("2026-01-01T00:00:00.123Z", id="three-digits"),
    ],
)
async def test_lease_microtime_in_other_formats_answers_400(
    coord: client.CoordinationV1Api, value: str
) -> None:
    with pytest.raises(ApiException) as e:
        await coord.create_namespaced_lease(NS, _lease(value))
    assert e.value.status == 400


async def test_typed_lease_with_aware_datetime_is_rejected(
    coord: client.CoordinationV1Api,
) -> None:
    """kubernetes_asyncio serialises datetimes with isoformat() (+00:00): 400."""
    now = datetime(2026, 1, 1, 0, 0, 0, 5, tzinfo=UTC)
    body = client.V1Lease(
        metadata=client.V1ObjectMeta(name="leader"),
        spec=client.V1LeaseSpec(holder_identity="a", renew_time=now),
    )
    with pytest.raises(ApiException) as e:
        await coord.create_namespaced_lease(NS, body)
    assert e.value.status == 400


async def test_lease_renewal_put_with_current_version_succeeds_and_stale_gets_409(
    coord: client.CoordinationV1Api,
) -> None:
    lease = await coord.create_namespaced_lease(NS, _lease("2026-01-01T00:00:00.000000Z"))
    rv = lease.metadata.resource_version
    body = _lease("2026-01-01T00:00:05.000000Z")
    body["metadata"] = {"name": "leader", "resourceVersion": rv}
    renewed = await coord.replace_namespaced_lease("leader", NS, body)
    assert int(renewed.metadata.resource_version) > int(rv)
    other = _lease("2026-01-01T00:00:06.000000Z", holder="b")
    other["metadata"] = {"name": "leader", "resourceVersion": rv}  # stale
    with pytest.raises(ApiException) as e:
        await coord.replace_namespaced_lease("leader", NS, other)
    assert e.value.status == 409


async def test_kubernetes_asyncio_leader_election_acquires_the_lease(
    api: client.ApiClient, coord: client.CoordinationV1Api
) -> None:
    """The library's LeaseLock (6-digit naive times + "Z") works against the sandbox."""
    from kubernetes_asyncio.leaderelection import electionconfig, leaderelection
    from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

    leading = asyncio.Event()

    async def on_start() -> None:
        leading.set()

    async def on_stop() -> None:
        return None

    cfg = electionconfig.Config(
        LeaseLock("bridge", NS, "me", api),
        lease_duration=15,
        renew_deadline=10,
        retry_period=2,
        onstarted_leading=on_start,
        onstopped_leading=on_stop,
    )
    task = asyncio.create_task(leaderelection.LeaderElection(cfg).run())
    try:
        await asyncio.wait_for(leading.wait(), timeout=20)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    lease = await coord.read_namespaced_lease("bridge", NS)
    assert lease.spec.holder_identity == "me"
