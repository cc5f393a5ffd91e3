"""slurmjob.slinky.slurm.net/* annotations: every key typed, every error named."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.errors import InvalidInput
from bridge.translate.annotations import (
    SlurmJobOptions,
    annotation_errors,
    parse_slurmjob_annotations,
)
from bridge.wellknown import LEGACY_ANNOTATION_JOB_NAME, SLURMJOB_KEYS, slurmjob_annotation

OBJ = "Pod default/p"


def a(key: str) -> str:
    return slurmjob_annotation(key)


@pytest.mark.parametrize(
    ("key", "value", "field", "expected"),
    [
        pytest.param("account", "physics", "account", "physics", id="account"),
        pytest.param("constraints", "intel&ib", "constraints", "intel&ib", id="constraints"),
        pytest.param("cpu-per-task", "4", "cpu_per_task", 4, id="cpu-per-task-int"),
        pytest.param("cpu-per-task", "1500m", "cpu_per_task", 2, id="cpu-per-task-milli-up"),
        pytest.param("exclusive", "false", "exclusive", False, id="exclusive-false"),
        pytest.param("exclusive", "True", "exclusive", True, id="exclusive-true-any-case"),
        pytest.param("gres", "gpu:a100:2", "gres", "gpu:a100:2", id="gres"),
        pytest.param("group-id", "1000", "group_id", "1000", id="group-id"),
        pytest.param("job-name", "train", "job_name", "train", id="job-name"),
        pytest.param("licenses", "matlab:1", "licenses", "matlab:1", id="licenses"),
        pytest.param("max-nodes", "8", "max_nodes", 8, id="max-nodes"),
        pytest.param("mem-per-node", "4Gi", "mem_per_node_mib", 4096, id="mem-per-node-gi"),
        pytest.param("mem-per-node", "1G", "mem_per_node_mib", 954, id="mem-per-node-g-up"),
        pytest.param("min-nodes", "2", "min_nodes", 2, id="min-nodes"),
        pytest.param("partition", "gpu", "partition", "gpu", id="partition"),
        pytest.param("priority", "0", "priority", 0, id="priority-zero"),
        pytest.param("priority", "100", "priority", 100, id="priority"),
        pytest.param("qos", "high", "qos", "high", id="qos"),
        pytest.param("reservation", "maint", "reservation", "maint", id="reservation"),
        pytest.param("timelimit", "90", "timelimit_minutes", 90, id="timelimit"),
        pytest.param("user-id", "alice", "user_id", "alice", id="user-id"),
        pytest.param("wckey", "proj1", "wckey", "proj1", id="wckey"),
    ],
)
def test_each_key_parses_to_its_typed_field(
    key: str, value: str, field: str, expected: Any
) -> None:
    options = parse_slurmjob_annotations({a(key): value}, obj=OBJ)
    assert getattr(options, field) == expected
    assert options.set_fields() == {field: expected}


def test_every_upstream_key_is_covered_by_the_table() -> None:
    # A key added to wellknown without a parser would fail at import; this checks the reverse.
    # + our two topology keys and Kueue's two topology annotations
    assert len(SLURMJOB_KEYS) + 4 == len(SlurmJobOptions.model_fields)


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        pytest.param("timelimit", "0", "at least 1", id="timelimit-zero"),
        pytest.param("timelimit", "-5", "not a whole number", id="timelimit-negative"),
        pytest.param("timelimit", "1h", "not a whole number", id="timelimit-unit"),
        pytest.param("timelimit", "99999999999", "not a whole number", id="timelimit-huge"),
        pytest.param("timelimit", "4294967295", "at most", id="timelimit-over-int32"),
        pytest.param("min-nodes", "0", "at least 1", id="min-nodes-zero"),
        pytest.param("max-nodes", "two", "not a whole number", id="max-nodes-word"),
        pytest.param("priority", "-1", "not a whole number", id="priority-negative"),
        pytest.param("cpu-per-task", "0", "more than 0", id="cpu-zero"),
        pytest.param("cpu-per-task", "lots", "not a Kubernetes quantity", id="cpu-junk"),
        pytest.param("cpu-per-task", "-2", "negative", id="cpu-negative"),
        pytest.param("mem-per-node", "4GB", "not a Kubernetes quantity", id="mem-junk"),
        pytest.param("mem-per-node", "0", "more than 0", id="mem-zero"),
        pytest.param("exclusive", "yes", "true", id="exclusive-not-bool"),
        pytest.param("account", "", "empty", id="account-empty"),
        pytest.param("partition", "a b", "whitespace", id="partition-space"),
        pytest.param("job-name", "a\nb", "control", id="job-name-newline"),
    ],
)
def test_bad_values_name_the_annotation_and_reason(key: str, value: str, reason: str) -> None:
    with pytest.raises(InvalidInput) as e:
        parse_slurmjob_annotations({a(key): value}, obj=OBJ)
    assert e.value.field == a(key)
    assert e.value.obj == OBJ
    assert reason in e.value.reason


def test_unknown_key_under_the_prefix_is_a_typo_error() -> None:
    with pytest.raises(InvalidInput, match="unknown annotation key") as e:
        parse_slurmjob_annotations({a("timelimt"): "5"}, obj=OBJ)
    assert e.value.field == a("timelimt")


def test_other_annotations_are_ignored() -> None:
    options = parse_slurmjob_annotations(
        {"example.com/x": "y", "slinky.slurm.net/slurm-node": "n1"}, obj=OBJ
    )
    assert options == SlurmJobOptions()


def test_min_nodes_larger_than_max_nodes_conflicts() -> None:
    with pytest.raises(InvalidInput, match="larger than max-nodes"):
        parse_slurmjob_annotations({a("min-nodes"): "4", a("max-nodes"): "2"}, obj=OBJ)


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        pytest.param({LEGACY_ANNOTATION_JOB_NAME: "old"}, "old", id="legacy-alone"),
        pytest.param(
            {LEGACY_ANNOTATION_JOB_NAME: "same", a("job-name"): "same"}, "same", id="both-equal"
        ),
        pytest.param({a("job-name"): "new"}, "new", id="current-alone"),
    ],
)
def test_legacy_job_name_is_accepted(annotations: dict[str, str], expected: str) -> None:
    assert parse_slurmjob_annotations(annotations, obj=OBJ).job_name == expected


def test_legacy_and_current_job_name_differing_is_a_conflict() -> None:
    with pytest.raises(InvalidInput, match="conflicts") as e:
        parse_slurmjob_annotations({LEGACY_ANNOTATION_JOB_NAME: "x", a("job-name"): "y"}, obj=OBJ)
    assert e.value.field == LEGACY_ANNOTATION_JOB_NAME


def test_annotation_errors_reports_all_problems() -> None:
    errors = annotation_errors(
        {a("timelimit"): "0", a("exclusive"): "maybe", a("bogus"): "1", a("qos"): "ok"}, obj=OBJ
    )
    assert sorted(e.field for e in errors) == sorted([a("timelimit"), a("exclusive"), a("bogus")])


def test_annotation_errors_is_empty_for_good_input() -> None:
    assert annotation_errors({a("qos"): "high", a("timelimit"): "5"}, obj=OBJ) == []


def test_overlay_takes_unset_fields_from_the_lower_layer() -> None:
    pod = SlurmJobOptions(qos="high")
    group = SlurmJobOptions(qos="low", account="phys")
    assert pod.overlay(group) == SlurmJobOptions(qos="high", account="phys")


_keys = st.one_of(
    st.sampled_from([a(k) for k in SLURMJOB_KEYS] + [LEGACY_ANNOTATION_JOB_NAME]),
    st.text(max_size=20).map(a),
    st.text(max_size=30),
)


@given(st.dictionaries(_keys, st.text(max_size=30), max_size=6))
def test_arbitrary_annotations_only_ever_raise_invalid_input(annotations: dict[str, str]) -> None:
    for error in annotation_errors(annotations, obj=OBJ):
        assert error.field
        assert error.reason
    error: InvalidInput | None = None
    try:
        parse_slurmjob_annotations(annotations, obj=OBJ)
    except InvalidInput as e:
        error = e
    assert error is None or (error.field and error.reason)
