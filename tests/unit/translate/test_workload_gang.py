"""A built-in Workload of several podGroupTemplates is ONE gang: its PodGroups are the
components of one heterogeneous job (docs/hetjob.md#the-built-in-workload-api). Pure
grouping and translation, on the objects Kubernetes 1.36 serves
(``scheduling.k8s.io/v1alpha2``)."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.errors import InvalidInput
from bridge.models import JobSpec
from bridge.translate import (
    TranslateSettings,
    Waiting,
    expected_size,
    group_of,
    order_pods,
    parse_admin_comment,
    translate_group,
)
from bridge.workloads import related_objects
from bridge.workloads.builtin import gang_workload, workload_ref
from tests.workloads import member_pod as pod

HET = TranslateSettings(gang_sizing="hetjob")


def workload(*templates: str, name: str = "wl", ns: str = "ns") -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}"},
        "spec": {
            "podGroupTemplates": [
                {"name": t, "schedulingPolicy": {"gang": {"minCount": 1}}} for t in templates
            ]
        },
    }


def podgroup(
    name: str, template: str, min_count: int, *, wl: str = "wl", ns: str = "ns"
) -> dict[str, Any]:
    """A 1.36 PodGroup made from ``wl``'s ``template``."""
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}"},
        "spec": {
            "podGroupTemplateRef": {
                "workload": {"workloadName": wl, "podGroupTemplateName": template}
            },
            "schedulingPolicy": {"gang": {"minCount": min_count}},
        },
    }


WL = workload("driver", "workers")
PGS = [podgroup("wl-driver", "driver", 1), podgroup("wl-workers", "workers", 2)]
HELD = related_objects([*PGS, WL])  # what the scheduler's watch caches would hold


def gang() -> list[dict[str, Any]]:
    return [
        pod("d-0", "wl-driver"),
        pod("w-0", "wl-workers", "8", 8),
        pod("w-1", "wl-workers", "8", 8),
    ]


def test_a_workload_of_several_templates_makes_one_gang_of_its_podgroups() -> None:
    assert [gang_workload(pg, WL) for pg in PGS] == ["wl", "wl"]
    assert workload_ref(PGS[1]) == ("wl", "workers")


def test_a_workload_of_one_template_keeps_each_podgroup_a_gang_of_its_own() -> None:
    """The PodGroups of one template are replicas, placed independently."""
    one = workload("replica")
    assert gang_workload(podgroup("r-0", "replica", 2), one) == ""


@pytest.mark.parametrize(
    ("pg", "wl"),
    [
        pytest.param(podgroup("x", "nope", 1), WL, id="template-not-in-the-workload"),
        pytest.param(podgroup("x", "driver", 1, wl="other"), WL, id="another-workload"),
        pytest.param(podgroup("x", "driver", 1, ns="elsewhere"), WL, id="another-namespace"),
        pytest.param(podgroup("x", "driver", 1), None, id="workload-not-read"),
        pytest.param(None, WL, id="podgroup-not-read"),
    ],
)
def test_a_podgroup_joins_a_workload_gang_only_when_both_objects_agree(
    pg: dict[str, Any] | None, wl: dict[str, Any] | None
) -> None:
    assert gang_workload(pg, wl) == ""


def test_the_later_api_versions_workload_ref_is_read_too() -> None:
    """No version pinned: a later version's ``spec.workloadRef`` names the Workload too."""
    later = {
        "metadata": {"name": "x", "namespace": "ns"},
        "spec": {"workloadRef": {"workloadName": "wl", "templateName": "workers"}},
    }
    assert workload_ref(later) == ("wl", "workers")
    assert gang_workload(later, WL) == "wl"


def test_a_pod_of_a_workload_gangs_podgroup_belongs_to_the_workload() -> None:
    p = pod("w-0", "wl-workers")
    ref = group_of(p, {}, HET, HELD)
    assert (ref.kind, ref.name) == ("Workload", "wl")
    assert ref.source is not None
    assert ref.source.kind == "Workload"
    alone = group_of(p, {}, HET)
    assert (alone.kind, alone.name) == ("WorkloadPodGroup", "wl-workers")


