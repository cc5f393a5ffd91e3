"""The kubelet stand-in tears pods down as kubelet 1.36 does (KUBE.md): SIGTERM stops the
containers at once unless the pod ignores it (sandbox annotation; then they are killed when
the grace period ends), the terminal phase and terminated container states are written,
then a deleted pod gets its final DELETE (grace 0). A pod whose API phase is set terminal
from outside has its containers stopped too. The server's clock is a FakeClock: "at once"
means "before any of the grace period has passed"."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from sandbox.annotations import IGNORE_SIGTERM
from sandbox.cluster import SandboxCluster
from sandbox.kubeapi.verbs import POD_KEY
from sandbox.kubelet import SIGKILL_EXIT
from tests.fake_clock import FakeClock

from .helpers import NS, eventually

NODE = "n"
FAILED = {"status": {"phase": "Failed"}}


@pytest.fixture
async def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def ksrv(clock: FakeClock) -> AsyncIterator[SandboxCluster]:
    async with SandboxCluster(
        port=0, nodes=[NODE], kubelet=True, clock=clock, serviceaccount_delay=0.01
    ) as s:
        yield s


def _pod(srv: SandboxCluster, name: str) -> dict[str, Any] | None:
    return srv.store.get(POD_KEY, NS, name)


async def _running_pod(srv: SandboxCluster, name: str, *, stubborn: bool = False) -> None:
    """A bound pod the kubelet runs; it holds a finalizer so its last state stays readable."""
    md: dict[str, Any] = {"name": name, "finalizers": ["x.io/hold"]}
    if stubborn:
        md["annotations"] = {IGNORE_SIGTERM: "true"}
    body = {
        "metadata": md,
        "spec": {"nodeName": NODE, "containers": [{"name": "main", "image": "busybox:1.36"}]},
    }
    rd = srv.api.resolve("", "v1", "pods")
    srv.api.create(rd, NS, body)

    async def running() -> bool:
        pod = _pod(srv, name)
        return bool(pod and (pod.get("status") or {}).get("phase") == "Running")

    await eventually(running)


def _delete(srv: SandboxCluster, name: str) -> None:
    srv.api.delete(srv.api.resolve("", "v1", "pods"), NS, name, {"gracePeriodSeconds": 30})


def _states(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [c["state"] for c in pod["status"]["containerStatuses"]]


async def test_a_deleted_pods_containers_stop_on_sigterm_then_the_final_delete_is_sent(
    ksrv: SandboxCluster,
) -> None:
    await _running_pod(ksrv, "p")
    _delete(ksrv, "p")

    async def final_delete() -> bool:
        pod = _pod(ksrv, "p")
        return bool(pod and pod["metadata"].get("deletionGracePeriodSeconds") == 0)

    await eventually(final_delete)  # no time has passed on the server's clock
    pod = _pod(ksrv, "p")
    assert pod is not None
    assert pod["status"]["phase"] == "Succeeded"  # pause exits 0 on SIGTERM
    assert [s["terminated"]["exitCode"] for s in _states(pod)] == [0]
    ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    assert ready["Ready"] == "False"


async def test_a_pod_ignoring_sigterm_runs_until_its_grace_period_ends_then_is_killed(
    ksrv: SandboxCluster, clock: FakeClock
) -> None:
    await _running_pod(ksrv, "p", stubborn=True)
    _delete(ksrv, "p")
    for _ in range(3):
        await ksrv.kubelet.sync_once()
    pod = _pod(ksrv, "p")
    assert pod is not None
    assert "running" in _states(pod)[0]
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 30  # no final delete yet

    clock.advance(30)
    await ksrv.kubelet.sync_once()
    pod = _pod(ksrv, "p")
    assert pod is not None
    assert pod["status"]["phase"] == "Failed"
    assert _states(pod)[0]["terminated"]["exitCode"] == SIGKILL_EXIT
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 0


async def test_a_pod_set_failed_from_outside_has_its_containers_stopped(
    ksrv: SandboxCluster,
) -> None:
    await _running_pod(ksrv, "p")
    rd = ksrv.api.resolve("", "v1", "pods")
    ksrv.api.patch(rd, NS, "p", "application/merge-patch+json", FAILED, subresource="status")

    async def stopped() -> bool:
        pod = _pod(ksrv, "p")
        return bool(pod and all("terminated" in s for s in _states(pod)))

    await eventually(stopped)
    pod = _pod(ksrv, "p")
    assert pod is not None
    assert pod["status"]["phase"] == "Failed"  # a terminal phase is never changed
    assert not pod["metadata"].get("deletionTimestamp")  # stopped, not deleted


async def test_a_failed_pod_ignoring_sigterm_is_killed_after_its_own_grace_period(
    ksrv: SandboxCluster, clock: FakeClock
) -> None:
    await _running_pod(ksrv, "p", stubborn=True)
    rd = ksrv.api.resolve("", "v1", "pods")
    ksrv.api.patch(rd, NS, "p", "application/merge-patch+json", FAILED, subresource="status")
    await ksrv.kubelet.sync_once()
    clock.advance(29)
    await ksrv.kubelet.sync_once()
    pod = _pod(ksrv, "p")
    assert pod is not None
    assert "running" in _states(pod)[0]
    clock.advance(1)
    await ksrv.kubelet.sync_once()
    pod = _pod(ksrv, "p")
    assert pod is not None
    assert _states(pod)[0]["terminated"]["exitCode"] == SIGKILL_EXIT


async def test_a_deleted_pod_that_never_started_gets_its_final_delete_at_once(
    ksrv: SandboxCluster,
) -> None:
    await ksrv.kubelet.stop()
    await _running_pod_pending(ksrv, "p")
    _delete(ksrv, "p")
    ksrv.kubelet.start()
    await ksrv.kubelet.sync_once()
    pod = _pod(ksrv, "p")
    assert pod is not None
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 0


async def _running_pod_pending(srv: SandboxCluster, name: str) -> None:
    body = {
        "metadata": {"name": name, "finalizers": ["x.io/hold"]},
        "spec": {"nodeName": NODE, "containers": [{"name": "main", "image": "busybox:1.36"}]},
    }
    srv.api.create(srv.api.resolve("", "v1", "pods"), NS, body)
