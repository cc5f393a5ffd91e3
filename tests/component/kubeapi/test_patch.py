"""KUBE.md: merge-patch, json-patch, strategic-merge (lists by key), 415 on custom
resources, and the CustomObjectsApi content-type pitfall."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from sandbox.cluster import SandboxCluster
from sandbox.kubeapi.patch import json_patch, merge_patch, strategic_merge

from .helpers import NS, pod_body

PG = ("scheduling.x-k8s.io", "v1alpha1", NS, "podgroups")


def _pg(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": 2},
    }


async def _raw_patch(
    api: client.ApiClient, path: str, ctype: str, body: Any
) -> tuple[int, dict[str, Any]]:
    resp = await api.call_api(
        path,
        "PATCH",
        header_params={"Content-Type": ctype, "Accept": "application/json"},
        body=body,
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
    )
    return resp.status, json.loads(await resp.read())


async def test_merge_patch_merges_maps_and_null_deletes(core: client.CoreV1Api) -> None:
    await core.create_namespaced_config_map(
        NS, {"metadata": {"name": "a"}, "data": {"x": "1", "y": "2"}}
    )
    out = await core.patch_namespaced_config_map(
        "a", NS, {"data": {"x": None, "z": "3"}}, _content_type="application/merge-patch+json"
    )
    assert out.data == {"y": "2", "z": "3"}


async def test_json_patch_applies_operations(core: client.CoreV1Api) -> None:
    await core.create_namespaced_config_map(NS, {"metadata": {"name": "a"}, "data": {"x": "1"}})
    out = await core.patch_namespaced_config_map(
        "a",
        NS,
        [{"op": "add", "path": "/data/y", "value": "2"}, {"op": "remove", "path": "/data/x"}],
        _content_type="application/json-patch+json",
    )
    assert out.data == {"y": "2"}


async def test_json_patch_failed_test_operation_is_rejected(core: client.CoreV1Api) -> None:
    await core.create_namespaced_config_map(NS, {"metadata": {"name": "a"}, "data": {"x": "1"}})
    with pytest.raises(ApiException) as e:
        await core.patch_namespaced_config_map(
            "a",
            NS,
            [{"op": "test", "path": "/data/x", "value": "2"}],
            _content_type="application/json-patch+json",
        )
    assert e.value.status == 422


async def test_strategic_merge_merges_containers_by_name(core: client.CoreV1Api) -> None:
    body = pod_body("p")
    body["spec"]["containers"].append({"name": "side", "image": "busybox:1"})
    await core.create_namespaced_pod(NS, body)
    out = await core.patch_namespaced_pod(
        "p", NS, {"spec": {"containers": [{"name": "side", "image": "busybox:2"}]}}
    )
    assert [(c.name, c.image) for c in out.spec.containers] == [
        ("main", "busybox:1.36"),
        ("side", "busybox:2"),
    ]


async def test_strategic_merge_merges_conditions_by_type(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod(NS, pod_body("p"))
    await core.patch_namespaced_pod_status(
        "p",
        NS,
        {
            "status": {
                "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
                ]
            }
        },
    )
    out = await core.patch_namespaced_pod_status(
        "p", NS, {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    )
    assert {c.type: c.status for c in out.status.conditions} == {
        "PodScheduled": "False",
        "Ready": "False",
    }


async def test_strategic_merge_replaces_tolerations(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod(NS, pod_body("p"))
    out = await core.patch_namespaced_pod(
        "p", NS, {"spec": {"tolerations": [{"key": "k", "operator": "Exists"}]}}
    )
    assert [t.key for t in out.spec.tolerations] == ["k"]


async def test_strategic_merge_unions_finalizers(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod(
        NS, {**pod_body("p"), "metadata": {"name": "p", "finalizers": ["a.io/x"]}}
    )
    out = await core.patch_namespaced_pod("p", NS, {"metadata": {"finalizers": ["b.io/y"]}})
    assert out.metadata.finalizers == ["a.io/x", "b.io/y"]


async def test_merge_patch_replaces_finalizers(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod(
        NS, {**pod_body("p"), "metadata": {"name": "p", "finalizers": ["a.io/x"]}}
    )
    out = await core.patch_namespaced_pod(
        "p",
        NS,
        {"metadata": {"finalizers": ["b.io/y"]}},
        _content_type="application/merge-patch+json",
    )
    assert out.metadata.finalizers == ["b.io/y"]


async def test_strategic_merge_on_custom_resource_answers_415(
    api: client.ApiClient, custom: client.CustomObjectsApi
) -> None:
    await custom.create_namespaced_custom_object(*PG, _pg("g"))
    status, body = await _raw_patch(
        api,
        f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{NS}/podgroups/g",
        "application/strategic-merge-patch+json",
        {"spec": {"minMember": 3}},
    )
    assert (status, body["reason"]) == (415, "UnsupportedMediaType")


async def test_custom_objects_merge_patch_with_content_type_works(
    custom: client.CustomObjectsApi,
) -> None:
    await custom.create_namespaced_custom_object(*PG, _pg("g"))
    out = await custom.patch_namespaced_custom_object(
        *PG, "g", {"spec": {"minMember": 3}}, _content_type="application/merge-patch+json"
    )
    assert out["spec"]["minMember"] == 3


async def test_custom_objects_patch_with_a_dict_and_no_content_type_answers_400(
    custom: client.CustomObjectsApi,
) -> None:
    """Pitfall: CustomObjectsApi sends a dict as json-patch by default."""
    await custom.create_namespaced_custom_object(*PG, _pg("g"))
    with pytest.raises(ApiException) as e:
        await custom.patch_namespaced_custom_object(*PG, "g", {"spec": {"minMember": 3}})
    assert e.value.status == 400


async def test_unknown_patch_content_type_answers_415(
    srv: SandboxCluster, api: client.ApiClient, core: client.CoreV1Api
) -> None:
    await core.create_namespaced_config_map(NS, {"metadata": {"name": "a"}})
    status, _ = await _raw_patch(
        api, f"/api/v1/namespaces/{NS}/configmaps/a", "application/apply-patch+yaml", {"data": {}}
    )
    assert status == 415


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [
        pytest.param({"a": 1}, {"a": None}, {}, id="null-deletes"),
        pytest.param({"a": {"b": 1}}, {"a": {"c": 2}}, {"a": {"b": 1, "c": 2}}, id="nested"),
        pytest.param({"a": [1, 2]}, {"a": [3]}, {"a": [3]}, id="lists-replaced"),
    ],
)
def test_merge_patch_rfc7386(target: Any, patch: Any, expected: Any) -> None:
    assert merge_patch(target, patch) == expected


@pytest.mark.parametrize(
    ("target", "ops", "expected"),
    [
        pytest.param(
            {"a": [1]}, [{"op": "add", "path": "/a/-", "value": 2}], {"a": [1, 2]}, id="append"
        ),
        pytest.param({"a": 1}, [{"op": "move", "from": "/a", "path": "/b"}], {"b": 1}, id="move"),
        pytest.param(
            {"a/b": 1},
            [{"op": "replace", "path": "/a~1b", "value": 2}],
            {"a/b": 2},
            id="escaped-pointer",
        ),
    ],
)
def test_json_patch_rfc6902(target: Any, ops: Any, expected: Any) -> None:
    assert json_patch(target, ops) == expected


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [
        pytest.param(
            {"containers": [{"name": "a", "image": "1"}]},
            {"containers": [{"name": "a", "$patch": "delete"}]},
            {"containers": []},
            id="patch-delete-item",
        ),
        pytest.param(
            {"finalizers": ["a", "b"]},
            {"$deleteFromPrimitiveList/finalizers": ["a"]},
            {"finalizers": ["b"]},
            id="delete-from-primitive-list",
        ),
        pytest.param(
            {"x": {"a": 1, "b": 2}},
            {"x": {"$patch": "replace", "c": 3}},
            {"x": {"c": 3}},
            id="replace-map",
        ),
        pytest.param(
            {"containers": [{"name": "a"}]},
            {
                "$setElementOrder/containers": [{"name": "a"}],
                "containers": [{"name": "a", "image": "x"}],
            },
            {"containers": [{"name": "a", "image": "x"}]},
            id="set-element-order",
        ),
    ],
)
def test_strategic_merge_directives(target: Any, patch: Any, expected: Any) -> None:
    assert strategic_merge(target, patch) == expected
