"""The Workload API as the sandbox serves Kubernetes 1.37 (``--kube-version 1.37``):
Workload and PodGroup at ``scheduling.k8s.io/v1beta1`` and ``v1alpha3`` (one stored
object), CompositePodGroup at ``v1alpha3`` (KEP-6012), with 1.37's validation: at most 8
templates, a template tree at most 4 deep, an immutable ``minGroupCount``; and DRA device
taints (KEP-5055): DeviceTaintRule at ``resource.k8s.io/v1``, device ``taints`` in
ResourceSlices, request ``tolerations`` in claims."""

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

pytestmark = pytest.mark.parametrize("kube_version", ["1.37"], indirect=True)

G = "scheduling.k8s.io"
WORKLOADS = Resource(G, "v1beta1", "workloads", "Workload", True)
PODGROUPS = Resource(G, "v1beta1", "podgroups", "PodGroup", True)
ALPHA_PODGROUPS = Resource(G, "v1alpha3", "podgroups", "PodGroup", True)
ALPHA_WORKLOADS = Resource(G, "v1alpha3", "workloads", "Workload", True)
COMPOSITES = Resource(G, "v1alpha3", "compositepodgroups", "CompositePodGroup", True)
TAINT_RULES = Resource("resource.k8s.io", "v1", "devicetaintrules", "DeviceTaintRule", False)
SLICES = Resource("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False)
CLAIMS = Resource("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True)


@pytest.fixture
async def kube(srv: SandboxCluster) -> AsyncIterator[KubeClient]:
    async with kube_for_host(srv.url, token=SANDBOX_TOKEN, request_timeout=10) as k:
        yield k


def pg_template(name: str, min_count: int | None = None) -> dict[str, Any]:
    policy: dict[str, Any] = (
        {"basic": {}} if min_count is None else {"gang": {"minCount": min_count}}
    )
    return {"name": name, "schedulingPolicy": policy}


def composite_template(
    name: str, children: list[dict[str, Any]], *, composites: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": name,
        "schedulingPolicy": {"gang": {"minGroupCount": len(children) or 1}},
        "podGroupTemplates": children,
    }
    if composites:
        out["compositePodGroupTemplates"] = composites
    return out


def workload(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": spec}


def podgroup(name: str, wl: str, tmpl: str, parent: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "workloadRef": {"workloadName": wl, "templateName": tmpl},
        "schedulingPolicy": {"gang": {"minCount": 1}},
    }
    if parent is not None:
        spec["parentCompositePodGroupName"] = parent
    return {"metadata": {"name": name}, "spec": spec}


def composite(name: str, wl: str, tmpl: str, min_groups: int = 2) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "workloadRef": {"workloadName": wl, "templateName": tmpl},
            "schedulingPolicy": {"gang": {"minGroupCount": min_groups}},
            "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/rack"}]},
            "priorityClassName": "high",
        },
    }


async def test_a_composite_of_two_podgroups_is_stored_and_read_in_both_versions(
    kube: KubeClient,
) -> None:
    tree = composite_template("job", [pg_template("cpu"), pg_template("gpu", 2)])
    await kube.create(WORKLOADS, workload("train", compositePodGroupTemplates=[tree]), NS)
    cpg = await kube.create(COMPOSITES, composite("train-job", "train", "job"), NS)
    assert cpg["spec"]["disruptionMode"] == {"single": {}}  # the default
    assert not cpg.get("status")
    await kube.create(PODGROUPS, podgroup("train-cpu", "train", "cpu", parent="train-job"), NS)
    await kube.create(PODGROUPS, podgroup("train-gpu", "train", "gpu", parent="train-job"), NS)
    # one stored object, served at both versions
    alpha = await kube.get(ALPHA_PODGROUPS, "train-gpu", NS)
    assert alpha["spec"]["parentCompositePodGroupName"] == "train-job"
    assert alpha["spec"]["workloadRef"] == {"workloadName": "train", "templateName": "gpu"}
    wl = await kube.get(ALPHA_WORKLOADS, "train", NS)
    assert wl["spec"]["compositePodGroupTemplates"][0]["name"] == "job"
    cond = {"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled"}
    pg = await kube.patch(
        PODGROUPS,
        "train-gpu",
        {"status": {"conditions": [cond]}},
        namespace=NS,
        subresource="status",
    )
    assert pg["status"]["conditions"][0]["type"] == "PodGroupInitiallyScheduled"


