"""The adapter against scripted real-apiserver answers: errors, timeouts, reads, writes, binding."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from aiohttp import web

from bridge.errors import (
    ConfigError,
    KubeConflict,
    KubeError,
    KubeForbidden,
    KubeGone,
    KubeInvalid,
    KubeNotFound,
    KubeTimeout,
    KubeUnavailable,
)
from bridge.kube.client import KubeClient
from bridge.kube.resources import (
    JOBS,
    JOBSETS,
    LEADERWORKERSETS,
    NODES,
    PODGROUPS,
    PODS,
    format_micro_time,
)
from tests.clients import kube_for_host
from tests.component.kube.scripted import ScriptedServer, pod, status_response
from tests.fake_clock import FakeClock

POD_PATH = "/api/v1/namespaces/default/pods/p"


# --------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    ("code", "reason", "expected"),
    [
        pytest.param(409, "Conflict", KubeConflict, id="409-conflict"),
        pytest.param(404, "NotFound", KubeNotFound, id="404-notfound"),
        pytest.param(410, "Expired", KubeGone, id="410-gone"),
        pytest.param(401, "Unauthorized", KubeForbidden, id="401-forbidden"),
        pytest.param(403, "Forbidden", KubeForbidden, id="403-forbidden"),
        pytest.param(400, "BadRequest", KubeInvalid, id="400-invalid"),
        pytest.param(415, "UnsupportedMediaType", KubeInvalid, id="415-invalid"),
        pytest.param(422, "Invalid", KubeInvalid, id="422-invalid"),
        pytest.param(429, "TooManyRequests", KubeUnavailable, id="429-unavailable"),
        pytest.param(500, "InternalError", KubeUnavailable, id="500-unavailable"),
        pytest.param(503, "ServiceUnavailable", KubeUnavailable, id="503-unavailable"),
    ],
)
async def test_http_status_maps_to_the_error_tree(
    server: ScriptedServer, kube: KubeClient, code: int, reason: str, expected: type[KubeError]
) -> None:
    async def h(_: web.Request) -> web.StreamResponse:
        return status_response(code, reason, f"scripted {reason}")

    server.on("GET", POD_PATH, h)
    with pytest.raises(expected) as info:
        await kube.get_pod("default", "p")
    assert info.value.status == code
    assert info.value.reason == reason
    assert "Pod default/p" in str(info.value)


async def test_classification_ignores_message_text(
    server: ScriptedServer, kube: KubeClient
) -> None:
    """A 500 whose text says 'already exists' / 'not found' is still 'unavailable'."""

    async def h(_: web.Request) -> web.StreamResponse:
        return status_response(500, "InternalError", 'pods "p" already exists; not found')

    server.on("GET", POD_PATH, h)
    with pytest.raises(KubeUnavailable) as info:
        await kube.get_pod("default", "p")
    assert not isinstance(info.value, KubeConflict | KubeNotFound)


async def test_a_hanging_server_gives_kube_timeout(
    server: ScriptedServer, clock: FakeClock
) -> None:
    async def hang(_: web.Request) -> web.StreamResponse:
        await server.closing.wait()
        return status_response(200)

    server.on("GET", POD_PATH, hang)
    async with kube_for_host(server.url, request_timeout=0.2, clock=clock) as client:
        with pytest.raises(KubeTimeout):
            await client.get_pod("default", "p")


async def test_a_closed_port_gives_kube_unavailable(clock: FakeClock) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with kube_for_host(f"http://127.0.0.1:{port}", request_timeout=2) as client:
        with pytest.raises(KubeUnavailable) as info:
            await client.get_pod("default", "p")
    assert not isinstance(info.value, KubeTimeout)


async def test_a_non_positive_timeout_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="kubeRequestTimeoutSeconds"):
        kube_for_host("http://127.0.0.1:1", request_timeout=0)


# --------------------------------------------------------------------------- config
async def test_kubeconfig_file_gives_host_and_bearer_token(
    server: ScriptedServer, tmp_path: Path
) -> None:
    cfg = tmp_path / "kubeconfig"
    cfg.write_text(
        f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "{server.url}"}}}}]
users: [{{name: u, user: {{token: s3cret}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
"""
    )
    server.on_json("GET", POD_PATH, pod("p"))
    client = await KubeClient.connect(kubeconfig=cfg, request_timeout=5)
    try:
        got = await client.get_pod("default", "p")
    finally:
        await client.close()
    assert got["metadata"]["name"] == "p"
    assert server.requests[-1].headers["authorization"] == "Bearer s3cret"


