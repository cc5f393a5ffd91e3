"""KUBE.md: create/get/update conflicts, errors as Status objects, no-op updates, status
subresources, generateName, selectors and pagination."""

from __future__ import annotations

import json

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from sandbox.cluster import SandboxCluster

from .helpers import NS, pod_body


def _cm(name: str, labels: dict[str, str] | None = None, **data: str) -> dict[str, object]:
    return {"metadata": {"name": name, "labels": labels or {}}, "data": data}


async def test_create_of_an_existing_name_answers_409_already_exists(
    core: client.CoreV1Api,
) -> None:
    await core.create_namespaced_config_map(NS, _cm("a"))
    with pytest.raises(ApiException) as e:
        await core.create_namespaced_config_map(NS, _cm("a"))
    assert e.value.status == 409
    assert json.loads(e.value.body)["reason"] == "AlreadyExists"


async def test_get_of_an_unknown_object_answers_404_with_a_not_found_status(
    core: client.CoreV1Api,
) -> None:
    with pytest.raises(ApiException) as e:
        await core.read_namespaced_config_map("missing", NS)
    body = json.loads(e.value.body)
    assert (e.value.status, body["kind"], body["reason"], body["code"]) == (
        404,
        "Status",
        "NotFound",
        404,
    )


async def test_put_with_stale_resource_version_answers_409_conflict(
    core: client.CoreV1Api,
) -> None:
    cm = await core.create_namespaced_config_map(NS, _cm("a", x="1"))
    cm.data = {"x": "2"}
    await core.replace_namespaced_config_map("a", NS, cm)  # cm still has the old version
    cm.data = {"x": "3"}
    with pytest.raises(ApiException) as e:
        await core.replace_namespaced_config_map("a", NS, cm)
    assert e.value.status == 409
    assert json.loads(e.value.body)["reason"] == "Conflict"


async def test_patch_with_stale_resource_version_answers_409_conflict(
    core: client.CoreV1Api,
) -> None:
    cm = await core.create_namespaced_config_map(NS, _cm("a", x="1"))
    await core.patch_namespaced_config_map("a", NS, {"data": {"x": "2"}})
    stale = {"metadata": {"resourceVersion": cm.metadata.resource_version}, "data": {"x": "3"}}
    with pytest.raises(ApiException) as e:
        await core.patch_namespaced_config_map("a", NS, stale)
    assert e.value.status == 409


async def test_resource_versions_are_global_increasing_integers(core: client.CoreV1Api) -> None:
    a = await core.create_namespaced_config_map(NS, _cm("a"))
    b = await core.create_namespaced_secret(NS, {"metadata": {"name": "b"}})
    assert int(b.metadata.resource_version) > int(a.metadata.resource_version)


async def test_noop_update_does_not_bump_resource_version(core: client.CoreV1Api) -> None:
    cm = await core.create_namespaced_config_map(NS, _cm("a", x="1"))
    same = await core.replace_namespaced_config_map("a", NS, cm)
    assert same.metadata.resource_version == cm.metadata.resource_version
    patched = await core.patch_namespaced_config_map("a", NS, {"data": {"x": "1"}})
    assert patched.metadata.resource_version == cm.metadata.resource_version


async def test_generate_name_creates_a_unique_name(core: client.CoreV1Api) -> None:
    body = {"metadata": {"generateName": "job-"}}
    a = await core.create_namespaced_config_map(NS, body)
    b = await core.create_namespaced_config_map(NS, body)
    assert a.metadata.name.startswith("job-")
    assert a.metadata.name != b.metadata.name


async def test_created_objects_get_uid_and_creation_timestamp(core: client.CoreV1Api) -> None:
    cm = await core.create_namespaced_config_map(NS, _cm("a"))
    assert cm.metadata.uid
    assert cm.metadata.creation_timestamp is not None


