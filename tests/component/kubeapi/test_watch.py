"""KUBE.md: watch semantics (from a version, synthetic ADDED, BOOKMARK, timeoutSeconds,
410 Expired, selector enter/leave) and the kubernetes_asyncio Watch 410 pitfall."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client, config, watch
from kubernetes_asyncio.client.exceptions import ApiException

from sandbox.cluster import SandboxCluster

from .helpers import ADMIN_HEADERS, NS, eventually, pod_body


async def _raw_watch(srv: SandboxCluster, path: str, n: int, **params: str) -> list[Any]:
    """Read ``n`` events (or until the server closes) from a raw watch stream."""
    out: list[Any] = []
    async with (
        aiohttp.ClientSession(headers=ADMIN_HEADERS) as s,
        s.get(
            srv.url + path,
            params={"watch": "true", **params},
        ) as r,
    ):
        assert r.status == 200
        async for line in r.content:
            if line.strip():
                out.append(json.loads(line))
            if len(out) >= n:
                break
    return out


def _cm(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}}}


@pytest.mark.parametrize("flag", ["true", "1", "True"], ids=["true", "one", "python-True"])
async def test_watch_query_flag_spellings_open_a_watch(
    srv: SandboxCluster, core: client.CoreV1Api, flag: str
) -> None:
    await core.create_namespaced_config_map(NS, _cm("a"))
    async with (
        aiohttp.ClientSession(headers=ADMIN_HEADERS) as s,
        s.get(
            f"{srv.url}/api/v1/namespaces/{NS}/configmaps",
            params={"watch": flag, "timeoutSeconds": "1"},
        ) as r,
    ):
        first = json.loads(await r.content.readline())
    assert first["type"] == "ADDED"


async def test_watch_without_version_sends_synthetic_added_for_current_state(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_config_map(NS, _cm("a"))
    await core.create_namespaced_config_map(NS, _cm("b"))
    evs = await _raw_watch(srv, f"/api/v1/namespaces/{NS}/configmaps", 2, timeoutSeconds="2")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == [
        ("ADDED", "a"),
        ("ADDED", "b"),
    ]
    assert evs[0]["object"]["kind"] == "ConfigMap"


async def test_watch_from_resource_version_zero_also_sends_current_state(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_config_map(NS, _cm("a"))
    evs = await _raw_watch(
        srv, f"/api/v1/namespaces/{NS}/configmaps", 1, resourceVersion="0", timeoutSeconds="2"
    )
    assert evs[0]["type"] == "ADDED"


async def test_watch_from_resource_version_sends_only_newer_events(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_config_map(NS, _cm("old"))
    lst = await core.list_namespaced_config_map(NS)
    rv = lst.metadata.resource_version
    await core.create_namespaced_config_map(NS, _cm("new"))
    await core.patch_namespaced_config_map("new", NS, {"data": {"k": "v"}})
    await core.delete_namespaced_config_map("new", NS)
    evs = await _raw_watch(
        srv, f"/api/v1/namespaces/{NS}/configmaps", 3, resourceVersion=rv, timeoutSeconds="2"
    )
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == [
        ("ADDED", "new"),
        ("MODIFIED", "new"),
        ("DELETED", "new"),
    ]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in evs]
    assert rvs == sorted(rvs)
    assert rvs[0] > int(rv)


async def test_watch_sends_bookmarks_when_allowed(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_config_map(NS, _cm("a"))
    rv = (await core.list_namespaced_config_map(NS)).metadata.resource_version
    evs = await _raw_watch(
        srv,
        f"/api/v1/namespaces/{NS}/configmaps",
        1,
        resourceVersion=rv,
        allowWatchBookmarks="true",
        timeoutSeconds="5",
    )
    assert evs[0]["type"] == "BOOKMARK"
    assert evs[0]["object"]["metadata"]["resourceVersion"] == rv
    assert evs[0]["object"]["kind"] == "ConfigMap"


async def test_watch_without_bookmark_flag_sends_no_bookmarks(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    rv = (await core.list_namespaced_config_map(NS)).metadata.resource_version
    # bookmark interval is 0.2 s in these tests; the watch lasts 1 s and must stay silent
    evs = await _raw_watch(
        srv, f"/api/v1/namespaces/{NS}/configmaps", 1, resourceVersion=rv, timeoutSeconds="1"
    )
    assert evs == []


async def test_watch_closes_after_timeout_seconds(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    rv = (await core.list_namespaced_config_map(NS)).metadata.resource_version
    evs = await asyncio.wait_for(
        _raw_watch(
            srv, f"/api/v1/namespaces/{NS}/configmaps", 99, resourceVersion=rv, timeoutSeconds="1"
        ),
        timeout=30,
    )
    assert evs == []  # the stream ended by itself


async def test_watch_from_compacted_version_sends_error_event_with_410_expired(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    cm = await core.create_namespaced_config_map(NS, _cm("a"))
    await core.patch_namespaced_config_map("a", NS, {"data": {"k": "v"}})
    srv.compact()
    evs = await _raw_watch(
        srv,
        f"/api/v1/namespaces/{NS}/configmaps",
        1,
        resourceVersion=cm.metadata.resource_version,
        timeoutSeconds="2",
    )
    assert evs[0]["type"] == "ERROR"
    assert evs[0]["object"]["kind"] == "Status"
    assert (evs[0]["object"]["code"], evs[0]["object"]["reason"]) == (410, "Expired")


async def test_bounded_history_compacts_old_versions() -> None:
    async with SandboxCluster(port=0, history_size=5) as srv:
        rd = srv.api.resolve("", "v1", "configmaps")
        first = srv.api.create(rd, NS, _cm("a"))
        for i in range(10):
            srv.api.create(rd, NS, _cm(f"x{i}"))
        evs = await _raw_watch(
            srv,
            f"/api/v1/namespaces/{NS}/configmaps",
            1,
            resourceVersion=first["metadata"]["resourceVersion"],
            timeoutSeconds="2",
        )
        assert evs[0]["object"]["code"] == 410


async def test_object_entering_and_leaving_a_label_selector_is_added_then_deleted(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_config_map(NS, _cm("a"))
    rv = (await core.list_namespaced_config_map(NS)).metadata.resource_version
    await core.patch_namespaced_config_map("a", NS, {"metadata": {"labels": {"app": "x"}}})
    await core.patch_namespaced_config_map("a", NS, {"data": {"k": "v"}})
    await core.patch_namespaced_config_map("a", NS, {"metadata": {"labels": {"app": None}}})
    evs = await _raw_watch(
        srv,
        f"/api/v1/namespaces/{NS}/configmaps",
        3,
        resourceVersion=rv,
        labelSelector="app=x",
        timeoutSeconds="2",
    )
    assert [e["type"] for e in evs] == ["ADDED", "MODIFIED", "DELETED"]


async def test_pod_leaving_unscheduled_field_selector_is_deleted_for_the_watcher(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_pod(NS, pod_body("p", schedulerName="slurm-bridge-scheduler"))
    rv = (await core.list_namespaced_pod(NS)).metadata.resource_version
    await core.create_namespaced_pod_binding(
        "p",
        NS,
        {"metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n"}},
        _preload_content=False,
    )
    evs = await _raw_watch(
        srv,
        "/api/v1/pods",
        1,
        resourceVersion=rv,
        timeoutSeconds="2",
        fieldSelector="spec.schedulerName=slurm-bridge-scheduler,spec.nodeName=",
    )
    assert evs[0]["type"] == "DELETED"
    assert evs[0]["object"]["spec"]["nodeName"] == "n"


async def test_namespaced_watch_sees_only_its_namespace(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    rv = (await core.list_config_map_for_all_namespaces()).metadata.resource_version
    await core.create_namespaced_config_map("kube-system", _cm("other"))
    await core.create_namespaced_config_map(NS, _cm("mine"))
    evs = await _raw_watch(
        srv, f"/api/v1/namespaces/{NS}/configmaps", 1, resourceVersion=rv, timeoutSeconds="2"
    )
    assert evs[0]["object"]["metadata"]["name"] == "mine"


async def test_kubernetes_asyncio_watch_streams_typed_events(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    rv = (await core.list_namespaced_pod(NS)).metadata.resource_version

    async def make() -> None:
        await core.create_namespaced_pod(NS, pod_body("p"))

    task = asyncio.create_task(make())
    got = []
    async with watch.Watch() as w:
        async for ev in w.stream(
            core.list_namespaced_pod,
            NS,
            resource_version=rv,
            timeout_seconds=5,
            _request_timeout=10,
        ):
            got.append((ev["type"], ev["object"].metadata.name))
            break
    await task
    assert got == [("ADDED", "p")]


async def test_kubernetes_asyncio_watch_raises_410_after_compaction(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    """Pitfall: Watch retries a 410 once with the same stale version, then raises."""
    cm = await core.create_namespaced_config_map(NS, _cm("a"))
    await core.patch_namespaced_config_map("a", NS, {"data": {"k": "v"}})
    srv.compact()

    async def drain() -> None:
        async with watch.Watch() as w:
            async for _ in w.stream(
                core.list_namespaced_config_map,
                NS,
                resource_version=cm.metadata.resource_version,
                timeout_seconds=5,
                _request_timeout=10,
            ):
                pass

    with pytest.raises(ApiException) as e:
        await drain()
    assert e.value.status == 410


async def test_kubernetes_asyncio_watch_handles_bookmarks(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    rv = (await core.list_namespaced_pod(NS)).metadata.resource_version
    async with watch.Watch() as w:
        async for ev in w.stream(
            core.list_namespaced_pod,
            NS,
            resource_version=rv,
            allow_watch_bookmarks=True,
            timeout_seconds=5,
            _request_timeout=10,
        ):
            assert ev["type"] == "BOOKMARK"
            assert w.resource_version == rv
            break


async def test_server_closing_a_watch_lets_kubernetes_asyncio_resume_without_replay(
    tmp_path: Path,
) -> None:
    """The server ends watches after its default timeout; kubernetes_asyncio's Watch
    (no timeout_seconds) reconnects from its last version: no event lost or repeated."""
    async with SandboxCluster(port=0, watch_timeout=0.3) as srv:
        cfg = client.Configuration()
        await config.load_kube_config(
            config_file=str(srv.write_kubeconfig(tmp_path / "kc")), client_configuration=cfg
        )
        async with client.ApiClient(cfg) as api:
            core = client.CoreV1Api(api)
            rv = (await core.list_namespaced_config_map(NS)).metadata.resource_version
            seen: list[str] = []

            def watches() -> int:
                entries = srv.request_log.entries(method="GET", path="/configmaps$")
                return len([e for e in entries if "watch" in e.query])

            async def produce() -> None:
                # create c{i} only once the client has opened its (i+1)-th watch
                for i in range(3):

                    async def opened(n: int = i + 1) -> bool:
                        return watches() >= n

                    await eventually(opened)
                    await core.create_namespaced_config_map(NS, _cm(f"c{i}"))

            producer = asyncio.create_task(produce())
            async with watch.Watch() as w:
                async for ev in w.stream(
                    core.list_namespaced_config_map, NS, resource_version=rv, _request_timeout=10
                ):
                    seen.append(ev["object"].metadata.name)
                    if len(seen) == 3:
                        break
            await producer
            assert seen == ["c0", "c1", "c2"]
            assert watches() >= 3
