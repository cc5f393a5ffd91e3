"""Tenant text on its way into Kubernetes (issue 30, finding 5): an Event's message and a
pod condition's (or a Failed pod's) message may quote what a tenant wrote (a reason
quoting an annotation value, an owner name). They go through :func:`bridge.text.clip`:
cut, with hidden characters escaped."""

from __future__ import annotations

from aiohttp import web

from bridge.kube.client import CONDITION_MESSAGE_MAX, KubeClient
from bridge.kube.events import EventRecorder
from tests.component.kube.scripted import ScriptedServer, pod

EVENTS = "/api/v1/namespaces/default/events"
POD_PATH = "/api/v1/namespaces/default/pods/p"
HOSTILE = "evil\n\u202e" + "x" * 100_000


async def test_an_event_message_is_clipped_and_its_hidden_characters_escaped(
    server: ScriptedServer, kube: KubeClient
) -> None:
    async def create(request: web.Request) -> web.StreamResponse:
        return web.json_response(await request.json(), status=201)

    server.on("POST", EVENTS, create)
    p = pod("p")
    p["kind"] = "Pod"
    await EventRecorder(kube, "slurm-bridge-scheduler").record(p, "Warning", "Invalid", HOSTILE)
    message = server.sent("POST", EVENTS)[0].body["message"]
    assert len(message) < 1100
    assert message.startswith("evil\\x0a\\u202exxx")
    assert message.endswith("chars)")


async def test_a_pod_condition_and_a_failed_pods_message_are_clipped(
    server: ScriptedServer, kube: KubeClient
) -> None:
    server.on_json("PATCH", POD_PATH + "/status", pod("p"))
    await kube.set_pod_unschedulable(
        "default", "p", reason="Unschedulable", message=HOSTILE, pod=pod("p")
    )
    await kube.fail_pod("default", "p", reason="SlurmJobFailed", message=HOSTILE)
    condition, failed = server.sent("PATCH", POD_PATH + "/status")
    for message in (
        condition.body["status"]["conditions"][0]["message"],
        failed.body["status"]["message"],
    ):
        assert len(message) < CONDITION_MESSAGE_MAX + 50
        assert "\n" not in message
        assert "\u202e" not in message