async def test_the_1_36_template_reference_is_not_a_1_37_field(kube: KubeClient) -> None:
    body = podgroup("old-shape", "wl", "t")
    del body["spec"]["workloadRef"]
    body["spec"]["podGroupTemplateRef"] = {
        "workload": {"workloadName": "wl", "podGroupTemplateName": "t"}
    }
    pg = await kube.create(PODGROUPS, body, NS)
    assert "podGroupTemplateRef" not in pg["spec"]


def _deep(levels: int) -> dict[str, Any]:
    """A template tree ``levels`` deep (composites down to one PodGroup template)."""
    node = composite_template(f"c{levels - 1}", [pg_template(f"leaf{levels}")])
    for i in range(levels - 2, 0, -1):
        node = composite_template(f"c{i}", [], composites=[node])
    return node


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        pytest.param({}, "spec: Invalid value", id="no-templates"),
        pytest.param(
            {
                "podGroupTemplates": [pg_template("a")],
                "compositePodGroupTemplates": [composite_template("b", [pg_template("c")])],
            },
            "spec: Invalid value",
            id="both-lists",
        ),
        pytest.param(
            {"podGroupTemplates": [pg_template(f"t{i}") for i in range(9)]},
            "spec.podGroupTemplates: Too many: 9: must have at most 8 items",
            id="nine-templates",
        ),
        pytest.param(
            {
                "compositePodGroupTemplates": [
                    composite_template("c", [pg_template(f"t{i}") for i in range(9)])
                ]
            },
            "spec.compositePodGroupTemplates[0].podGroupTemplates: Too many: 9",
            id="nine-children",
        ),
        pytest.param(
            {"compositePodGroupTemplates": [composite_template("a", [pg_template("a")])]},
            'Duplicate value: {"name":"a"}',
            id="a-name-twice-in-the-tree",
        ),
        pytest.param(
            {"compositePodGroupTemplates": [_deep(5)]},
            "must be at most 4 levels deep",
            id="five-levels",
        ),
        pytest.param(
            {
                "compositePodGroupTemplates": [
                    {
                        **composite_template("c", [pg_template("p")]),
                        "schedulingPolicy": {"gang": {"minGroupCount": 0}},
                    }
                ]
            },
            "schedulingPolicy.gang.minGroupCount: Invalid value: 0",
            id="min-group-count-zero",
        ),
        pytest.param(
            {
                "compositePodGroupTemplates": [
                    {
                        **composite_template("c", [{**pg_template("p"), "disruptionMode": "Pod"}]),
                        "disruptionMode": {"all": {}},
                    }
                ]
            },
            "a child of an `all` composite must be `all` too",
            id="all-composite-with-a-single-child",
        ),
    ],
)
async def test_a_bad_1_37_workload_is_refused_naming_the_field(
    kube: KubeClient, spec: dict[str, Any], field: str
) -> None:
    assert field in await invalid(kube, WORKLOADS, workload("bad", **spec))


async def test_a_four_level_tree_is_accepted(kube: KubeClient) -> None:
    await kube.create(WORKLOADS, workload("deep", compositePodGroupTemplates=[_deep(4)]), NS)


