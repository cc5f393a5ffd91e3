"""The workload kinds' registry: one kind per module, the first claim wins, and nothing
outside bridge/workloads/ compares a group's kind with a kind's name."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from bridge.translate import TranslateSettings, back_link, group_of
from bridge.workloads import (
    POD,
    REGISTRY,
    WorkloadKind,
    kind_named,
    kind_names,
    kind_of_object,
    related_objects,
)

REPO = Path(__file__).resolve().parents[3]
PRODUCT = ("bridge", "scheduler", "controller", "admission")


def _kind_names_in(node: ast.expr) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} & kind_names()
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return set().union(*(_kind_names_in(e) for e in node.elts))
    return set()


def _names_kind(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "kind") or (
        isinstance(node, ast.Name) and node.id == "kind"
    )


def _kind_comparisons(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        if any(_names_kind(o) for o in operands) and any(_kind_names_in(o) for o in operands):
            found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    return found


def test_no_workload_kind_is_compared_by_name_outside_the_kind_modules() -> None:
    found = [
        where
        for package in PRODUCT
        for path in sorted((REPO / package).rglob("*.py"))
        if "workloads" not in path.relative_to(REPO).parts
        for where in _kind_comparisons(path)
    ]
    assert found == [], "ask the kind (bridge.workloads.kind_named) instead"


def test_every_kind_answers_the_protocol_and_names_are_unique() -> None:
    assert len(kind_names()) == len(REGISTRY)
    for kind in REGISTRY:
        assert isinstance(kind, WorkloadKind), kind.name
        assert kind_named(kind.name) is kind


def test_the_plain_pod_is_asked_last_and_claims_any_pod() -> None:
    assert REGISTRY[-1] is POD
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u1"}}
    ref = group_of(pod, {})
    assert (ref.kind, ref.name, ref.uid, ref.source) == (POD.name, "p", "u1", None)


def test_the_first_kind_that_claims_a_pod_wins() -> None:
    # a pod labelled for a coscheduling PodGroup AND naming a built-in PodGroup
    pod = {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "labels": {"scheduling.x-k8s.io/pod-group": "pg"},
        },
        "spec": {"schedulingGroup": {"podGroupName": "wpg"}},
    }
    assert group_of(pod, {}).kind == REGISTRY[0].name
    del pod["metadata"]["labels"]
    assert group_of(pod, {}).name == "wpg"
    wl = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": "wl", "namespace": "ns"},
        "spec": {"podGroupTemplates": [{"name": "a"}, {"name": "b"}]},
    }
    wpg = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "wpg", "namespace": "ns"},
        "spec": {"workloadRef": {"workloadName": "wl", "templateName": "a"}},
    }
    held = related_objects([wl, wpg])
    assert group_of(pod, {}, TranslateSettings(), held).name == "wl"


@pytest.mark.parametrize(
    ("api_version", "kind", "found"),
    [
        ("scheduling.x-k8s.io/v1alpha1", "PodGroup", "PodGroup"),
        ("scheduling.k8s.io/v1alpha2", "PodGroup", "WorkloadPodGroup"),
        ("scheduling.k8s.io/v1beta1", "Workload", "Workload"),
        ("batch/v1", "Job", "Job"),
        ("apps/v1", "ReplicaSet", None),
    ],
)
def test_an_object_is_the_kind_of_its_api_group_and_kind(
    api_version: str, kind: str, found: str | None
) -> None:
    got = kind_of_object(api_version, kind)
    assert (got.name if got is not None else None) == found


def test_a_back_link_naming_no_known_kind_is_not_a_back_link() -> None:
    group = {"kind": "Deployment", "namespace": "ns", "name": "d", "uid": "u"}
    assert back_link(json.dumps({"group": group, "pods": ["ns/p"]})) is None
    group["kind"] = "JobSet"
    link = back_link(json.dumps({"group": group, "pods": ["ns/p"]}))
    assert link is not None
    assert link.group is not None
    assert link.group.kind == "JobSet"
