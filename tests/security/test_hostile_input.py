"""Nothing crashes or leaks on long failures or hostile input: table tests.

Backoffs stay finite after any number of failures; oversized quantities, an LWS of size
< 1, Unicode control and format characters, and slurmrestd answers that are not UTF-8 or
nested too deep become ``InvalidInput`` naming the field and the reason (the scheduler
shows it on the pod); the owners cache stays bounded and re-reads; a gang cancelled for
losing members drops the bridge's finalizer.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from bridge.clock import backoff_delay, idle_backoff
from bridge.errors import InvalidInput
from bridge.kube.watch import Backoff
from bridge.slurm.stream import ArrayStream
from bridge.translate import TranslateSettings, translate_group
from bridge.translate.annotations import parse_slurmjob_annotations
from bridge.wellknown import FINALIZER, LABEL_JOB_ID, slurmjob_annotation
from bridge.workloads import kind_named
from scheduler.bind import unlink_patch
from scheduler.related import RelatedCache, kept
from tests.workloads import expand, load_example

S = TranslateSettings()


@pytest.mark.parametrize("failures", [0, 1, 10, 1023, 1024, 1025, 10**6])
def test_every_backoff_is_finite_and_capped_after_any_number_of_failures(failures: int) -> None:
    assert backoff_delay(0.5, failures, 30.0) <= 30.0
    assert 0 < Backoff(0.5, 30.0).delay(failures, random.Random(1)) <= 30.0
    assert idle_backoff(0.25, failures, 1.0) <= 1.0


def _pod(cpu: str = "1", memory: str = "1Gi", containers: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
        "spec": {
            "schedulerName": "slurm-bridge-scheduler",
            "containers": [
                {"name": f"c{i}", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
                for i in range(containers)
            ],
        },
    }


@pytest.mark.parametrize(
    ("pod", "field", "reason"),
    [
        pytest.param(
            _pod(cpu="9e18", containers=3),
            "spec.containers[*].resources.requests.cpu",
            "more than Slurm can count",
            id="cpu-total-above-2^63",
        ),
        pytest.param(
            _pod(memory="9e18", containers=3),
            "spec.containers[*].resources.requests.memory",
            "more than Slurm can count",
            id="memory-total-above-2^63",
        ),
        pytest.param(
            _pod(cpu="3000000000"),
            "spec.containers[*].resources.requests.cpu",
            "more than Slurm can count",
            id="cpu-above-uint32",
        ),
    ],
)
def test_oversized_quantities_are_invalid_input_not_an_encoder_crash(
    pod: dict[str, Any], field: str, reason: str
) -> None:
    with pytest.raises(InvalidInput) as e:
        translate_group([pod], None, [], S)
    assert e.value.field == field
    assert reason in e.value.reason


@pytest.mark.parametrize("size", [0, -1])
def test_an_lws_of_size_below_one_is_invalid_input_naming_the_size(size: int) -> None:
    c = expand(load_example("lws"))
    found = c.find("LeaderWorkerSet", "slurm-bridge", "lws-1")
    assert found is not None
    lws = copy.deepcopy(found)
    lws["spec"]["leaderWorkerTemplate"]["size"] = size
    leader = c.pods[0]
    with pytest.raises(InvalidInput) as e:
        translate_group([leader], lws, [], S, owners=c.objects)
    assert e.value.field == "spec.leaderWorkerTemplate.size"
    assert "at least 1" in e.value.reason


@pytest.mark.parametrize(
    ("char", "name"),
    [
        ("\u0085", "U+0085"),  # NEL: a C1 control
        ("\u2028", "U+2028"),  # line separator
        ("\u2029", "U+2029"),  # paragraph separator
        ("\u202e", "U+202E"),  # right-to-left override
        ("\u200b", "U+200B"),  # zero-width space
        ("\u200d", "U+200D"),  # zero-width joiner
        ("\ufeff", "U+FEFF"),  # zero-width no-break space
        ("\x1b", "U+001B"),  # escape
    ],
)
@pytest.mark.parametrize("key", ["job-name", "constraints", "account", "wckey"])
def test_hidden_unicode_in_text_that_reaches_slurm_is_refused_naming_the_field(
    char: str, name: str, key: str
) -> None:
    annotation = slurmjob_annotation(key)
    with pytest.raises(InvalidInput) as e:
        parse_slurmjob_annotations({annotation: f"ab{char}cd"}, obj="Pod ns/p")
    assert e.value.field == annotation
    assert name in e.value.reason
    assert "control or format" in e.value.reason


def test_ordinary_unicode_text_is_kept() -> None:
    opts = parse_slurmjob_annotations({slurmjob_annotation("job-name"): "Größe-数据"}, obj="x")
    assert opts.job_name == "Größe-数据"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b'{"jobs":[{"name":"\xff"}]}', "not UTF-8"),
        (b'{"jobs":[' + b"[" * 100_000 + b"]" * 100_000 + b"]}", "nested deeper"),
    ],
)
def test_a_slurmrestd_answer_not_utf8_or_too_deep_is_invalid_input(
    body: bytes, reason: str
) -> None:
    def decode() -> list[Any]:
        stream = ArrayStream("jobs")
        return [*stream.feed(body), *stream.close()]

    with pytest.raises(InvalidInput) as e:
        decode()
    assert e.value.field == "response"
    assert reason in e.value.reason


def _owner(uid: str, rv: str = "1") -> dict[str, Any]:
    return {
        "kind": "Job",
        "metadata": {
            "uid": uid,
            "resourceVersion": rv,
            "managedFields": [{"manager": "kubectl"}],
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "x" * 10_000},
        },
        "spec": {"parallelism": 2},
        "status": {"active": 2, "conditions": [{"type": "x"}] * 100},
    }


def test_the_kinds_cache_keeps_objects_slim_and_follows_their_changes_and_deletion() -> None:
    cache = RelatedCache()
    job = kind_named("Job").api
    cache.on_event(job, "ADDED", kept(_owner("u9")))
    held = cache.owners("").get("u9")
    assert held is not None
    assert "status" not in held
    assert "managedFields" not in held["metadata"]
    assert held["metadata"].get("annotations") == {}
    cache.on_event(job, "MODIFIED", kept(_owner("u9", rv="2")))
    again = cache.owners("").get("u9")
    assert again is not None
    assert again["metadata"]["resourceVersion"] == "2"
    cache.on_event(job, "DELETED", _owner("u9", rv="3"))
    assert cache.owners("").get("u9") is None
    assert len(cache) == 0


def test_a_cancelled_gangs_pods_lose_the_label_and_the_finalizer() -> None:
    pod = {
        "metadata": {
            "labels": {LABEL_JOB_ID: "12", "app": "x"},
            "finalizers": ["other/keep", FINALIZER],
        }
    }
    assert unlink_patch(pod) == {
        "metadata": {"labels": {LABEL_JOB_ID: None}, "finalizers": ["other/keep"]}
    }
    assert unlink_patch({"metadata": {"labels": {"app": "x"}}}) is None
