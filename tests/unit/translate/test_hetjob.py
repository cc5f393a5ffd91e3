"""A gang of several shapes becomes ONE heterogeneous job, a component per shape (or per
workload part), each member sized as it asks; a gang of one shape stays a plain job."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from bridge.errors import InvalidInput
from bridge.models import JobSpec
from bridge.translate import TranslateSettings, parse_admin_comment, translate_group
from bridge.translate.grouping import GroupRef
from bridge.translate.resources import PodResources
from bridge.translate.shapes import Shape, components
from bridge.wellknown import (
    LABEL_JOBSET_REPLICATED_JOB,
    LABEL_LWS_WORKER_INDEX,
    LABEL_POD_GROUP,
    slurmjob_annotation,
)
from tests.workloads import expand, load_example

HET = TranslateSettings(gang_sizing="hetjob")
LARGEST = TranslateSettings(gang_sizing="largest")


def pod(
    name: str,
    cpu: str = "1",
    gpus: int = 0,
    *,
    labels: dict[str, str] | None = None,
    selector: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "c",
                "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}, "limits": limits},
            }
        ]
    }
    if selector:
        spec["nodeSelector"] = selector
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "labels": {LABEL_POD_GROUP: "pg", **(labels or {})},
            "annotations": dict(annotations or {}),
        },
        "spec": spec,
    }


def podgroup(n: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ns", "uid": "pg-uid"},
        "spec": {"minMember": n},
    }


def driver_and_workers(workers: int = 4, gpus: int = 8) -> list[dict[str, Any]]:
    return [pod("a-driver", "1")] + [pod(f"w-{i}", "8", gpus) for i in range(workers)]


def het(pods: list[dict[str, Any]], settings: TranslateSettings = HET) -> JobSpec:
    spec = translate_group(pods, podgroup(len(pods)), [], settings)
    assert isinstance(spec, JobSpec)
    return spec


def pods_of(spec: JobSpec) -> tuple[str, ...]:
    parsed = parse_admin_comment(spec.admin_comment)
    assert parsed is not None
    return parsed[1]


def test_driver_and_gpu_workers_become_one_hetjob_each_member_sized_as_it_asks() -> None:
    spec = het(driver_and_workers())
    assert spec.heterogeneous
    driver, workers = spec.components
    assert (driver.tasks, driver.cpus_per_task, driver.tres_per_node, driver.tres_per_task) == (
        1,
        1,
        None,
        None,
    )
    assert (workers.min_nodes, workers.max_nodes, workers.tasks, workers.tasks_per_node) == (
        4,
        4,
        4,
        1,
    )
    assert (workers.cpus_per_task, workers.tres_per_node, workers.exclusive) == (
        8,
        "gres/gpu:8",
        True,
    )
    # GPUs asked: 32 for 32 requested (the largest-member job asked 40)
    gpus = sum(c.tasks * 8 for c in spec.components if c.tres_per_node == "gres/gpu:8")
    assert gpus == 32
    largest = het(driver_and_workers(), LARGEST)
    assert not largest.heterogeneous
    assert (largest.tasks, largest.tres_per_node) == (5, "gres/gpu:8")


def test_a_component_asking_no_gres_beside_gpu_components_shares_its_node() -> None:
    """Exclusive placement would hand the CPU driver every GPU of its node."""
    driver, workers = het(driver_and_workers()).components
    assert driver.exclusive is False
    assert workers.exclusive is True
    told = [pod("a-driver", "1", annotations={slurmjob_annotation("exclusive"): "true"})]
    told += [
        pod(f"w-{i}", "8", 8, annotations={slurmjob_annotation("exclusive"): "true"})
        for i in range(2)
    ]
    assert all(c.exclusive for c in het(told).components)


def test_each_component_back_links_the_group_and_only_its_own_pods_in_rank_order() -> None:
    spec = het(driver_and_workers(3))
    assert [pods_of(c) for c in spec.components] == [
        ("ns/a-driver",),
        ("ns/w-0", "ns/w-1", "ns/w-2"),
    ]
    groups = {parse_admin_comment(c.admin_comment)[0] for c in spec.components}  # type: ignore[index]
    assert len(groups) == 1
    assert "component 1 of 2" in spec.het_components[0].comment
    assert spec.total_tasks == 4


@pytest.mark.parametrize(
    ("pods", "want"),
    [
        pytest.param([pod(f"p{i}", "2") for i in range(3)], None, id="one-shape-plain-job"),
        pytest.param(
            [pod("p0", "1"), pod("p1", "2"), pod("p2", "1"), pod("p3", "2")],
            [("ns/p0", "ns/p2"), ("ns/p1", "ns/p3")],
            id="grouped-by-shape-in-rank-order",
        ),
        pytest.param(
            [pod("p0", "2", 1), pod("p1", "2", 2)],
            [("ns/p0",), ("ns/p1",)],
            id="gres-count-differs",
        ),
        pytest.param(
            [pod("p0", "2", selector={"zone": "a"}), pod("p1", "2", selector={"zone": "b"})],
            [("ns/p0",), ("ns/p1",)],
            id="node-selection-differs",
        ),
    ],
)
def test_members_of_one_shape_form_one_component(
    pods: list[dict[str, Any]], want: list[tuple[str, ...]] | None
) -> None:
    spec = het(pods)
    if want is None:
        assert not spec.heterogeneous
        assert spec.model_dump(exclude={"het_components"}) == het(pods, LARGEST).model_dump(
            exclude={"het_components"}
        )
        return
    assert [pods_of(c) for c in spec.components] == want


def test_one_shape_gang_is_exactly_todays_plain_job() -> None:
    pods = [pod(f"p{i}", "3", 2) for i in range(4)]
    assert het(pods) == het(pods, LARGEST)


def test_typed_gres_is_part_of_the_shape() -> None:
    a = Shape.of(pod("a"), PodResources(1, 1, {"gpu:a100": 1}))
    b = Shape.of(pod("b"), PodResources(1, 1, {"gpu:h100": 1}))
    c = Shape.of(pod("c"), PodResources(1, 1, {"gpu:a100": 1, "gpu": 0}))
    assert a != b
    assert a == c


def test_jobset_replicated_jobs_are_the_components() -> None:
    c = expand(load_example("jobset"))
    js = c.find("JobSet", "slurm-bridge", "js-1")
    assert js is not None
    spec = translate_group(c.pods, js, [], HET)
    assert isinstance(spec, JobSpec)
    comps = spec.components
    assert [len(pods_of(x)) for x in comps] == [1, 2]
    assert [x.cpus_per_task for x in comps] == [1, 2]
    # replicatedJobs win over shapes: two parts of one shape stay two components
    js2 = copy.deepcopy(js)
    for rj in js2["spec"]["replicatedJobs"]:
        rj["template"]["spec"]["template"]["spec"]["containers"][0]["resources"] = {
            "requests": {"cpu": "2", "memory": "1Gi"}
        }
    c2 = expand([js2])
    plain = translate_group(c2.pods, js2, [], HET)
    assert isinstance(plain, JobSpec)
    assert not plain.heterogeneous  # one shape: one plain job


def test_lws_leader_and_workers_are_the_components() -> None:
    ref = GroupRef(kind="LeaderWorkerSet", namespace="ns", name="l-0")
    pods = [
        pod("l-0", "1", labels={LABEL_LWS_WORKER_INDEX: "0"}),
        pod("l-0-1", "4", 2, labels={LABEL_LWS_WORKER_INDEX: "1"}),
        pod("l-0-2", "4", 2, labels={LABEL_LWS_WORKER_INDEX: "2"}),
    ]
    shapes = [
        Shape.of(
            p, PodResources(int(p["spec"]["containers"][0]["resources"]["requests"]["cpu"]), 1)
        )
        for p in pods
    ]
    assert components(ref, pods, shapes) == [[0], [1, 2]]


def test_jobset_parts_split_even_when_a_part_mixes_shapes() -> None:
    ref = GroupRef(kind="JobSet", namespace="ns", name="js")
    pods = [
        pod("d", "1", labels={LABEL_JOBSET_REPLICATED_JOB: "driver"}),
        pod("w0", "4", labels={LABEL_JOBSET_REPLICATED_JOB: "workers"}),
        pod("w1", "5", labels={LABEL_JOBSET_REPLICATED_JOB: "workers"}),
    ]
    shapes = [Shape(i, 1, (), "") for i in (1, 4, 5)]
    assert components(ref, pods, shapes) == [[0], [1, 2]]


def test_gang_node_counts_are_refused_on_a_hetjob_naming_the_annotation() -> None:
    ann = {slurmjob_annotation("max-nodes"): "2"}
    pods = [pod("a", "1", annotations=ann), pod("b", "2", annotations=ann)]
    with pytest.raises(InvalidInput) as e:
        het(pods)
    assert e.value.field == slurmjob_annotation("max-nodes")
    assert "heterogeneous" in str(e.value)


def test_topology_applies_to_each_component_it_fits() -> None:
    ann = {slurmjob_annotation("segment"): "2"}
    pods = [pod("a", "1", annotations=ann)] + [
        pod(f"w{i}", "4", 1, annotations=ann) for i in range(4)
    ]
    driver, workers = het(pods).components
    assert workers.segment_size == 2
    assert driver.segment_size == 2  # one node: inside one segment, as for a plain job
    ann3 = {slurmjob_annotation("segment"): "3"}
    pods3 = [pod("a", "1", annotations=ann3)] + [
        pod(f"w{i}", "4", 1, annotations=ann3) for i in range(4)
    ]
    driver3, workers3 = het(pods3).components
    assert (driver3.segment_size, workers3.segment_size) == (3, None)


def test_one_pod_is_never_a_hetjob() -> None:
    p = pod("solo", "1")
    del p["metadata"]["labels"][LABEL_POD_GROUP]
    spec = translate_group([p], None, [], HET)
    assert isinstance(spec, JobSpec)
    assert not spec.heterogeneous