async def test_invalid_name_answers_422_invalid(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as e:
        await core.create_namespaced_config_map(NS, _cm("Not_Valid"))
    assert e.value.status == 422
    assert json.loads(e.value.body)["reason"] == "Invalid"


async def test_create_in_a_missing_namespace_answers_404(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as e:
        await core.create_namespaced_config_map("nowhere", _cm("a"))
    assert e.value.status == 404


async def test_status_subresource_writes_status_only(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod(NS, pod_body("p"))
    patch = {"metadata": {"labels": {"x": "y"}}, "status": {"phase": "Running"}}
    out = await core.patch_namespaced_pod_status("p", NS, patch)
    assert out.status.phase == "Running"
    assert out.metadata.labels is None


async def test_main_resource_ignores_status_changes(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod(NS, pod_body("p"))
    out = await core.patch_namespaced_pod(
        "p", NS, {"metadata": {"labels": {"x": "y"}}, "status": {"phase": "Running"}}
    )
    assert out.status.phase == "Pending"
    assert out.metadata.labels == {"x": "y"}


async def test_pod_spec_node_name_cannot_be_changed_by_update(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod(NS, pod_body("p"))
    with pytest.raises(ApiException) as e:
        await core.patch_namespaced_pod("p", NS, {"spec": {"nodeName": "n"}})
    assert e.value.status == 422


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        pytest.param("app=web", ["a", "b"], id="equals"),
        pytest.param("app==web", ["a", "b"], id="double-equals"),
        pytest.param("app!=web", ["c", "d"], id="not-equals-includes-missing"),
        pytest.param("app in (web,db)", ["a", "b", "c"], id="in"),
        pytest.param("app notin (web)", ["c", "d"], id="notin"),
        pytest.param("tier", ["b"], id="exists"),
        pytest.param("!app", ["d"], id="does-not-exist"),
        pytest.param("app=web,tier=fe", ["b"], id="and"),
        pytest.param("app in (web, db),!tier", ["a", "c"], id="set-and-not-exists"),
    ],
)
async def test_label_selector(core: client.CoreV1Api, selector: str, expected: list[str]) -> None:
    await core.create_namespaced_config_map(NS, _cm("a", {"app": "web"}))
    await core.create_namespaced_config_map(NS, _cm("b", {"app": "web", "tier": "fe"}))
    await core.create_namespaced_config_map(NS, _cm("c", {"app": "db"}))
    await core.create_namespaced_config_map(NS, _cm("d"))
    out = await core.list_namespaced_config_map(NS, label_selector=selector)
    assert [i.metadata.name for i in out.items] == expected


async def test_malformed_label_selector_answers_400(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as e:
        await core.list_namespaced_config_map(NS, label_selector="a in b")
    assert e.value.status == 400


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        pytest.param("spec.schedulerName=slurm-bridge-scheduler", ["s1", "s2"], id="scheduler"),
        pytest.param("spec.nodeName=", ["d1", "s1"], id="unscheduled"),
        pytest.param("spec.nodeName=n1", ["s2"], id="on-node"),
        pytest.param("status.phase!=Succeeded", ["d1", "s1", "s2"], id="phase-not"),
        pytest.param("metadata.name=s1", ["s1"], id="name"),
        pytest.param("metadata.namespace==default", ["d1", "s1", "s2"], id="namespace"),
        pytest.param("spec.schedulerName=slurm-bridge-scheduler,spec.nodeName=", ["s1"], id="and"),
    ],
)
async def test_pod_field_selector(
    core: client.CoreV1Api, selector: str, expected: list[str]
) -> None:
    await core.create_namespaced_pod(NS, pod_body("d1"))
    await core.create_namespaced_pod(NS, pod_body("s1", schedulerName="slurm-bridge-scheduler"))
    await core.create_namespaced_pod(
        NS, pod_body("s2", schedulerName="slurm-bridge-scheduler", nodeName="n1")
    )
    out = await core.list_pod_for_all_namespaces(field_selector=selector)
    assert [i.metadata.name for i in out.items] == expected


async def test_event_field_selector_on_involved_object(core: client.CoreV1Api) -> None:
    for name, obj in (("e1", "p1"), ("e2", "p2")):
        await core.create_namespaced_event(
            NS,
            {
                "metadata": {"name": name},
                "involvedObject": {"kind": "Pod", "name": obj, "namespace": NS},
                "reason": "Test",
                "message": "m",
                "type": "Normal",
            },
        )
    out = await core.list_namespaced_event(
        NS, field_selector="involvedObject.kind=Pod,involvedObject.name=p2"
    )
    assert [e.metadata.name for e in out.items] == ["e2"]


async def test_unsupported_field_selector_answers_400(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as e:
        await core.list_namespaced_pod(NS, field_selector="spec.containers=x")
    assert e.value.status == 400


async def test_list_pagination_with_limit_and_continue(core: client.CoreV1Api) -> None:
    for i in range(5):
        await core.create_namespaced_config_map(NS, _cm(f"cm-{i}"))
    names: list[str] = []
    token = None
    pages = 0
    while True:
        page = await core.list_namespaced_config_map(NS, limit=2, _continue=token)
        pages += 1
        names += [i.metadata.name for i in page.items]
        token = page.metadata._continue
        if not token:
            break
        assert page.metadata.remaining_item_count == 5 - len(names)
    assert names == [f"cm-{i}" for i in range(5)]
    assert pages == 3


async def test_a_selected_list_pages_whole_without_remaining_item_count(
    core: client.CoreV1Api,
) -> None:
    # kube-apiserver sets remainingItemCount only for a list without selectors
    for i in range(5):
        keep = {"keep": "yes" if i % 2 == 0 else "no"}
        await core.create_namespaced_config_map(NS, _cm(f"cm-{i}", keep))
    names: list[str] = []
    token = None
    while True:
        page = await core.list_namespaced_config_map(
            NS, limit=1, label_selector="keep=yes", _continue=token
        )
        names += [i.metadata.name for i in page.items]
        assert page.metadata.remaining_item_count is None
        token = page.metadata._continue
        if not token:
            break
    assert names == ["cm-0", "cm-2", "cm-4"]


async def test_continue_token_from_before_compaction_answers_410(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    for i in range(3):
        await core.create_namespaced_config_map(NS, _cm(f"cm-{i}"))
    page = await core.list_namespaced_config_map(NS, limit=1)
    await core.create_namespaced_config_map(NS, _cm("later"))
    srv.compact()
    with pytest.raises(ApiException) as e:
        await core.list_namespaced_config_map(NS, limit=1, _continue=page.metadata._continue)
    assert e.value.status == 410
    assert json.loads(e.value.body)["reason"] == "Expired"


async def test_cluster_scoped_list_and_namespaced_list_across_namespaces(
    core: client.CoreV1Api,
) -> None:
    await core.create_namespaced_config_map(NS, _cm("a"))
    await core.create_namespaced_config_map("kube-system", _cm("b"))
    out = await core.list_config_map_for_all_namespaces()
    assert {(i.metadata.namespace, i.metadata.name) for i in out.items} == {
        (NS, "a"),
        ("kube-system", "b"),
    }
    nss = await core.list_namespace()
    assert {n.metadata.name for n in nss.items} >= {"default", "kube-system", "slurm-bridge"}


async def test_delete_collection_with_label_selector(core: client.CoreV1Api) -> None:
    await core.create_namespaced_config_map(NS, _cm("a", {"x": "1"}))
    await core.create_namespaced_config_map(NS, _cm("b", {"x": "2"}))
    await core.delete_collection_namespaced_config_map(NS, label_selector="x=1")
    out = await core.list_namespaced_config_map(NS)
    assert [i.metadata.name for i in out.items] == ["b"]


async def test_events_k8s_io_v1_events_are_served(api: client.ApiClient) -> None:
    ev = client.EventsV1Api(api)
    await ev.create_namespaced_event(
        NS,
        {
            "metadata": {"name": "e1"},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingController": "slurm-bridge",
            "reportingInstance": "x",
            "action": "Bind",
            "reason": "Scheduled",
            "type": "Normal",
            "note": "bound",
            "regarding": {"kind": "Pod", "name": "p", "namespace": NS},
        },
    )
    out = await ev.list_namespaced_event(NS, field_selector="regarding.name=p")
    assert [e.metadata.name for e in out.items] == ["e1"]


async def test_pod_put_without_defaulted_fields_keeps_them(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod(NS, pod_body("p"))
    current = await core.read_namespaced_pod("p", NS)
    body = {
        **pod_body("p"),
        "metadata": {
            "name": "p",
            "labels": {"a": "b"},
            "resourceVersion": current.metadata.resource_version,
        },
    }
    out = await core.replace_namespaced_pod("p", NS, body)
    assert out.metadata.labels == {"a": "b"}
    assert out.spec.scheduler_name == "default-scheduler"


async def test_secret_type_defaults_to_opaque_and_string_data_is_folded(
    core: client.CoreV1Api,
) -> None:
    out = await core.create_namespaced_secret(
        NS, {"metadata": {"name": "s"}, "stringData": {"k": "v"}}
    )
    assert out.type == "Opaque"
    assert out.data == {"k": "dg=="}
    assert out.string_data is None
