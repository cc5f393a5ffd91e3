"""EventRecorder against scripted Event endpoints: create, aggregate, expire, dedup."""

from __future__ import annotations

from aiohttp import web

from bridge.kube.client import KubeClient
from bridge.kube.events import EventRecorder
from tests.component.kube.scripted import ScriptedServer, pod, status_response

EVENTS = "/api/v1/namespaces/default/events"


def script_events(server: ScriptedServer) -> dict[str, int]:
    """POST creates (echoing the body); PATCH answers 404 for names in ``gone``."""
    state = {"created": 0}

    async def create(request: web.Request) -> web.StreamResponse:
        state["created"] += 1
        return web.json_response(await request.json(), status=201)

    server.on("POST", EVENTS, create)
    return state


async def test_repeat_is_a_count_patch_and_an_expired_event_is_recreated(
    server: ScriptedServer, kube: KubeClient
) -> None:
    state = script_events(server)
    rec = EventRecorder(kube, "slurm-bridge-scheduler", instance="sched-0")
    p = pod("p")
    p["kind"] = "Pod"
    first = await rec.record(p, "Normal", "Submitted", "Slurm job 7")
    assert first is not None
    name = first["metadata"]["name"]
    server.on_json("PATCH", f"{EVENTS}/{name}", {"metadata": {"name": name}, "count": 2})
    await rec.record(p, "Normal", "Submitted", "Slurm job 7")
    patch = server.sent("PATCH", f"{EVENTS}/{name}")[0]
    assert patch.body == {"count": 2, "lastTimestamp": "2026-01-01T00:00:00Z"}
    assert patch.headers["content-type"] == "application/merge-patch+json"
    body = server.sent("POST", EVENTS)[0].body
    assert body["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "p",
        "namespace": "default",
        "uid": "uid-p",
        "resourceVersion": "1",
    }
    assert (body["type"], body["reason"], body["count"]) == ("Normal", "Submitted", 1)
    assert (body["reportingComponent"], body["reportingInstance"]) == (
        "slurm-bridge-scheduler",
        "sched-0",
    )

    # The Event expired server-side (TTL): the next repeat creates a new one.
    async def gone(_: web.Request) -> web.StreamResponse:
        return status_response(404, "NotFound", "events not found")

    server.on("PATCH", f"{EVENTS}/{name}", gone)
    await rec.record(p, "Normal", "Submitted", "Slurm job 7")
    assert state["created"] == 2


async def test_record_change_speaks_only_when_the_message_changes(
    server: ScriptedServer, kube: KubeClient
) -> None:
    state = script_events(server)
    rec = EventRecorder(kube, "c")
    p = pod("p")
    said = [
        await rec.record_change(p, "Normal", "Pending", m)
        for m in ("Priority", "Priority", "Resources", "Resources", "Priority")
    ]
    assert said == [True, False, True, False, True]
    assert state["created"] == 3


async def test_an_api_failure_is_logged_not_raised(
    server: ScriptedServer, kube: KubeClient
) -> None:
    async def boom(_: web.Request) -> web.StreamResponse:
        return status_response(403, "Forbidden", "no events for you")

    server.on("POST", EVENTS, boom)
    rec = EventRecorder(kube, "c")
    assert await rec.record(pod("p"), "Warning", "X", "y") is None
    assert not await rec.record_change(pod("p"), "Warning", "X", "y")
    server.on("POST", EVENTS, boom)
    assert not await rec.record_change(pod("p"), "Warning", "X", "y")  # retried, not cached
    assert len(server.sent("POST", EVENTS)) == 3