async def test_unreadable_kubeconfig_is_a_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "nope"
    bad.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    with pytest.raises(ConfigError, match="kubeconfig"):
        await KubeClient.connect(kubeconfig=bad, request_timeout=5)


# --------------------------------------------------------------------------- reads
async def test_list_sends_selectors_follows_continue_and_keeps_first_version(
    server: ScriptedServer, kube: KubeClient
) -> None:
    async def h(request: web.Request) -> web.StreamResponse:
        if request.query.get("continue") == "tok":
            return web.json_response(
                {"kind": "PodList", "metadata": {"resourceVersion": "99"}, "items": [pod("b")]}
            )
        return web.json_response(
            {
                "kind": "PodList",
                "metadata": {"resourceVersion": "42", "continue": "tok"},
                "items": [pod("a")],
            }
        )

    server.on("GET", "/api/v1/pods", h)
    got = await kube.list_pods(
        label_selector="app=x", field_selector="spec.schedulerName=s,spec.nodeName="
    )
    assert [p["metadata"]["name"] for p in got.items] == ["a", "b"]
    assert got.resource_version == "42"
    first = server.requests[0].query
    assert first["labelSelector"] == "app=x"
    assert first["fieldSelector"] == "spec.schedulerName=s,spec.nodeName="


async def test_custom_objects_are_read_from_their_group_paths(
    server: ScriptedServer, kube: KubeClient
) -> None:
    paths = {
        "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ns/podgroups/g": PODGROUPS,
        "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ns/jobsets/g": JOBSETS,
        "/apis/leaderworkerset.x-k8s.io/v1/namespaces/ns/leaderworkersets/g": LEADERWORKERSETS,
        "/apis/batch/v1/namespaces/ns/jobs/g": JOBS,
    }
    for path in paths:
        server.on_json("GET", path, {"metadata": {"name": "g", "namespace": "ns"}, "x": path})
    for path, res in paths.items():
        assert (await kube.get(res, "g", "ns"))["x"] == path


# --------------------------------------------------------------------------- writes
@pytest.mark.parametrize(
    ("patch_type", "content_type"),
    [
        pytest.param("merge", "application/merge-patch+json", id="merge"),
        pytest.param("strategic", "application/strategic-merge-patch+json", id="strategic"),
        pytest.param("json", "application/json-patch+json", id="json"),
    ],
)
async def test_patch_sends_the_named_content_type(
    server: ScriptedServer, kube: KubeClient, patch_type: str, content_type: str
) -> None:
    server.on_json("PATCH", POD_PATH, pod("p"))
    body: object = (
        [{"op": "add", "path": "/metadata/labels/a", "value": "b"}]
        if patch_type == "json"
        else {"metadata": {"labels": {"a": "b"}}}
    )
    await kube.patch_pod("default", "p", body, patch_type=patch_type)  # type: ignore[arg-type]
    sent = server.sent("PATCH", POD_PATH)[0]
    assert sent.headers["content-type"] == content_type
    assert sent.body == body


async def test_podgroup_status_is_merge_patched_on_the_status_subresource(
    server: ScriptedServer, kube: KubeClient
) -> None:
    path = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ns/podgroups/g/status"
    server.on_json("PATCH", path, {"status": {"phase": "Scheduling"}})
    await kube.patch_podgroup_status("ns", "g", {"phase": "Scheduling"})
    sent = server.sent("PATCH", path)[0]
    assert sent.headers["content-type"] == "application/merge-patch+json"
    assert sent.body == {"status": {"phase": "Scheduling"}}


async def test_strategic_merge_on_a_custom_resource_is_refused_before_sending(
    server: ScriptedServer, kube: KubeClient
) -> None:
    with pytest.raises(KubeInvalid, match="415"):
        await kube.patch(PODGROUPS, "g", {"a": 1}, namespace="ns", patch_type="strategic")
    assert server.requests == []