def test_the_workload_gang_waits_for_every_podgroups_min_count() -> None:
    ref = group_of(gang()[0], {}, HET, HELD)
    assert expected_size(ref, WL, [], related_objects(PGS)) == 3
    assert (
        expected_size(ref, None, [], related_objects(PGS)) is None
    )  # the Workload not read: unknown


def test_a_template_no_podgroup_was_made_from_yet_still_counts_a_pod() -> None:
    """All-or-nothing: a gang whose workers' PodGroup is not there yet never starts with
    its driver alone."""
    ref = group_of(gang()[0], {}, HET, HELD)
    assert expected_size(ref, WL, [], related_objects(PGS[:1])) == 2
    result = translate_group([gang()[0]], WL, [], HET, related=related_objects(PGS[:1]))
    assert isinstance(result, Waiting)
    assert (result.have, result.want) == (1, 2)


def test_pods_are_ordered_by_the_workloads_template_order_then_podgroup_then_name() -> None:
    wl = workload("prefill", "decode")
    pgs = [podgroup("b-prefill", "prefill", 1), podgroup("a-decode", "decode", 1)]
    pods = [pod("z", "b-prefill"), pod("a", "a-decode")]
    ref = group_of(pods[0], {}, HET, related_objects([*pgs, wl]))
    assert [p["metadata"]["name"] for p in order_pods(ref, wl, pods, related_objects(pgs))] == [
        "z",
        "a",
    ]


def test_a_cpu_podgroup_and_a_gpu_podgroup_are_one_hetjob_a_component_each() -> None:
    spec = translate_group(list(reversed(gang())), WL, [], HET, related=related_objects(PGS))
    assert isinstance(spec, JobSpec)
    assert spec.heterogeneous
    driver, workers = spec.components
    assert (driver.tasks, driver.tres_per_node) == (1, None)
    assert (workers.min_nodes, workers.tres_per_node) == (2, "gres/gpu:8")
    links = [parse_admin_comment(c.admin_comment) for c in spec.components]
    assert [link[1] if link else () for link in links] == [("ns/d-0",), ("ns/w-0", "ns/w-1")]
    group = links[0][0] if links[0] else None
    assert group is not None
    assert (group.kind, group.name, group.uid) == ("Workload", "wl", "uid-wl")


def test_each_podgroup_is_its_own_component_even_when_two_share_a_shape() -> None:
    """The Workload's PodGroups take precedence over shapes, as a JobSet's replicatedJobs."""
    wl = workload("driver", "a", "b")
    pgs = [podgroup("d", "driver", 1), podgroup("a", "a", 1), podgroup("b", "b", 1)]
    pods = [pod("d-0", "d"), pod("a-0", "a", "8", 8), pod("b-0", "b", "8", 8)]
    spec = translate_group(pods, wl, [], HET, related=related_objects(pgs))
    assert isinstance(spec, JobSpec)
    assert len(spec.components) == 3


def test_podgroups_of_one_shape_stay_one_plain_job() -> None:
    pods = [pod("d-0", "wl-driver"), pod("w-0", "wl-workers"), pod("w-1", "wl-workers")]
    spec = translate_group(pods, WL, [], HET, related=related_objects(PGS))
    assert isinstance(spec, JobSpec)
    assert not spec.heterogeneous
    assert spec.tasks == 3


def test_a_pod_of_another_podgroup_in_the_gang_is_refused_naming_it() -> None:
    stray = pod("s-0", "someone-elses")
    with pytest.raises(InvalidInput) as e:
        translate_group([*gang(), stray], WL, [], HET, related=related_objects(PGS))
    assert "WorkloadPodGroup/ns/someone-elses" in str(e.value)
