"""A workload's topology request (our segment/switches keys, Kueue's TAS levels) becomes
Slurm's segment_size / required_switches / wait_for_switch; bad requests name the field."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.errors import InvalidInput
from bridge.models import JobSpec
from bridge.translate import TranslateSettings, translate_group
from bridge.translate.annotations import annotation_errors
from bridge.translate.topology import (
    Switches,
    TopologyPolicy,
    parse_switches,
    slurm_duration,
)
from bridge.wellknown import (
    ANNOTATION_KUEUE_PREFERRED_TOPOLOGY as PREFERRED,
)
from bridge.wellknown import (
    ANNOTATION_KUEUE_REQUIRED_TOPOLOGY as REQUIRED,
)
from bridge.wellknown import slurmjob_annotation
from tests.workloads import expand, load_example

BLOCK = "cloud.example.com/block"
RACK = "cloud.example.com/rack"
S = TranslateSettings(
    topology=TopologyPolicy(
        levels={BLOCK: "block", RACK: "switch"},
        required_switch_wait_seconds=3600,
        preferred_switch_wait_seconds=30,
    )
)
SEGMENT = slurmjob_annotation("segment")
SWITCHES = slurmjob_annotation("switches")
FIELDS = ("segment_size", "required_switches", "wait_for_switch_seconds")


def gang(pods: int, pod_ann: dict[str, str], group_ann: dict[str, str]) -> Any:
    c = expand(load_example("podgroup"))
    pg = copy.deepcopy(c.find("PodGroup", "slurm-bridge", "pg-1"))
    pg["spec"]["minMember"] = pods
    pg["metadata"]["annotations"] = group_ann
    chosen = [copy.deepcopy(c.pods[i % len(c.pods)]) for i in range(pods)]
    for i, p in enumerate(chosen):
        p["metadata"]["name"] = f"pg-1-{i}"
        p["metadata"]["uid"] = f"uid-{i}"
        p["metadata"]["annotations"] = dict(pod_ann)
    return translate_group(chosen, pg, [], S)


@pytest.mark.parametrize(
    ("pods", "pod_ann", "group_ann", "expected"),
    [
        pytest.param(2, {}, {}, (None, None, None), id="no-request"),
        pytest.param(4, {SEGMENT: "2"}, {}, (2, None, None), id="segment"),
        pytest.param(2, {SWITCHES: "1"}, {}, (None, 1, None), id="switches-slurm-default-wait"),
        pytest.param(2, {SWITCHES: "1@10"}, {}, (None, 1, 600), id="switches-wait-minutes"),
        pytest.param(
            2, {}, {SWITCHES: "2@1-0"}, (None, 2, 86400), id="switches-on-group-days-hours"
        ),
        pytest.param(2, {SWITCHES: "1@5"}, {SWITCHES: "2@1"}, (None, 1, 300), id="pod-over-group"),
        pytest.param(3, {REQUIRED: BLOCK}, {}, (3, None, None), id="kueue-required-block"),
        pytest.param(3, {PREFERRED: BLOCK}, {}, (None, None, None), id="kueue-preferred-block"),
        pytest.param(2, {REQUIRED: RACK}, {}, (None, 1, 3600), id="kueue-required-switch"),
        pytest.param(2, {}, {PREFERRED: RACK}, (None, 1, 30), id="kueue-preferred-on-group"),
        pytest.param(
            2, {REQUIRED: RACK, SEGMENT: "2"}, {}, (2, None, None), id="explicit-over-kueue"
        ),
    ],
)
def test_topology_request_becomes_slurms(
    pods: int, pod_ann: dict[str, str], group_ann: dict[str, str], expected: tuple[Any, ...]
) -> None:
    spec = gang(pods, pod_ann, group_ann)
    assert isinstance(spec, JobSpec)
    assert tuple(getattr(spec, f) for f in FIELDS) == expected


@pytest.mark.parametrize(
    ("pods", "ann", "field", "reason"),
    [
        pytest.param(3, {SEGMENT: "2"}, SEGMENT, "evenly divisible", id="segment-not-divisor"),
        pytest.param(
            2, {SWITCHES: "3"}, SWITCHES, "3 leaf switches", id="more-switches-than-nodes"
        ),
        pytest.param(
            2, {REQUIRED: "x.io/unknown"}, REQUIRED, "topology.levels", id="unknown-level"
        ),
        pytest.param(
            2, {REQUIRED: RACK, PREFERRED: RACK}, PREFERRED, "only one", id="required-and-preferred"
        ),
    ],
)
def test_unsatisfiable_request_names_the_field(
    pods: int, ann: dict[str, str], field: str, reason: str
) -> None:
    with pytest.raises(InvalidInput) as e:
        gang(pods, ann, {})
    assert e.value.field == field
    assert reason in e.value.reason


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("10", 600),
        ("1:30", 90),
        ("1:00:00", 3600),
        ("2-3", 2 * 86400 + 3 * 3600),
        ("1-0:5", 86400 + 300),
        ("0-0:0:7", 7),
    ],
)
def test_slurm_time_formats(text: str, seconds: int) -> None:
    assert slurm_duration(text, "f", None) == seconds


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("0", "count[@max-time]"),
        ("x", "count[@max-time]"),
        ("1@", "no max-time"),
        ("1@ten", "not a Slurm time"),
        ("1@400-0", "longer than a year"),
    ],
)
def test_bad_switches_are_refused_with_the_reason(value: str, reason: str) -> None:
    errors = annotation_errors({SWITCHES: value}, obj="Pod ns/p")
    assert [e.field for e in errors] == [SWITCHES]
    assert reason in errors[0].reason


def test_webhook_check_names_an_unmapped_kueue_level() -> None:
    errors = annotation_errors({REQUIRED: "x.io/zone"}, obj="Pod ns/p", levels={BLOCK: "block"})
    assert [e.field for e in errors] == [REQUIRED]
    assert "'x.io/zone' is not in the bridge config's topology.levels" in errors[0].reason
    assert annotation_errors({REQUIRED: BLOCK}, obj="Pod ns/p", levels={BLOCK: "block"}) == []


def test_bad_segment_and_level_are_refused() -> None:
    errors = annotation_errors({SEGMENT: "0", PREFERRED: "not a label!"}, obj="Pod ns/p")
    assert sorted(e.field for e in errors) == sorted([SEGMENT, PREFERRED])


@given(st.integers(1, 65533), st.integers(0, 364 * 86400 // 60))
def test_switches_round_trip(count: int, minutes: int) -> None:
    assert parse_switches(f"{count}@{minutes}", "f", None) == Switches(
        count=count, wait_seconds=minutes * 60
    )


def test_kueue_levels_are_ignored_without_a_configured_table() -> None:
    c = expand(load_example("podgroup"))
    pods = c.pods[:2]
    for p in pods:
        p["metadata"]["annotations"] = {REQUIRED: "x.io/anything"}
    spec = translate_group(
        pods, c.find("PodGroup", "slurm-bridge", "pg-1"), [], TranslateSettings()
    )
    assert isinstance(spec, JobSpec)
    assert tuple(getattr(spec, f) for f in FIELDS) == (None, None, None)