async def test_pod_condition_is_patched_with_reason_and_message_only_when_changed(
    server: ScriptedServer, kube: KubeClient
) -> None:
    server.on_json("PATCH", POD_PATH + "/status", pod("p"))
    p = pod("p")
    p["status"]["conditions"] = [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "Slurm: Resources",
            "lastTransitionTime": "2025-01-01T00:00:00Z",
        }
    ]
    # Same status, reason, message: nothing sent.
    await kube.set_pod_unschedulable(
        "default", "p", reason="Unschedulable", message="Slurm: Resources", pod=p
    )
    assert server.requests == []
    # New message, same status: the transition time is kept.
    await kube.set_pod_unschedulable(
        "default", "p", reason="Unschedulable", message="Slurm: Priority", pod=p
    )
    # Status flips: the transition time moves to now.
    await kube.set_pod_condition(
        "default", "p", "PodScheduled", True, reason="Scheduled", message="", pod=p
    )
    first, second = server.sent("PATCH", POD_PATH + "/status")
    assert first.headers["content-type"] == "application/strategic-merge-patch+json"
    c1 = first.body["status"]["conditions"][0]
    assert (c1["status"], c1["reason"], c1["message"]) == (
        "False",
        "Unschedulable",
        "Slurm: Priority",
    )
    assert c1["lastTransitionTime"] == "2025-01-01T00:00:00Z"
    c2 = second.body["status"]["conditions"][0]
    assert (c2["status"], c2["lastTransitionTime"]) == ("True", "2026-01-01T00:00:00Z")


async def test_fail_pod_sets_phase_reason_message_and_our_condition(
    server: ScriptedServer, kube: KubeClient
) -> None:
    server.on_json("PATCH", POD_PATH + "/status", pod("p"))
    await kube.fail_pod(
        "default",
        "p",
        reason="SlurmJobEnded",
        message="job 7 TIMEOUT",
        conditions=[{"type": "slinky.slurm.net/SlurmJobEnded", "status": "True"}],
    )
    body = server.sent("PATCH", POD_PATH + "/status")[0].body["status"]
    assert (body["phase"], body["reason"], body["message"]) == (
        "Failed",
        "SlurmJobEnded",
        "job 7 TIMEOUT",
    )
    assert body["conditions"][0]["type"] == "slinky.slurm.net/SlurmJobEnded"


