"""Grouping per kind, completeness as a wait state, annotation precedence, placement,
and the admin_comment back-link."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.config import parse_config
from bridge.errors import InvalidInput
from bridge.models import GroupId, JobSpec
from bridge.translate import (
    TranslateSettings,
    Waiting,
    admin_comment,
    expected_size,
    group_of,
    parse_admin_comment,
    translate_group,
)
from bridge.wellknown import slurmjob_annotation
from tests.workloads import expand, load_example

S = TranslateSettings()


def A(key: str) -> str:
    return slurmjob_annotation(key)


def cluster(example: str) -> Any:
    return expand(load_example(example))


def pg_pods(n: int = 2, **annotations: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    c = cluster("podgroup")
    pods = c.pods[:n]
    for p in pods:
        p["metadata"]["annotations"] = dict(annotations)
    return pods, c.find("PodGroup", "slurm-bridge", "pg-1")


@pytest.mark.parametrize(
    ("example", "settings", "keys"),
    [
        pytest.param("pause", S, {"Pod/slurm-bridge/pause"}, id="plain-pod"),
        pytest.param("podgroup", S, {"PodGroup/slurm-bridge/pg-1"}, id="podgroup"),
        pytest.param("lws", S, {"LeaderWorkerSet/slurm-bridge/lws-1-0"}, id="lws-group"),
        pytest.param("indexed-job", S, {"Job/slurm-bridge/indexed-1"}, id="indexed-job-gang"),
        pytest.param(
            "indexed-job",
            TranslateSettings(gang_batch_jobs=False),
            {f"Pod/slurm-bridge/indexed-1-{i}-x{i}" for i in range(4)},
            id="indexed-job-per-pod-like-upstream",
        ),
        pytest.param("jobset", S, {"JobSet/slurm-bridge/js-1"}, id="jobset-one-gang"),
        pytest.param(
            "jobset",
            TranslateSettings(jobset_grouping="replicatedJob"),
            {"JobSet/slurm-bridge/js-1-driver", "JobSet/slurm-bridge/js-1-workers"},
            id="jobset-per-replicated-job",
        ),
    ],
)
def test_group_of_each_kind(example: str, settings: TranslateSettings, keys: set[str]) -> None:
    c = cluster(example)
    assert {group_of(p, c.objects, settings).key for p in c.pods} == keys


def test_group_uid_comes_from_the_owner_chain() -> None:
    c = cluster("jobset")
    js = c.find("JobSet", "slurm-bridge", "js-1")
    assert {group_of(p, c.objects, S).uid for p in c.pods} == {js["metadata"]["uid"]}
    lws = cluster("lws")
    worker = lws.pods[-1]
    assert (
        group_of(worker, lws.objects, S).uid
        == lws.find("LeaderWorkerSet", "slurm-bridge", "lws-1")["metadata"]["uid"]
    )


def test_builtin_workload_pod_group_via_scheduling_group() -> None:
    p = {
        "metadata": {"name": "a", "namespace": "ns"},
        "spec": {"schedulingGroup": {"podGroupName": "wpg"}},
    }
    ref = group_of(p, {}, S)
    assert (ref.kind, ref.name) == ("WorkloadPodGroup", "wpg")
    wpg = {
        "kind": "PodGroup",
        "metadata": {"name": "wpg", "namespace": "ns", "uid": "u"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}},
    }
    assert expected_size(ref, wpg, [p]) == 3


def test_non_parallel_job_is_one_job_per_pod_but_keeps_the_jobs_deadline() -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "slurm-bridge"},
        "spec": {"activeDeadlineSeconds": 61, "template": {"spec": {"containers": []}}},
    }
    c = expand([job])
    spec = translate_group(c.pods, c.objects and next(iter(c.objects.values())), [], S)
    assert isinstance(spec, JobSpec)
    assert spec.time_limit_minutes == 2
    assert '"kind":"Pod"' in spec.admin_comment


def test_incomplete_group_is_a_wait_state_not_an_error() -> None:
    pods, pg = pg_pods(1)
    got = translate_group(pods, pg, [], S)
    assert isinstance(got, Waiting)
    assert (got.have, got.want) == (1, 2)
    assert "1 of 2" in got.reason


def test_missing_group_object_waits() -> None:
    pods, _ = pg_pods(2)
    got = translate_group(pods, None, [], S)
    assert isinstance(got, Waiting)
    assert got.want is None


def test_pod_order_is_deterministic_per_kind() -> None:
    for example, first in [
        ("lws", "slurm-bridge/lws-1-0"),
        ("indexed-job", "slurm-bridge/indexed-1-0-x0"),
        ("jobset", "slurm-bridge/js-1-driver-0-x0"),
    ]:
        c = cluster(example)
        ref = group_of(c.pods[0], c.objects, S)
        obj = c.find(ref.source.kind, "slurm-bridge", ref.source.name) if ref.source else None
        forward = translate_group(c.pods, obj, [], S, owners=c.objects)
        backward = translate_group(list(reversed(c.pods)), obj, [], S, owners=c.objects)
        assert isinstance(forward, JobSpec)
        assert forward == backward
        parsed = parse_admin_comment(forward.admin_comment)
        assert parsed is not None
        assert parsed[1][0] == first


class _NoCopyOwners(Mapping[str, Any]):
    """An owner mapping that fails when copied or iterated (the scheduler's owner cache
    holds thousands of objects: translation only looks owners up)."""

    def __init__(self, objects: Mapping[str, Any]) -> None:
        self._objects = objects

    def __getitem__(self, uid: str) -> Any:
        return self._objects[uid]

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("the owners were copied or iterated")

    def __len__(self) -> int:
        raise AssertionError("the owners were copied or sized")


def test_owners_are_looked_up_not_copied_per_group() -> None:
    for example in ("lws", "indexed-job", "jobset"):
        c = cluster(example)
        ref = group_of(c.pods[0], c.objects, S)
        obj = c.find(ref.source.kind, "slurm-bridge", ref.source.name) if ref.source else None
        copied = translate_group(c.pods, obj, [], S, owners=dict(c.objects))
        looked_up = translate_group(c.pods, obj, [], S, owners=_NoCopyOwners(c.objects))
        assert looked_up == copied


@pytest.mark.parametrize(
    ("pod_ann", "group_ann", "settings", "expected"),
    [
        pytest.param({}, {}, S, {"partition": "slurm-bridge", "qos": None}, id="config-default"),
        pytest.param({}, {A("partition"): "g"}, S, {"partition": "g"}, id="group-over-config"),
        pytest.param(
            {A("partition"): "p"}, {A("partition"): "g"}, S, {"partition": "p"}, id="pod-over-group"
        ),
        pytest.param({A("job-name"): "train"}, {}, S, {"name": "train"}, id="job-name"),
        pytest.param(
            {"slinky.slurm.net/job-name": "old"}, {}, S, {"name": "old"}, id="legacy-job-name"
        ),
        pytest.param({A("timelimit"): "7"}, {}, S, {"time_limit_minutes": 7}, id="timelimit"),
        pytest.param(
            {A("cpu-per-task"): "8", A("mem-per-node"): "2Gi"},
            {},
            S,
            {"cpus_per_task": 8, "memory_per_node_mib": 2048},
            id="resource-overrides",
        ),
        pytest.param(
            {A("gres"): "gpu:a100:1"},
            {},
            S,
            {"tres_per_node": "gres/gpu:a100:1"},
            id="gres-annotation",
        ),
        pytest.param(
            {
                A("account"): "a",
                A("qos"): "q",
                A("reservation"): "r",
                A("licenses"): "l:1",
                A("constraints"): "c",
                A("wckey"): "w",
                A("user-id"): "u",
                A("group-id"): "g",
                A("priority"): "5",
            },
            {},
            S,
            {
                "account": "a",
                "qos": "q",
                "reservation": "r",
                "licenses": "l:1",
                "constraints": "c",
                "wckey": "w",
                "user_id": "u",
                "group_id": "g",
                "priority": 5,
            },
            id="pass-through-keys",
        ),
        pytest.param(
            {},
            {},
            TranslateSettings(mcs_label=None, partition="x"),
            {"mcs_label": None, "partition": "x"},
            id="settings",
        ),
        pytest.param(
            {A("min-nodes"): "1", A("max-nodes"): "2"},
            {},
            S,
            {"min_nodes": 1, "max_nodes": 2, "tasks": 1},
            id="min-max-nodes",
        ),
    ],
)
def test_annotation_precedence_and_fields(
    pod_ann: dict[str, str],
    group_ann: dict[str, str],
    settings: TranslateSettings,
    expected: dict[str, Any],
) -> None:
    pods, pg = pg_pods(2, **pod_ann)
    pg = copy.deepcopy(pg)
    pg["metadata"]["annotations"] = group_ann
    spec = translate_group(pods, pg, [], settings)
    assert isinstance(spec, JobSpec)
    assert {k: getattr(spec, k) for k in expected} == expected


def test_exclusive_by_default_one_pod_per_node() -> None:
    pods, pg = pg_pods(2)
    spec = translate_group(pods, pg, [], S)
    assert isinstance(spec, JobSpec)
    assert (spec.exclusive, spec.min_nodes, spec.max_nodes, spec.tasks, spec.tasks_per_node) == (
        True,
        2,
        2,
        2,
        1,
    )
    assert (spec.cpus_per_task, spec.memory_per_node_mib) == (3, 500)


def test_shared_placement_packs_pods_with_memory_per_cpu() -> None:
    pods, pg = pg_pods(2, **{A("exclusive"): "false"})
    spec = translate_group(pods, pg, [], S)
    assert isinstance(spec, JobSpec)
    assert (spec.exclusive, spec.tasks, spec.tasks_per_node, spec.min_nodes) == (False, 2, None, 1)
    assert (spec.cpus_per_task, spec.memory_per_cpu_mib, spec.memory_per_node_mib) == (3, 167, None)


def test_gpus_per_node_when_exclusive_and_per_task_when_shared() -> None:
    for exclusive, field in (("true", "tres_per_node"), ("false", "tres_per_task")):
        pods, pg = pg_pods(2, **{A("exclusive"): exclusive})
        for p in pods:
            p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "2"
        spec = translate_group(pods, pg, [], S)
        assert isinstance(spec, JobSpec)
        assert getattr(spec, field) == "gres/gpu:2"


def test_priority_from_priority_class_when_enabled() -> None:
    pods, pg = pg_pods(2)
    for p in pods:
        p["spec"]["priority"] = 1000
    on = translate_group(pods, pg, [], TranslateSettings(priority_from_priority_class=True))
    off = translate_group(pods, pg, [], S)
    assert isinstance(on, JobSpec)
    assert isinstance(off, JobSpec)
    assert (on.priority, off.priority) == (1000, None)


@pytest.mark.parametrize(
    ("pod_ann", "field", "reason"),
    [
        pytest.param({A("max-nodes"): "1"}, A("max-nodes"), "needs 2 nodes", id="gang-over-max"),
        pytest.param(
            {A("min-nodes"): "3"}, A("min-nodes"), "larger than the 2 pods", id="min-over-pods"
        ),
        pytest.param({A("timelimit"): "0"}, A("timelimit"), "at least 1", id="zero-timelimit"),
    ],
)
def test_invalid_groups_name_the_field(pod_ann: dict[str, str], field: str, reason: str) -> None:
    pods, pg = pg_pods(2, **pod_ann)
    with pytest.raises(InvalidInput) as e:
        translate_group(pods, pg, [], S)
    assert e.value.field == field
    assert reason in e.value.reason


def test_annotations_differing_between_pods_are_an_error() -> None:
    pods, pg = pg_pods(2)
    pods[1]["metadata"]["annotations"] = {A("qos"): "high"}
    with pytest.raises(InvalidInput, match="differs between pods") as e:
        translate_group(pods, pg, [], S)
    assert e.value.field == A("qos")
    assert e.value.obj == "Pod slurm-bridge/pg-1-b"


def test_negative_job_deadline_is_an_error() -> None:
    c = cluster("indexed-job")
    job = c.find("Job", "slurm-bridge", "indexed-1")
    job["spec"]["activeDeadlineSeconds"] = 0
    with pytest.raises(InvalidInput) as e:
        translate_group(c.pods, job, [], S)
    assert e.value.field == "spec.activeDeadlineSeconds"


def test_pods_of_different_groups_are_refused() -> None:
    pods, pg = pg_pods(2)
    pods[1]["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] = "other"
    with pytest.raises(InvalidInput, match="not to PodGroup"):
        translate_group(pods, pg, [], S)


def test_settings_from_config() -> None:
    cfg = parse_config(
        {
            "partition": "p",
            "scheduler": {"gresMapping": {"x/y": "y"}, "jobsetGrouping": "replicatedJob"},
        }
    )
    s = TranslateSettings.from_config(cfg)
    assert (s.partition, s.gres_mapping["x/y"], s.jobset_grouping) == ("p", "y", "replicatedJob")
    assert s.gres_mapping["nvidia.com/mig-1g.10gb"] == "gpu:1g.10gb"  # the defaults stay


GID = GroupId(kind="PodGroup", namespace="ns", name="pg-1", uid="u-1")


def test_admin_comment_round_trips_and_keeps_upstreams_pods_key() -> None:
    text = admin_comment(GID, ["ns/a", "ns/b"])
    assert " " not in text
    assert parse_admin_comment(text) == (GID, ("ns/a", "ns/b"))
    assert parse_admin_comment('{"pods":["ns/a"]}') == (None, ("ns/a",))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "null",
        "[]",
        "{",
        '{"pods": "x"}',
        '{"pods": [1]}',
        '{"group": {}, "pods": []}',
        "not json",
        '{"x": 1}',
        None,
        42,
    ],
    ids=[
        "empty",
        "null",
        "list",
        "truncated",
        "pods-not-list",
        "pods-not-strings",
        "bad-group",
        "text",
        "no-pods",
        "none",
        "int",
    ],
)
def test_parse_admin_comment_is_none_for_junk(text: Any) -> None:
    assert parse_admin_comment(text) is None


@given(st.text(max_size=200))
def test_parse_admin_comment_never_raises(text: str) -> None:
    parse_admin_comment(text)
