"""A gang CompositePodGroup (Kubernetes 1.37, scheduling.k8s.io/v1alpha3, KEP-6012) is ONE
gang: the built-in PodGroups naming it as their parent are the components of one
heterogeneous job; ``minGroupCount`` of them must have their pods; its topology
constraint's key is the Slurm topology request. Pure grouping and translation."""

from __future__ import annotations

from typing import Any

from bridge.config import NamespacePolicy
from bridge.models import JobSpec
from bridge.translate import (
    TranslateSettings,
    Waiting,
    group_of,
    parse_admin_comment,
    translate_group,
)
from bridge.translate.policy import ResolvedPolicy
from bridge.translate.topology import TopologyPolicy
from bridge.workloads import kind_named, related_objects
from bridge.workloads.builtin import gang_composite, scheduled_condition
from tests.workloads import member_pod as pod

BLOCK = "cloud.example.com/block"
HET = TranslateSettings(gang_sizing="hetjob", topology=TopologyPolicy(levels={BLOCK: "block"}))


def composite(name: str = "cpg", min_groups: int | None = 2, **spec: Any) -> dict[str, Any]:
    policy = {"gang": {"minGroupCount": min_groups}} if min_groups else {"basic": {}}
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha3",
        "kind": "CompositePodGroup",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {
            "workloadRef": {"workloadName": "wl", "templateName": name},
            "schedulingPolicy": policy,
            **spec,
        },
    }


def podgroup(name: str, min_count: int, parent: str = "cpg") -> dict[str, Any]:
    """A 1.37 PodGroup (v1beta1) whose parent is the composite ``parent``."""
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {
            "workloadRef": {"workloadName": "wl", "templateName": name},
            "parentCompositePodGroupName": parent,
            "schedulingPolicy": {"gang": {"minCount": min_count}},
        },
    }


CPG = composite()
PGS = [podgroup("cpu", 1), podgroup("gpu", 2)]
GANG = [pod("d0", "cpu"), pod("w0", "gpu", "2", 1), pod("w1", "gpu", "2", 1)]


def test_a_podgroup_whose_parent_is_a_gang_composite_is_the_composites_pod() -> None:
    assert gang_composite(PGS[0], CPG) == "cpg"
    assert gang_composite(PGS[0], composite(min_groups=None)) == ""  # basic: no gang
    assert gang_composite(podgroup("x", 1, parent="other"), CPG) == ""
    ref = group_of(GANG[0], {}, HET, related_objects([*PGS, CPG]))
    assert (ref.kind, ref.name) == ("CompositePodGroup", "cpg")
    assert ref.source is not None
    assert ref.source.api_version == "scheduling.k8s.io/v1alpha3"
    assert group_of(GANG[0], {}, HET).kind == "WorkloadPodGroup"  # its parent not read


def test_a_composite_of_a_cpu_and_a_gpu_podgroup_is_one_hetjob_a_component_each() -> None:
    spec = translate_group(list(reversed(GANG)), CPG, [], HET, related=related_objects(PGS))
    assert isinstance(spec, JobSpec)
    assert [c.tasks for c in spec.components] == [1, 2]
    assert [c.tres_per_node for c in spec.components] == [None, "gres/gpu:1"]
    assert spec.name == "cpg"
    link = parse_admin_comment(spec.admin_comment)
    assert link is not None
    assert link[0] is not None
    assert link[0].kind == "CompositePodGroup"


def test_the_composite_waits_for_min_group_count_podgroups_with_their_pods() -> None:
    pgs = [*PGS, podgroup("extra", 3)]
    waiting = translate_group(GANG[1:], CPG, [], HET, related=related_objects(pgs))
    assert isinstance(waiting, Waiting)  # only the gpu PodGroup has its pods: 1 of 2
    spec = translate_group(GANG, CPG, [], HET, related=related_objects(pgs))  # cpu and gpu: 2 of 2
    assert isinstance(spec, JobSpec)
    assert spec.total_tasks == 3
    every = translate_group(GANG, composite(min_groups=3), [], HET, related=related_objects(pgs))
    assert isinstance(every, Waiting)


def test_the_composites_topology_key_is_the_slurm_topology_request() -> None:
    constrained = composite(schedulingConstraints={"topology": [{"key": BLOCK}]})
    spec = translate_group(GANG, constrained, [], HET, related=related_objects(PGS))
    assert isinstance(spec, JobSpec)
    assert [c.segment_size for c in spec.components] == [1, 2]


def test_a_bound_composite_says_so_on_itself_and_its_podgroups_named_as_served() -> None:
    ref = group_of(GANG[0], {}, HET, related_objects([*PGS, CPG]))
    said = kind_named("CompositePodGroup").scheduled(ref, GANG)
    assert [(o.kind, o.name) for o in said] == [
        ("CompositePodGroup", "cpg"),
        ("PodGroup", "cpu"),
        ("PodGroup", "gpu"),
    ]
    assert scheduled_condition("v1beta1") == "PodGroupInitiallyScheduled"
    assert scheduled_condition("v1alpha3") == "PodGroupInitiallyScheduled"
    assert scheduled_condition("v1alpha2") == "PodGroupScheduled"  # 1.36


def test_a_podgroups_priority_class_is_the_jobs_priority_only_where_the_policy_allows() -> None:
    classed = composite(priorityClassName="high", priority=5000)
    by_class = HET.model_copy(update={"priority_from_priority_class": True})
    held = related_objects(PGS)
    allowed = ResolvedPolicy("p", NamespacePolicy(allow_pod_priority=True))
    closed = ResolvedPolicy("p", NamespacePolicy())
    spec = translate_group(
        GANG, classed, [], by_class, related=related_objects(PGS), policy=allowed
    )
    assert isinstance(spec, JobSpec)
    assert spec.priority == 5000
    spec = translate_group(GANG, classed, [], by_class, related=held, policy=closed)
    assert isinstance(spec, JobSpec)
    assert spec.priority is None  # Slurm's own priority
    unclassed = composite(priority=5000)  # a priority no class gave: not the group's
    spec = translate_group(
        GANG, unclassed, [], by_class, related=related_objects(PGS), policy=allowed
    )
    assert isinstance(spec, JobSpec)
    assert spec.priority is None
