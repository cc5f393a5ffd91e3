"""The built-in Workload API as kube-apiserver 1.36 serves it (``scheduling.k8s.io/v1alpha2``,
feature gate GenericWorkload; its types in kubernetes/kubernetes
staging/src/k8s.io/api/scheduling/v1alpha2/types.go): a Workload's PodGroup templates,
the PodGroups made from them, what is immutable and what the server refuses."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from bridge.errors import KubeInvalid
from bridge.kube.client import KubeClient
from bridge.kube.resources import Resource
from sandbox.cluster import SandboxCluster
from sandbox.kubeapi import SANDBOX_TOKEN
from tests.clients import kube_for_host

from .helpers import NS, invalid

# the v1alpha2 API is 1.36's (1.37 removes it: test_workload_api_137.py)
pytestmark = pytest.mark.parametrize("kube_version", ["1.36"], indirect=True)

WORKLOADS = Resource("scheduling.k8s.io", "v1alpha2", "workloads", "Workload", True)
PODGROUPS = Resource("scheduling.k8s.io", "v1alpha2", "podgroups", "PodGroup", True)


@pytest.fixture
async def kube(srv: SandboxCluster) -> AsyncIterator[KubeClient]:
    async with kube_for_host(srv.url, token=SANDBOX_TOKEN, request_timeout=10) as k:
        yield k


def workload(name: str, templates: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "Workload",
        "metadata": {"name": name},
        "spec": {"podGroupTemplates": templates},
    }


def template(name: str, min_count: int | None = None) -> dict[str, Any]:
    policy: dict[str, Any] = (
        {"basic": {}} if min_count is None else {"gang": {"minCount": min_count}}
    )
    return {"name": name, "schedulingPolicy": policy}


def podgroup(name: str, wl: str, tmpl: str, min_count: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {
            "podGroupTemplateRef": {"workload": {"workloadName": wl, "podGroupTemplateName": tmpl}},
            "schedulingPolicy": {"gang": {"minCount": min_count}},
        },
    }


async def test_discovery_serves_workloads_without_status_and_podgroups_with_it(
    kube: KubeClient,
) -> None:
    listed = await kube.request("GET", "/apis/scheduling.k8s.io/v1alpha2", what="discovery")
    names = {r["name"] for r in listed["resources"]}
    assert {"workloads", "podgroups", "podgroups/status"} <= names
    assert "workloads/status" not in names  # a 1.36 Workload has no status


async def test_a_workload_of_two_templates_and_its_podgroups_are_stored_as_sent(
    kube: KubeClient,
) -> None:
    body = workload("train", [template("driver"), template("workers", 2)])
    body["status"] = {"anything": True}
    wl = await kube.create(WORKLOADS, body, NS)
    assert [t["name"] for t in wl["spec"]["podGroupTemplates"]] == ["driver", "workers"]
    assert "status" not in wl
    pg_body = podgroup("train-workers", "train", "workers", 2)
    pg_body["status"] = {"conditions": [{"type": "PodGroupScheduled", "status": "True"}]}
    pg = await kube.create(PODGROUPS, pg_body, NS)
    assert pg["spec"]["podGroupTemplateRef"]["workload"]["workloadName"] == "train"
    assert not pg.get("status")  # status only through /status
    # the server does not check that the Workload or its template exists
    await kube.create(PODGROUPS, podgroup("orphan", "no-such", "nope", 1), NS)


@pytest.mark.parametrize(
    ("templates", "field"),
    [
        pytest.param([], "spec.podGroupTemplates: Required value", id="no-templates"),
        pytest.param(
            [template(f"t{i}") for i in range(9)],
            "spec.podGroupTemplates: Too many: 9: must have at most 8 items",
            id="nine-templates",
        ),
        pytest.param(
            [template("a"), template("a", 2)],
            'spec.podGroupTemplates[1]: Duplicate value: {"name":"a"}',
            id="duplicate-names",
        ),
        pytest.param(
            [{"name": "a", "schedulingPolicy": {"basic": {}, "gang": {"minCount": 1}}}],
            "spec.podGroupTemplates[0].schedulingPolicy: Invalid value",
            id="two-policies",
        ),
        pytest.param(
            [template("a", 0)],
            "spec.podGroupTemplates[0].schedulingPolicy.gang.minCount: Invalid value: 0",
            id="min-count-zero",
        ),
        pytest.param([template("Not_A_Label")], "spec.podGroupTemplates[0].name", id="bad-name"),
    ],
)
async def test_a_bad_workload_is_refused_naming_the_field(
    kube: KubeClient, templates: list[dict[str, Any]], field: str
) -> None:
    assert field in await invalid(kube, WORKLOADS, workload("bad", templates))


async def test_a_podgroup_must_name_both_its_workload_and_template(kube: KubeClient) -> None:
    body = podgroup("pg", "wl", "t", 1)
    del body["spec"]["podGroupTemplateRef"]["workload"]["podGroupTemplateName"]
    message = await invalid(kube, PODGROUPS, body)
    assert "spec.podGroupTemplateRef.workload.podGroupTemplateName: Required value" in message
    no_policy = podgroup("pg", "wl", "t", 1)
    no_policy["spec"]["schedulingPolicy"] = {}
    assert "spec.schedulingPolicy: Invalid value" in await invalid(kube, PODGROUPS, no_policy)


async def test_templates_and_podgroup_specs_are_immutable_and_status_is_written_apart(
    kube: KubeClient,
) -> None:
    await kube.create(WORKLOADS, workload("fixed", [template("a"), template("b", 2)]), NS)
    with pytest.raises(KubeInvalid) as e:
        await kube.patch(
            WORKLOADS, "fixed", {"spec": {"podGroupTemplates": [template("a")]}}, namespace=NS
        )
    assert "spec.podGroupTemplates: Invalid value: field is immutable" in str(e.value)
    await kube.create(PODGROUPS, podgroup("fixed-b", "fixed", "b", 2), NS)
    with pytest.raises(KubeInvalid) as e:
        await kube.patch(
            PODGROUPS,
            "fixed-b",
            {"spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}},
            namespace=NS,
        )
    assert "spec.schedulingPolicy: Invalid value: field is immutable" in str(e.value)
    cond = {"type": "PodGroupScheduled", "status": "True", "reason": "Scheduled"}
    pg = await kube.patch(
        PODGROUPS, "fixed-b", {"status": {"conditions": [cond]}}, namespace=NS, subresource="status"
    )
    assert pg["status"]["conditions"][0]["reason"] == "Scheduled"
    assert pg["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}