async def test_finalizer_add_retries_a_409_with_a_fresh_read(
    server: ScriptedServer, kube: KubeClient
) -> None:
    reads = {"n": 0}

    async def get(_: web.Request) -> web.StreamResponse:
        reads["n"] += 1
        return web.json_response(pod("p", rv=str(reads["n"])))

    async def patch(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if body["metadata"]["resourceVersion"] == "1":
            return status_response(409, "Conflict", "the object has been modified")
        return web.json_response(pod("p", rv="3"))

    server.on("GET", POD_PATH, get)
    server.on("PATCH", POD_PATH, patch)
    await kube.add_finalizer(PODS, "p", "x/f", "default")
    patches = server.sent("PATCH", POD_PATH)
    assert [p.body["metadata"]["resourceVersion"] for p in patches] == ["1", "2"]
    assert patches[-1].body["metadata"]["finalizers"] == ["x/f"]
    assert patches[-1].headers["content-type"] == "application/merge-patch+json"


async def test_finalizer_remove_is_a_no_op_when_absent_or_gone(
    server: ScriptedServer, kube: KubeClient
) -> None:
    server.on_json("GET", POD_PATH, pod("p"))
    assert (await kube.remove_finalizer(PODS, "p", "x/f", "default")) is not None
    assert await kube.remove_finalizer(PODS, "gone", "x/f", "default") is None
    assert [r.method for r in server.requests] == ["GET", "GET"]


async def test_metadata_merge_patches_and_delete_with_grace_period(
    server: ScriptedServer, kube: KubeClient
) -> None:
    server.on_json("PATCH", POD_PATH, pod("p"))
    server.on_json("DELETE", POD_PATH, pod("p", deleting=True))
    await kube.patch(
        PODS, "p", {"metadata": {"labels": {"a": "1", "old": None}}}, namespace="default"
    )
    await kube.patch(PODS, "p", {"metadata": {"annotations": {"b": "2"}}}, namespace="default")
    await kube.delete_pod("default", "p", grace_period_seconds=0, uid="uid-p")
    lab, ann = server.sent("PATCH", POD_PATH)
    assert lab.body == {"metadata": {"labels": {"a": "1", "old": None}}}
    assert ann.body == {"metadata": {"annotations": {"b": "2"}}}
    d = server.sent("DELETE", POD_PATH)[0]
    assert d.query["gracePeriodSeconds"] == "0"
    assert d.body["gracePeriodSeconds"] == 0
    assert d.body["preconditions"] == {"uid": "uid-p"}
    assert await kube.delete_pod("default", "gone") is None


async def test_node_taints_cordon_and_labels(server: ScriptedServer, kube: KubeClient) -> None:
    node = {
        "metadata": {"name": "n1", "resourceVersion": "5"},
        "spec": {"taints": [{"key": "other", "effect": "NoSchedule"}]},
    }
    server.on_json("GET", "/api/v1/nodes/n1", node)
    server.on_json("PATCH", "/api/v1/nodes/n1", node)
    await kube.add_node_taint("n1", {"key": "k", "value": "v", "effect": "NoSchedule"})
    await kube.remove_node_taint("n1", "other")
    await kube.remove_node_taint("n1", "absent")  # no write
    await kube.patch(NODES, "n1", {"spec": {"unschedulable": True}})
    await kube.patch(NODES, "n1", {"metadata": {"labels": {"l": "x"}}})
    add, rm, cordon, label = (r.body for r in server.sent("PATCH", "/api/v1/nodes/n1"))
    assert [t["key"] for t in add["spec"]["taints"]] == ["other", "k"]
    assert add["spec"]["taints"][1]["timeAdded"] == "2026-01-01T00:00:00Z"
    assert add["metadata"]["resourceVersion"] == "5"
    assert rm["spec"]["taints"] == []
    assert cordon == {"spec": {"unschedulable": True}}
    assert label == {"metadata": {"labels": {"l": "x"}}}


# --------------------------------------------------------------------------- binding
BIND = POD_PATH + "/binding"


async def test_binding_accepts_201_status_and_sends_the_pod_uid(
    server: ScriptedServer, kube: KubeClient
) -> None:
    async def h(_: web.Request) -> web.StreamResponse:
        return web.json_response(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "code": 201,
            },
            status=201,
        )

    server.on("POST", BIND, h)
    await kube.bind_pod("default", "p", "uid-p", "n1")
    body = server.sent("POST", BIND)[0].body
    assert body["metadata"] == {"name": "p", "namespace": "default", "uid": "uid-p"}
    assert body["target"]["name"] == "n1"
    assert body["kind"] == "Binding"


@pytest.mark.parametrize(
    ("current", "error"),
    [
        pytest.param(pod("p", node="n1"), None, id="same-node-is-success"),
        pytest.param(pod("p", node="n2"), "already bound to node n2", id="other-node"),
        pytest.param(pod("p", uid="other"), "uid other", id="uid-mismatch"),
        pytest.param(pod("p", deleting=True), "terminating", id="terminating"),
    ],
)
async def test_binding_409_is_decided_from_the_pod_not_the_text(
    server: ScriptedServer, kube: KubeClient, current: dict[str, object], error: str | None
) -> None:
    async def h(_: web.Request) -> web.StreamResponse:
        return status_response(409, "Conflict", 'Operation cannot be fulfilled: "p"')

    server.on("POST", BIND, h)
    server.on_json("GET", POD_PATH, current)
    if error is None:
        await kube.bind_pod("default", "p", "uid-p", "n1")
    else:
        with pytest.raises(KubeConflict, match=error):
            await kube.bind_pod("default", "p", "uid-p", "n1")


async def test_binding_a_deleted_pod_is_not_found(server: ScriptedServer, kube: KubeClient) -> None:
    async def h(_: web.Request) -> web.StreamResponse:
        return status_response(404, "NotFound", 'pods "p" not found')

    server.on("POST", BIND, h)
    with pytest.raises(KubeNotFound):
        await kube.bind_pod("default", "p", "uid-p", "n1")


def test_micro_time_has_six_digits_and_z() -> None:
    from datetime import UTC, datetime

    assert format_micro_time(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == (
        "2026-01-02T03:04:05.000000Z"
    )


async def test_client_session_is_closed(server: ScriptedServer) -> None:
    client = kube_for_host(server.url, request_timeout=1)
    await client.close()
    assert client._api.rest_client.pool_manager.closed
