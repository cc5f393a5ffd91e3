"""KUBE.md: deletion with finalizers, pod deletion events, Terminating bound pods."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client

from sandbox.cluster import SandboxCluster

from .helpers import ADMIN_HEADERS, NS, binding_body, eventually, pod_body


class Recorder:
    """Collects (type, name, deletionTimestamp set) from a raw watch in the background."""

    def __init__(self, srv: SandboxCluster, path: str, rv: str) -> None:
        self.events: list[tuple[str, str, bool]] = []
        self._task = asyncio.create_task(self._run(srv.url + path, rv))

    async def _run(self, url: str, rv: str) -> None:
        async with (
            aiohttp.ClientSession(headers=ADMIN_HEADERS) as s,
            s.get(
                url, params={"watch": "true", "resourceVersion": rv, "timeoutSeconds": "10"}
            ) as r,
        ):
            async for line in r.content:
                ev = json.loads(line)
                md = ev["object"]["metadata"]
                self.events.append((ev["type"], md["name"], bool(md.get("deletionTimestamp"))))

    async def wait(self, n: int) -> list[tuple[str, str, bool]]:
        async def enough() -> bool:
            return len(self.events) >= n

        await eventually(enough)
        self._task.cancel()
        return self.events


async def _rv(core: client.CoreV1Api) -> str:
    return str((await core.list_namespaced_pod(NS)).metadata.resource_version)


async def _pod_exists(core: client.CoreV1Api, name: str) -> bool:
    return name in [p.metadata.name for p in (await core.list_namespaced_pod(NS)).items]


async def test_delete_with_finalizers_sets_deletion_timestamp_then_deleted_on_last_removal(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_config_map(
        NS, {"metadata": {"name": "a", "finalizers": ["x.io/a", "x.io/b"]}}
    )
    rec = Recorder(srv, f"/api/v1/namespaces/{NS}/configmaps", await _rv(core))
    await core.delete_namespaced_config_map("a", NS)
    cm = await core.read_namespaced_config_map("a", NS)
    assert cm.metadata.deletion_timestamp is not None
    await core.patch_namespaced_config_map(
        "a",
        NS,
        {"metadata": {"finalizers": ["x.io/b"]}},
        _content_type="application/merge-patch+json",
    )
    await core.patch_namespaced_config_map(
        "a", NS, {"metadata": {"finalizers": None}}, _content_type="application/merge-patch+json"
    )
    evs = await rec.wait(4)
    # like etcd: the update that empties the finalizers is written, then the delete
    assert evs == [("MODIFIED", "a", True)] * 3 + [("DELETED", "a", True)]


async def test_no_new_finalizers_on_an_object_being_deleted(core: client.CoreV1Api) -> None:
    await core.create_namespaced_config_map(
        NS, {"metadata": {"name": "a", "finalizers": ["x.io/a"]}}
    )
    await core.delete_namespaced_config_map("a", NS)
    with pytest.raises(client.ApiException) as e:
        await core.patch_namespaced_config_map(
            "a",
            NS,
            {"metadata": {"finalizers": ["x.io/a", "x.io/new"]}},
            _content_type="application/merge-patch+json",
        )
    assert e.value.status == 422


async def test_delete_without_finalizers_answers_status_and_removes(
    core: client.CoreV1Api,
) -> None:
    await core.create_namespaced_config_map(NS, {"metadata": {"name": "a"}})
    out = await core.delete_namespaced_config_map("a", NS)
    assert out.status == "Success"
    assert (await core.list_namespaced_config_map(NS)).items == []


async def test_deleting_an_unbound_pod_with_grace_zero_emits_modified_then_deleted(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_pod(NS, pod_body("p"))
    rec = Recorder(srv, f"/api/v1/namespaces/{NS}/pods", await _rv(core))
    await core.delete_namespaced_pod("p", NS, grace_period_seconds=0)
    assert await rec.wait(2) == [("MODIFIED", "p", True), ("DELETED", "p", True)]


async def test_deleting_an_unbound_pod_with_default_grace_is_immediate(
    core: client.CoreV1Api,
) -> None:
    await core.create_namespaced_pod(NS, pod_body("p"))
    await core.delete_namespaced_pod("p", NS)
    assert not await _pod_exists(core, "p")


async def test_bound_pod_without_kubelet_stays_terminating_until_grace_zero(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_pod(NS, pod_body("p"))
    await core.create_namespaced_pod_binding(
        "p", NS, binding_body("p", "n"), _preload_content=False
    )
    await core.delete_namespaced_pod("p", NS)
    pod = await core.read_namespaced_pod("p", NS)
    assert pod.metadata.deletion_timestamp is not None
    assert pod.metadata.deletion_grace_period_seconds == 30
    await core.delete_namespaced_pod("p", NS, grace_period_seconds=0)
    assert not await _pod_exists(core, "p")


async def test_bound_pod_with_finalizer_stays_until_finalizer_removed(
    core: client.CoreV1Api,
) -> None:
    await core.create_namespaced_pod(
        NS, {**pod_body("p"), "metadata": {"name": "p", "finalizers": ["x.io/f"]}}
    )
    await core.delete_namespaced_pod("p", NS, grace_period_seconds=0)
    assert await _pod_exists(core, "p")
    await core.patch_namespaced_pod(
        "p", NS, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["x.io/f"]}}
    )
    assert not await _pod_exists(core, "p")


async def test_fake_kubelet_stops_and_removes_a_deleted_running_pod(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    srv.set_node_ready("n")
    srv.kubelet.start()
    await core.create_namespaced_pod(NS, pod_body("p", terminationGracePeriodSeconds=0))
    await core.create_namespaced_pod_binding(
        "p", NS, binding_body("p", "n"), _preload_content=False
    )

    async def running() -> bool:
        return (await core.read_namespaced_pod("p", NS)).status.phase == "Running"

    await eventually(running)
    body: dict[str, Any] = {"gracePeriodSeconds": 30}
    await core.delete_namespaced_pod("p", NS, body=body)

    async def gone() -> bool:
        return not await _pod_exists(core, "p")

    await eventually(gone)


async def test_deleting_a_namespace_removes_its_contents(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    await core.create_namespace({"metadata": {"name": "tmp"}})
    await core.create_namespaced_config_map("tmp", {"metadata": {"name": "a"}})
    ns = await core.delete_namespace("tmp")
    assert ns is not None

    async def gone() -> bool:
        return "tmp" not in [n.metadata.name for n in (await core.list_namespace()).items]

    await eventually(gone)
    assert (await core.list_config_map_for_all_namespaces(label_selector="")).items == []
