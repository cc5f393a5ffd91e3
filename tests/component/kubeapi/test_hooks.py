"""Test hooks: fault injection, request log, compaction, fake kubelet, node gone, and the
same hooks over HTTP under /sandbox/."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from sandbox.cluster import SandboxCluster

from .helpers import ADMIN_HEADERS, NS, allow_everything, binding_body, eventually, pod_body


async def _bind(core: client.CoreV1Api, pod: str, node: str) -> None:
    await core.create_namespaced_pod_binding(
        pod, NS, binding_body(pod, node), _preload_content=False
    )


async def test_injected_fault_answers_status_code_count_times(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    srv.inject_fault(r"/configmaps$", method="GET", status=503, count=2)
    for _ in range(2):
        with pytest.raises(ApiException) as e:
            await core.list_namespaced_config_map(NS)
        assert e.value.status == 503
        assert json.loads(e.value.body)["reason"] == "ServiceUnavailable"
    assert (await core.list_namespaced_config_map(NS)).items == []


async def test_injected_fault_matches_method(srv: SandboxCluster, core: client.CoreV1Api) -> None:
    srv.inject_fault(r"/configmaps", method="POST", status=500, count=None)
    await core.list_namespaced_config_map(NS)
    with pytest.raises(ApiException):
        await core.create_namespaced_config_map(NS, {"metadata": {"name": "a"}})
    srv.clear_faults()
    await core.create_namespaced_config_map(NS, {"metadata": {"name": "a"}})


async def test_injected_drop_closes_the_connection(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    # count=None: aiohttp retries an idempotent request once on a reused connection
    srv.inject_fault(r"/configmaps$", drop=True, count=None)
    with pytest.raises(aiohttp.ClientError):
        await core.list_namespaced_config_map(NS, _request_timeout=5)
    assert srv.request_log.entries(path="/configmaps$")[-1].status == 0
    srv.clear_faults()
    await core.list_namespaced_config_map(NS)


async def test_fault_aimed_at_a_user_spares_every_other_callers_requests(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    fault = srv.inject_fault(r"/configmaps$", method="GET", status=503, count=1, user="watcher")
    for _ in range(3):  # the admin's lists pass, and leave the fault in place
        assert (await core.list_namespaced_config_map(NS)).items == []
    assert fault.hits == 0
    token = srv.mint_token("watcher")
    allow_everything(srv, "watcher")
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession() as s:
        url = f"{srv.url}/api/v1/namespaces/{NS}/configmaps"
        async with s.get(url, headers=headers) as r:
            assert r.status == 503
        async with s.get(url, headers=headers) as r:
            assert r.status == 200  # count=1: spent by the one user it was aimed at
    assert fault.hits == 1


async def test_injected_delay_then_timeout_on_the_client(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    srv.inject_fault(r"/configmaps$", status=0, delay=5.0)
    with pytest.raises(asyncio.TimeoutError):
        await core.list_namespaced_config_map(NS, _request_timeout=0.2)


async def test_request_log_records_method_path_query_and_status(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    srv.request_log.clear()
    await core.list_namespaced_pod(NS, label_selector="a=b")
    with pytest.raises(ApiException):
        await core.read_namespaced_pod("nope", NS)
    entries = srv.request_log.entries(method="GET", path=r"/pods")
    assert [(e.method, e.path, e.status) for e in entries] == [
        ("GET", f"/api/v1/namespaces/{NS}/pods", 200),
        ("GET", f"/api/v1/namespaces/{NS}/pods/nope", 404),
    ]
    assert "labelSelector=a%3Db" in entries[0].query


async def test_fake_kubelet_runs_bound_pods(srv: SandboxCluster, core: client.CoreV1Api) -> None:
    srv.set_node_ready("n")
    srv.kubelet.start()
    await core.create_namespaced_pod(NS, pod_body("p"))
    await _bind(core, "p", "n")

    async def running() -> bool:
        return (await core.read_namespaced_pod("p", NS)).status.phase == "Running"

    await eventually(running)
    pod = await core.read_namespaced_pod("p", NS)
    assert pod.status.pod_ip
    assert pod.status.container_statuses[0].ready is True
    assert {c.type: c.status for c in pod.status.conditions}["Ready"] == "True"


async def test_fake_kubelet_leaves_unbound_pods_pending(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    srv.kubelet.start()
    await core.create_namespaced_pod(NS, pod_body("p"))
    await srv.kubelet.sync_once()
    assert (await core.read_namespaced_pod("p", NS)).status.phase == "Pending"


@pytest.mark.parametrize(
    ("exit_code", "phase", "reason"),
    [
        pytest.param(0, "Succeeded", "Completed", id="success"),
        pytest.param(3, "Failed", "Error", id="failure"),
    ],
)
async def test_finish_pod_sets_terminal_phase_and_exit_code(
    srv: SandboxCluster, core: client.CoreV1Api, exit_code: int, phase: str, reason: str
) -> None:
    await core.create_namespaced_pod(NS, pod_body("p"))
    await _bind(core, "p", "n")
    srv.finish_pod(NS, "p", exit_code=exit_code)
    pod = await core.read_namespaced_pod("p", NS)
    assert pod.status.phase == phase
    term = pod.status.container_statuses[0].state.terminated
    assert (term.exit_code, term.reason) == (exit_code, reason)


async def test_stopped_node_kubelet_leaves_pods_alone(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    srv.set_node_ready("gone")
    srv.kubelet.stop_node("gone")
    srv.kubelet.start()
    await core.create_namespaced_pod(NS, pod_body("p"))
    await _bind(core, "p", "gone")
    await srv.kubelet.sync_once()
    assert (await core.read_namespaced_pod("p", NS)).status.phase == "Pending"
    await core.delete_namespaced_pod("p", NS, grace_period_seconds=0)  # force works


async def test_kubelet_can_be_turned_off(srv: SandboxCluster, core: client.CoreV1Api) -> None:
    srv.kubelet.start()
    await srv.kubelet.stop()
    assert srv.kubelet.enabled is False


async def _http(srv: SandboxCluster, method: str, path: str, body: Any = None) -> Any:
    async with (
        aiohttp.ClientSession(headers=ADMIN_HEADERS) as s,
        s.request(method, srv.url + path, json=body) as r,
    ):
        assert r.status < 300, await r.text()
        return await r.json()


async def test_http_hooks_fault_requests_and_compact(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    aimed = await _http(srv, "POST", "/sandbox/faults", {"path": "/secrets$", "user": "bob"})
    assert aimed["user"] == "bob"
    fault = await _http(
        srv, "POST", "/sandbox/faults", {"path": "/secrets$", "status": 429, "count": 1}
    )
    assert fault["status"] == 429
    with pytest.raises(ApiException) as e:
        await core.list_namespaced_secret(NS)
    assert e.value.status == 429
    log = await _http(srv, "GET", "/sandbox/requests?method=GET&path=/secrets")
    assert log[-1]["status"] == 429
    out = await _http(srv, "POST", "/sandbox/compact")
    assert out["compacted"] == srv.api.store.resource_version
    await _http(srv, "DELETE", "/sandbox/faults")
    await _http(srv, "DELETE", "/sandbox/requests")
    assert srv.request_log.entries() == []


async def test_http_hooks_kubelet_finish_and_node_ready(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    await _http(srv, "POST", "/sandbox/nodes/n9/ready", {"ready": True})
    assert not (await core.read_node("n9")).spec.taints
    await _http(srv, "POST", "/sandbox/kubelet/nodes/n9/stop")
    assert not srv.kubelet.node_running("n9")
    await _http(srv, "POST", "/sandbox/kubelet/nodes/n9/start")
    await _http(srv, "POST", "/sandbox/kubelet", {"enabled": True})
    assert srv.kubelet.node_running("n9")
    await core.create_namespaced_pod(NS, pod_body("p"))
    await _bind(core, "p", "n9")
    pod = await _http(srv, "POST", f"/sandbox/pods/{NS}/p/finish", {"exitCode": 1})
    assert pod["status"]["phase"] == "Failed"
    await _http(srv, "POST", "/sandbox/kubelet", {"enabled": False})
    assert srv.kubelet.enabled is False


async def test_fake_kubelet_ignores_pods_bound_to_missing_nodes(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    srv.kubelet.start()
    await core.create_namespaced_pod(NS, pod_body("p"))
    await _bind(core, "p", "no-such-node")
    await srv.kubelet.sync_once()
    assert (await core.read_namespaced_pod("p", NS)).status.phase == "Pending"


async def test_watch_of_a_disconnected_client_is_unsubscribed(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    base = srv.store.subscriber_count  # the sandbox's own controllers
    async with (
        aiohttp.ClientSession(headers=ADMIN_HEADERS) as s,
        s.get(f"{srv.url}/api/v1/namespaces/{NS}/pods", params={"watch": "1"}) as r,
    ):
        assert r.status == 200

        async def subscribed() -> bool:
            return srv.store.subscriber_count == base + 1

        await eventually(subscribed)

    async def unsubscribed() -> bool:
        return srv.store.subscriber_count == base

    await eventually(unsubscribed)
