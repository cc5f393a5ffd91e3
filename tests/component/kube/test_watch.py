"""The Watcher against scripted watch streams: resume, bookmarks, 410 re-list, drops, stop."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from bridge.errors import KubeError
from bridge.kube.client import KubeClient
from bridge.kube.resources import PODS
from bridge.kube.watch import Backoff, Watcher, WatchEvent, list_then_watch
from tests.component.kube.scripted import (
    ScriptedServer,
    event_line,
    pod,
    status_body,
    status_response,
    wait_until,
    watch_script,
)
from tests.fake_clock import FakeClock

PATH = "/api/v1/namespaces/default/pods"


def pod_list(rv: str, *pods: dict[str, object]) -> dict[str, object]:
    return {"kind": "PodList", "metadata": {"resourceVersion": rv}, "items": list(pods)}


@pytest.fixture
async def watcher(kube: KubeClient) -> AsyncIterator[Watcher]:
    w = Watcher(
        kube,
        PODS,
        namespace="default",
        timeout_seconds=30,
        backoff=Backoff(base=0.001, maximum=0.01),
        rng=random.Random(1),
    )
    try:
        yield w
    finally:
        await w.close()


async def take(w: Watcher, n: int) -> list[WatchEvent]:
    """The first ``n`` events; bounded by a deadline so a bug fails instead of hanging."""
    out: list[WatchEvent] = []

    async def collect() -> None:
        async for ev in w.events():
            out.append(ev)
            if len(out) == n:
                w.stop()

    await asyncio.wait_for(collect(), timeout=10)
    return out


def watch_queries(server: ScriptedServer) -> list[dict[str, str]]:
    return [r.query for r in server.sent("GET", PATH) if r.query.get("watch")]


async def test_lists_then_watches_from_the_list_version_and_resumes_from_the_last_event(
    server: ScriptedServer, watcher: Watcher
) -> None:
    watch_script(
        [
            [event_line("ADDED", pod("b", rv="11")), event_line("MODIFIED", pod("a", rv="12"))],
            [event_line("DELETED", pod("b", rv="13"))],
        ],
        list_bodies=[pod_list("10", pod("a", rv="5"))],
        server=server,
        path=PATH,
    )
    evs = await take(watcher, 4)
    assert [(e.type, e.key, e.object["metadata"]["resourceVersion"]) for e in evs] == [
        ("ADDED", "default/a", "5"),
        ("ADDED", "default/b", "11"),
        ("MODIFIED", "default/a", "12"),
        ("DELETED", "default/b", "13"),
    ]
    assert [e.synthetic for e in evs] == [True, False, False, False]
    q = watch_queries(server)
    assert [x.get("resourceVersion") for x in q[:2]] == ["10", "12"]
    assert q[0]["allowWatchBookmarks"] == "true"
    assert q[0]["timeoutSeconds"] == "30"
    assert set(watcher.known) == {"default/a"}
    assert watcher.relists == 1


async def test_bookmark_moves_the_resume_version_without_an_event(
    server: ScriptedServer, watcher: Watcher
) -> None:
    bookmark = {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "50"}}
    watch_script(
        [[event_line("BOOKMARK", bookmark)], [event_line("ADDED", pod("c", rv="51"))]],
        list_bodies=[pod_list("10")],
        server=server,
        path=PATH,
    )
    evs = await take(watcher, 1)
    assert [e.key for e in evs] == ["default/c"]
    assert [x.get("resourceVersion") for x in watch_queries(server)[:2]] == ["10", "50"]


@pytest.mark.parametrize(
    "expire",
    [
        pytest.param("error-event", id="ERROR-event-with-410-status"),
        pytest.param("http-410", id="HTTP-410-answer"),
    ],
)
async def test_410_relists_and_synthesizes_the_gap(
    server: ScriptedServer, watcher: Watcher, expire: str
) -> None:
    async def gone(request: web.Request) -> web.StreamResponse:
        return web.json_response(
            status_body(410, "Expired", "too old resource version"), status=410
        )

    expired: list[bytes] | object = (
        [event_line("ERROR", status_body(410, "Expired", "too old resource version: 12"))]
        if expire == "error-event"
        else gone
    )
    # Before the gap: a, b, c. During the gap: a deleted, b changed, c deleted and
    # re-created under the same name (new uid), d created.
    watch_script(
        [[event_line("ADDED", pod("c", rv="12"))], expired],  # type: ignore[list-item]
        list_bodies=[
            pod_list("10", pod("a", rv="5"), pod("b", rv="6")),
            pod_list("30", pod("b", rv="20"), pod("c", rv="21", uid="c2"), pod("d", rv="22")),
        ],
        server=server,
        path=PATH,
    )
    evs = await take(watcher, 8)
    got = [(e.type, e.key, e.object["metadata"]["resourceVersion"]) for e in evs]
    assert got[:3] == [
        ("ADDED", "default/a", "5"),
        ("ADDED", "default/b", "6"),
        ("ADDED", "default/c", "12"),
    ]
    assert sorted(got[3:]) == sorted(
        [
            ("DELETED", "default/a", "5"),
            ("DELETED", "default/c", "12"),
            ("MODIFIED", "default/b", "20"),
            ("ADDED", "default/c", "21"),
            ("ADDED", "default/d", "22"),
        ]
    )
    # The old c goes before the new c.
    kinds_c = [e.type for e in evs[3:] if e.key == "default/c"]
    assert kinds_c == ["DELETED", "ADDED"]
    assert {k: o["metadata"]["resourceVersion"] for k, o in watcher.known.items()} == {
        "default/b": "20",
        "default/c": "21",
        "default/d": "22",
    }
    assert watcher.relists == 2
    assert watch_queries(server)[-1].get("resourceVersion") == "30"


async def test_a_connection_dropped_mid_event_reconnects_from_the_last_version(
    server: ScriptedServer, watcher: Watcher
) -> None:
    async def drop(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        await resp.prepare(request)
        await resp.write(event_line("ADDED", pod("x", rv="11")))
        await resp.write(event_line("ADDED", pod("y", rv="12"))[:20])  # half an event
        assert request.transport is not None
        request.transport.close()
        return resp

    watch_script(
        [drop, [event_line("ADDED", pod("y", rv="12"))]],
        list_bodies=[pod_list("10")],
        server=server,
        path=PATH,
    )
    evs = await take(watcher, 2)
    assert [e.key for e in evs] == ["default/x", "default/y"]
    assert [x.get("resourceVersion") for x in watch_queries(server)[:2]] == ["10", "11"]
    assert watcher.relists == 1  # no re-list: resumed
    assert watcher.reconnects >= 1


async def test_server_errors_back_off_on_the_injected_clock(
    server: ScriptedServer, kube: KubeClient
) -> None:
    clock = FakeClock()

    async def boom(_: web.Request) -> web.StreamResponse:
        return web.json_response(status_body(500, "InternalError", "etcd"), status=500)

    watch_script(
        [boom, [event_line("ADDED", pod("z", rv="11"))]],
        list_bodies=[pod_list("10")],
        server=server,
        path=PATH,
    )
    async with Watcher(
        kube,
        PODS,
        namespace="default",
        backoff=Backoff(base=4, maximum=8),
        clock=clock,
        rng=random.Random(0),
    ) as w:
        collector = asyncio.ensure_future(take(w, 1))
        # The watcher is asleep on the fake clock after the 500: wake it.
        await wait_until(lambda: clock._sleepers, what="watcher backing off")
        assert w.failures == 1
        clock.advance(4)
        evs = await collector
    assert [e.key for e in evs] == ["default/z"]
    assert w.failures == 0


def test_backoff_is_jittered_exponential_and_capped() -> None:
    b = Backoff(base=1, maximum=8)
    rng = random.Random(3)
    delays = [b.delay(n, rng) for n in range(1, 7)]
    caps = [1, 2, 4, 8, 8, 8]
    assert all(c / 2 <= d <= c for d, c in zip(delays, caps, strict=True))


async def test_stop_ends_a_blocked_stream_and_close_releases_the_session(
    server: ScriptedServer, kube: KubeClient
) -> None:
    watch_script([], list_bodies=[pod_list("10", pod("a"))], server=server, path=PATH)
    w = Watcher(kube, PODS, namespace="default")
    got: list[WatchEvent] = []

    async def consume() -> None:
        async for ev in w.events():
            got.append(ev)

    task = asyncio.ensure_future(consume())
    await wait_until(lambda: watch_queries(server), what="the watch call is open")
    w.stop()
    await asyncio.wait_for(task, timeout=10)
    await w.close()
    assert [e.key for e in got] == ["default/a"]
    assert w._session._api.rest_client.pool_manager.closed


def _list_then(server: ScriptedServer, first: web.Response, then: dict[str, object]) -> None:
    """Lists answer ``first``, then ``then``; watches hang until shutdown."""
    lists = iter([first, web.json_response(then)])

    async def handler(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch"):
            resp = web.StreamResponse()
            await resp.prepare(request)
            await server.closing.wait()
            return resp
        return next(lists)

    server.on("GET", PATH, handler)


async def test_list_then_watch_delivers_the_list_then_says_listed_and_synced_then_the_events(
    server: ScriptedServer, watcher: Watcher
) -> None:
    watch_script(
        [[event_line("ADDED", pod("b", rv="11"))]],
        list_bodies=[pod_list("10", pod("a", rv="5"))],
        server=server,
        path=PATH,
    )
    seen: list[str] = []
    synced = asyncio.Event()

    async def handler(ev: WatchEvent) -> None:
        seen.append(ev.key)
        if not ev.synthetic:  # the first watched event
            watcher.stop()

    def listed() -> None:
        seen.append(f"listed, synced={synced.is_set()}")

    await asyncio.wait_for(
        list_then_watch(watcher, handler, listed=listed, synced=synced), timeout=10
    )
    assert seen == ["default/a", "listed, synced=False", "default/b"]
    assert synced.is_set()


async def test_list_then_watch_raises_a_failed_initial_list_unless_told_to_keep_on(
    server: ScriptedServer, watcher: Watcher
) -> None:
    _list_then(server, status_response(403, "Forbidden", "no"), pod_list("10"))
    synced = asyncio.Event()
    with pytest.raises(KubeError):
        await asyncio.wait_for(list_then_watch(watcher, lambda ev: None, synced=synced), timeout=10)
    assert not synced.is_set()  # the controller never takes a failed list as its cache


async def test_list_then_watch_kept_on_sets_synced_never_listed_and_lists_again(
    server: ScriptedServer, watcher: Watcher
) -> None:
    _list_then(server, status_response(403, "Forbidden", "no"), pod_list("10", pod("a")))
    synced = asyncio.Event()
    listed: list[bool] = []
    seen: list[WatchEvent] = []

    def handler(ev: WatchEvent) -> None:
        seen.append(ev)
        watcher.stop()

    await asyncio.wait_for(
        list_then_watch(
            watcher,
            handler,
            listed=lambda: listed.append(True),
            synced=synced,
            keep_on_list_error=True,
        ),
        timeout=10,
    )
    assert synced.is_set()
    assert listed == []  # the list was not delivered whole
    assert [(e.type, e.key, e.synthetic) for e in seen] == [("ADDED", "default/a", True)]


async def test_list_then_watch_absent_ok_ends_quietly_on_a_resource_not_served(
    server: ScriptedServer, watcher: Watcher
) -> None:
    _list_then(server, status_response(404, "NotFound", "no such resource"), pod_list("1"))
    synced = asyncio.Event()
    listed: list[bool] = []
    await asyncio.wait_for(
        list_then_watch(
            watcher,
            lambda ev: None,
            listed=lambda: listed.append(True),
            synced=synced,
            keep_on_list_error=True,
            absent_ok=True,
        ),
        timeout=10,
    )
    assert not synced.is_set()
    assert listed == []
    assert watch_queries(server) == []  # never watched
