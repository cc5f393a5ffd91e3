"""KUBE.md: CustomResourceDefinitions (create/get/list, 409, Established, served, status
subresource, pruning) and the bundled PodGroup/JobSet/LeaderWorkerSet."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from sandbox.cluster import SandboxCluster

from .helpers import NS


def _crd(scope: str = "Namespaced", status: bool = True) -> dict[str, Any]:
    version: dict[str, Any] = {
        "name": "v1",
        "served": True,
        "storage": True,
        "schema": {
            "openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                    "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
                },
            }
        },
    }
    if status:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": scope,
            "names": {
                "plural": "widgets",
                "singular": "widget",
                "kind": "Widget",
                "listKind": "WidgetList",
            },
            "versions": [version],
        },
    }


@pytest.fixture
def ext(api: client.ApiClient) -> client.ApiextensionsV1Api:
    return client.ApiextensionsV1Api(api)


def _widget(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"size": 1},
        **extra,
    }


async def test_crd_create_sets_established_and_serves_the_resource(
    ext: client.ApiextensionsV1Api, custom: client.CustomObjectsApi
) -> None:
    await ext.create_custom_resource_definition(_crd())
    crd = await ext.read_custom_resource_definition("widgets.example.com")
    conds = {c.type: c.status for c in crd.status.conditions}
    assert conds["Established"] == "True"
    await custom.create_namespaced_custom_object("example.com", "v1", NS, "widgets", _widget("w"))
    got = await custom.list_namespaced_custom_object("example.com", "v1", NS, "widgets")
    assert [i["metadata"]["name"] for i in got["items"]] == ["w"]
    assert got["items"][0]["kind"] == "Widget"


async def test_crd_create_twice_answers_409(ext: client.ApiextensionsV1Api) -> None:
    await ext.create_custom_resource_definition(_crd())
    with pytest.raises(ApiException) as e:
        await ext.create_custom_resource_definition(_crd())
    assert e.value.status == 409


async def test_crd_list_includes_bundled_crds(ext: client.ApiextensionsV1Api) -> None:
    names = {c.metadata.name for c in (await ext.list_custom_resource_definition()).items}
    assert names >= {
        "podgroups.scheduling.x-k8s.io",
        "jobsets.jobset.x-k8s.io",
        "leaderworkersets.leaderworkerset.x-k8s.io",
    }


async def test_cluster_scoped_crd_is_served_without_namespace(
    ext: client.ApiextensionsV1Api, custom: client.CustomObjectsApi
) -> None:
    await ext.create_custom_resource_definition(_crd(scope="Cluster"))
    await custom.create_cluster_custom_object("example.com", "v1", "widgets", _widget("w"))
    got = await custom.get_cluster_custom_object("example.com", "v1", "widgets", "w")
    assert "namespace" not in got["metadata"]


async def test_unknown_resource_answers_404(custom: client.CustomObjectsApi) -> None:
    with pytest.raises(ApiException) as e:
        await custom.list_namespaced_custom_object("example.com", "v1", NS, "widgets")
    assert e.value.status == 404


async def test_custom_resource_status_subresource_and_main_resource_split(
    ext: client.ApiextensionsV1Api, custom: client.CustomObjectsApi
) -> None:
    await ext.create_custom_resource_definition(_crd())
    args = ("example.com", "v1", NS, "widgets", "w")
    await custom.create_namespaced_custom_object(*args[:4], _widget("w", status={"ready": True}))
    got = await custom.get_namespaced_custom_object(*args)
    assert "status" not in got  # dropped on create
    out = await custom.patch_namespaced_custom_object_status(
        *args,
        {"status": {"ready": True}, "spec": {"size": 9}},
        _content_type="application/merge-patch+json",
    )
    assert out["status"] == {"ready": True}
    assert out["spec"] == {"size": 1}
    out = await custom.patch_namespaced_custom_object(
        *args,
        {"status": {"ready": False}, "spec": {"size": 2}},
        _content_type="application/merge-patch+json",
    )
    assert (out["status"], out["spec"]) == ({"ready": True}, {"size": 2})


async def test_custom_resource_unknown_fields_are_pruned(
    ext: client.ApiextensionsV1Api, custom: client.CustomObjectsApi
) -> None:
    await ext.create_custom_resource_definition(_crd())
    args = ("example.com", "v1", NS, "widgets")
    await custom.create_namespaced_custom_object(
        *args, {**_widget("w"), "spec": {"size": 1, "bogus": 2}, "extra": 1}
    )
    out = await custom.patch_namespaced_custom_object_status(
        *args,
        "w",
        {"status": {"ready": True, "notInSchema": "x"}},
        _content_type="application/merge-patch+json",
    )
    assert out["spec"] == {"size": 1}
    assert "extra" not in out
    assert out["status"] == {"ready": True}


async def test_podgroup_status_fields_not_in_schema_are_pruned(
    custom: client.CustomObjectsApi,
) -> None:
    args = ("scheduling.x-k8s.io", "v1alpha1", NS, "podgroups")
    await custom.create_namespaced_custom_object(
        *args,
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "g"},
            "spec": {"minMember": 2, "minResources": {"cpu": "2"}, "scheduleTimeoutSeconds": 60},
        },
    )
    out = await custom.patch_namespaced_custom_object_status(
        *args,
        "g",
        {"status": {"phase": "Scheduling", "slurmJobId": "42", "scheduled": 1}},
        _content_type="application/merge-patch+json",
    )
    assert out["status"] == {"phase": "Scheduling", "scheduled": 1}
    assert out["spec"]["minResources"] == {"cpu": "2"}


@pytest.mark.parametrize(
    ("group", "version", "plural", "kind"),
    [
        pytest.param("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup", id="podgroup"),
        pytest.param("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", id="jobset"),
        pytest.param(
            "leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet", id="lws"
        ),
    ],
)
async def test_bundled_crd_keeps_spec_and_has_status_subresource(
    custom: client.CustomObjectsApi, group: str, version: str, plural: str, kind: str
) -> None:
    spec = {"minMember": 1} if plural == "podgroups" else {"replicatedJobs": [{"name": "w"}]}
    await custom.create_namespaced_custom_object(
        group,
        version,
        NS,
        plural,
        {"apiVersion": f"{group}/{version}", "kind": kind, "metadata": {"name": "x"}, "spec": spec},
    )
    got = await custom.get_namespaced_custom_object(group, version, NS, plural, "x")
    assert got["spec"] == spec
    await custom.patch_namespaced_custom_object_status(
        group,
        version,
        NS,
        plural,
        "x",
        {"status": {"conditions": []}},
        _content_type="application/merge-patch+json",
    )


async def test_custom_resource_put_without_resource_version_is_invalid(
    ext: client.ApiextensionsV1Api, custom: client.CustomObjectsApi
) -> None:
    await ext.create_custom_resource_definition(_crd())
    await custom.create_namespaced_custom_object("example.com", "v1", NS, "widgets", _widget("w"))
    with pytest.raises(ApiException) as e:
        await custom.replace_namespaced_custom_object(
            "example.com", "v1", NS, "widgets", "w", _widget("w")
        )
    assert e.value.status == 422


async def test_deleting_a_crd_stops_serving_its_resource(
    srv: SandboxCluster, ext: client.ApiextensionsV1Api, custom: client.CustomObjectsApi
) -> None:
    await ext.create_custom_resource_definition(_crd())
    await custom.create_namespaced_custom_object("example.com", "v1", NS, "widgets", _widget("w"))
    await ext.delete_custom_resource_definition("widgets.example.com")
    with pytest.raises(ApiException) as e:
        await custom.list_namespaced_custom_object("example.com", "v1", NS, "widgets")
    assert e.value.status == 404
    assert json.loads(e.value.body)["reason"] == "NotFound"


async def test_crd_with_wrong_name_is_invalid(ext: client.ApiextensionsV1Api) -> None:
    crd = _crd()
    crd["metadata"]["name"] = "gadgets.example.com"
    with pytest.raises(ApiException) as e:
        await ext.create_custom_resource_definition(crd)
    assert e.value.status == 422
