"""KUBE.md: Binding. 201 with a Status; nodeName + PodScheduled; 409 when already bound,
on a UID mismatch and for a pod being deleted; the typed-call pitfall."""

from __future__ import annotations

import json

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from sandbox.cluster import SandboxCluster

from .helpers import NS, binding_body, pod_body


async def _bind(
    core: client.CoreV1Api, pod: str, node: str, uid: str | None = None
) -> tuple[int, dict[str, object]]:
    resp = await core.create_namespaced_pod_binding(
        pod, NS, binding_body(pod, node, uid), _preload_content=False
    )
    return resp.status, json.loads(await resp.read())


async def test_binding_with_preload_content_false_answers_201_with_status_object(
    core: client.CoreV1Api,
) -> None:
    await core.create_namespaced_pod(NS, pod_body("p"))
    status, body = await _bind(core, "p", "node-a")
    assert status == 201
    assert body["kind"] == "Status"
    assert body["status"] == "Success"


async def test_binding_sets_node_name_and_pod_scheduled_true(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod(NS, pod_body("p"))
    await _bind(core, "p", "node-a")
    pod = await core.read_namespaced_pod("p", NS)
    assert pod.spec.node_name == "node-a"
    cond = {c.type: c.status for c in pod.status.conditions}
    assert cond["PodScheduled"] == "True"


async def test_second_binding_answers_409_already_assigned_to_node(
    core: client.CoreV1Api,
) -> None:
    await core.create_namespaced_pod(NS, pod_body("p"))
    await _bind(core, "p", "node-a")
    status, body = await _bind(core, "p", "node-a")
    assert status == 409
    assert body["reason"] == "Conflict"
    assert 'pod p is already assigned to node "node-a"' in str(body["message"])


async def test_binding_with_mismatched_uid_answers_409(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod(NS, pod_body("p"))
    status, _ = await _bind(core, "p", "node-a", uid="00000000-0000-0000-0000-000000000000")
    assert status == 409
    assert (await core.read_namespaced_pod("p", NS)).spec.node_name is None


async def test_binding_with_matching_uid_succeeds(core: client.CoreV1Api) -> None:
    pod = await core.create_namespaced_pod(NS, pod_body("p"))
    status, _ = await _bind(core, "p", "node-a", uid=pod.metadata.uid)
    assert status == 201


async def test_binding_a_pod_being_deleted_answers_409(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod(
        NS, {**pod_body("p"), "metadata": {"name": "p", "finalizers": ["example.com/hold"]}}
    )
    await core.delete_namespaced_pod("p", NS)
    status, body = await _bind(core, "p", "node-a")
    assert status == 409
    assert "is being deleted" in str(body["message"])


async def test_binding_an_unknown_pod_answers_404(core: client.CoreV1Api) -> None:
    status, body = await _bind(core, "nope", "node-a")
    assert status == 404
    assert body["reason"] == "NotFound"


async def test_typed_binding_call_binds_then_raises_value_error_parsing_status(
    core: client.CoreV1Api,
) -> None:
    """kubernetes_asyncio pitfall: the typed call binds, then fails to parse the Status."""
    await core.create_namespaced_pod(NS, pod_body("p"))
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name="p"),
        target=client.V1ObjectReference(kind="Node", name="node-a"),
    )
    with pytest.raises(ValueError, match="target"):
        await core.create_namespaced_pod_binding("p", NS, body)
    assert (await core.read_namespaced_pod("p", NS)).spec.node_name == "node-a"


async def test_typed_binding_call_raises_409_on_rebind(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod(NS, pod_body("p"))
    await _bind(core, "p", "node-a")
    with pytest.raises(ApiException) as e:
        await core.create_namespaced_pod_binding("p", NS, binding_body("p", "node-b"))
    assert e.value.status == 409


async def test_binding_is_one_modified_event_with_a_new_resource_version(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    created = await core.create_namespaced_pod(NS, pod_body("p"))
    await _bind(core, "p", "node-a")
    pod = await core.read_namespaced_pod("p", NS)
    assert int(pod.metadata.resource_version) == int(created.metadata.resource_version) + 1