@pytest.mark.parametrize(
    ("res", "body", "field"),
    [
        pytest.param(
            COMPOSITES,
            {"metadata": {"name": "c"}, "spec": {"schedulingPolicy": {"basic": {}}}},
            "spec.workloadRef: Required value",
            id="composite-without-workload",
        ),
        pytest.param(
            COMPOSITES,
            {
                **composite("c", "w", "t"),
                "spec": {
                    **composite("c", "w", "t")["spec"],
                    "schedulingConstraints": {"topology": [{"key": "a"}, {"key": "b"}]},
                },
            },
            "spec.schedulingConstraints.topology: Too many: 2: must have at most 1 items",
            id="two-topology-keys",
        ),
        pytest.param(
            PODGROUPS,
            {
                "metadata": {"name": "p"},
                "spec": {"schedulingPolicy": {"basic": {}}, "parentCompositePodGroupName": "c"},
            },
            "spec.workloadRef: Required value",
            id="parent-without-workload",
        ),
        pytest.param(
            PODGROUPS,
            {
                **podgroup("p", "w", "t"),
                "spec": {**podgroup("p", "w", "t")["spec"], "workloadRef": {"workloadName": "w"}},
            },
            "spec.workloadRef.templateName: Required value",
            id="workload-ref-without-template",
        ),
    ],
)
async def test_a_bad_group_is_refused_naming_the_field(
    kube: KubeClient, res: Resource, body: dict[str, Any], field: str
) -> None:
    assert field in await invalid(kube, res, body)


async def test_min_group_count_and_the_whole_composite_spec_are_immutable(
    kube: KubeClient,
) -> None:
    await kube.create(COMPOSITES, composite("fixed", "w", "t", 2), NS)
    with pytest.raises(KubeInvalid) as e:
        await kube.patch(
            COMPOSITES,
            "fixed",
            {"spec": {"schedulingPolicy": {"gang": {"minGroupCount": 3}}}},
            namespace=NS,
        )
    assert "spec.schedulingPolicy: Invalid value: field is immutable" in str(e.value)


async def test_device_taints_tolerations_and_taint_rules_are_validated_and_stamped(
    kube: KubeClient,
) -> None:
    rule = {
        "metadata": {"name": "gpu-0-broken"},
        "spec": {
            "deviceSelector": {"driver": "gpu.nvidia.com", "pool": "n0", "device": "gpu-0"},
            "taint": {"key": "example.com/broken", "value": "ecc", "effect": "NoExecute"},
        },
    }
    made = await kube.create(TAINT_RULES, rule)
    assert made["spec"]["taint"]["timeAdded"]  # stamped by the server
    bad = {**rule, "metadata": {"name": "bad"}}
    bad["spec"] = {**rule["spec"], "taint": {"key": "k", "effect": "PreferNoSchedule"}}
    assert "spec.taint.effect: Unsupported value" in await invalid(kube, TAINT_RULES, bad, None)
    no_taint = {"metadata": {"name": "none"}, "spec": {}}
    assert "spec.taint: Required value" in await invalid(kube, TAINT_RULES, no_taint, None)
    taints = [{"key": "example.com/hot", "effect": "NoSchedule"}]
    slice_ = {
        "metadata": {"name": "n0-gpu"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "pool": {"name": "n0", "resourceSliceCount": 1},
            "nodeName": "n0",
            "devices": [{"name": "gpu-0", "taints": taints}],
        },
    }
    made = await kube.create(SLICES, slice_)
    assert made["spec"]["devices"][0]["taints"][0]["timeAdded"]
    slice_["metadata"]["name"] = "n1-gpu"
    slice_["spec"]["devices"][0]["taints"] = [{"key": "k", "effect": "Bad"}]
    assert "spec.devices[0].taints[0].effect" in await invalid(kube, SLICES, slice_, None)
    claim = {
        "metadata": {"name": "tolerant"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "gpu.nvidia.com",
                            "tolerations": [{"key": "example.com/hot", "effect": "NoSchedule"}],
                        },
                    }
                ]
            }
        },
    }
    made = await kube.create(CLAIMS, claim, NS)
    assert made["spec"]["devices"]["requests"][0]["exactly"]["tolerations"][0]["operator"] == (
        "Equal"
    )
    claim["metadata"]["name"] = "wrong"
    claim["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] = [{"operator": "Equal"}]
    assert "tolerations[0].operator" in await invalid(kube, CLAIMS, claim)
