"""WatchList like kube-apiserver v1.36: ``sendInitialEvents=true`` streams the current
objects, then ONE bookmark annotated ``k8s.io/initial-events-end`` with the list's
resourceVersion, then the watch; invalid option combinations are 422 with kube's text."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from sandbox.cluster import SandboxCluster
from tests.component.kubeapi.webhook_server import call

from .helpers import ADMIN_HEADERS

CMS = "/api/v1/namespaces/default/configmaps"
WATCHLIST = {
    "watch": "1",
    "sendInitialEvents": "true",
    "resourceVersionMatch": "NotOlderThan",
    "allowWatchBookmarks": "true",
}


async def _events(srv: SandboxCluster, params: dict[str, str], n: int) -> list[dict[str, Any]]:
    out = []
    async with (
        aiohttp.ClientSession(headers=ADMIN_HEADERS) as s,
        s.get(f"{srv.url}{CMS}", params=params) as r,
    ):
        assert r.status == 200
        while len(out) < n:
            out.append(json.loads(await r.content.readline()))
            if len(out) == n - 1 and n > 1 and out[-1]["type"] == "BOOKMARK":
                await call(srv, "POST", CMS, {"metadata": {"name": "later"}})
    return out


async def test_watchlist_sends_added_then_one_initial_events_end_bookmark_then_changes(
    srv: SandboxCluster,
) -> None:
    for n in ("a", "b"):
        await call(srv, "POST", CMS, {"metadata": {"name": n}})
    _, lst = await call(srv, "GET", CMS)
    events = await _events(srv, WATCHLIST, 4)
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in events] == [
        ("ADDED", "a"),
        ("ADDED", "b"),
        ("BOOKMARK", None),
        ("ADDED", "later"),
    ]
    mark = events[2]["object"]
    assert mark["kind"] == "ConfigMap"
    assert mark["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert mark["metadata"]["resourceVersion"] == lst["metadata"]["resourceVersion"]


async def test_watchlist_without_bookmarks_sends_the_initial_events_without_the_marker(
    srv: SandboxCluster,
) -> None:
    await call(srv, "POST", CMS, {"metadata": {"name": "a"}})
    params = {k: v for k, v in WATCHLIST.items() if k != "allowWatchBookmarks"}
    (first,) = await _events(srv, params | {"timeoutSeconds": "1"}, 1)
    assert first["type"] == "ADDED"


async def test_send_initial_events_false_streams_only_later_changes(
    srv: SandboxCluster,
) -> None:
    await call(srv, "POST", CMS, {"metadata": {"name": "a"}})
    params = WATCHLIST | {"sendInitialEvents": "false"}
    async with (
        aiohttp.ClientSession(headers=ADMIN_HEADERS) as s,
        s.get(f"{srv.url}{CMS}", params=params) as r,
    ):
        await call(srv, "POST", CMS, {"metadata": {"name": "b"}})
        ev = json.loads(await r.content.readline())
    assert (ev["type"], ev["object"]["metadata"]["name"]) == ("ADDED", "b")


async def test_invalid_watchlist_combinations_are_422_with_kubes_messages(
    srv: SandboxCluster,
) -> None:
    cases = {
        "?sendInitialEvents=true": (
            "sendInitialEvents",
            "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list",
        ),
        "?watch=1&sendInitialEvents=true": (
            "resourceVersionMatch",
            "resourceVersionMatch: Forbidden: sendInitialEvents requires setting "
            "resourceVersionMatch to NotOlderThan",
        ),
        "?watch=1&resourceVersionMatch=NotOlderThan": (
            "resourceVersionMatch",
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch "
            "unless sendInitialEvents is provided",
        ),
    }
    for query, (field, message) in cases.items():
        status, err = await call(srv, "GET", f"{CMS}{query}")
        assert status == 422, query
        assert err["message"] == f'ListOptions.meta.k8s.io "" is invalid: {message}'
        assert err["details"]["kind"] == "ListOptions"
        assert err["details"]["group"] == "meta.k8s.io"
        assert [c["field"] for c in err["details"]["causes"]] == [field]
