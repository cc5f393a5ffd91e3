"""A gang's members are read once per distinct template (:func:`bridge.translate.job._own_needs`
and the options of :func:`bridge.translate.job._options`): whatever mix of templates, the
job (or the error, naming the same pod) is the one reading every member on its own gives."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.errors import InvalidInput
from bridge.models import JobSpec
from bridge.translate import TranslateSettings, translate_group
from bridge.translate import job as job_module
from bridge.translate.resources import pod_resources
from bridge.wellknown import LABEL_POD_GROUP, slurmjob_annotation

HET = TranslateSettings(gang_sizing="hetjob")
LARGEST = TranslateSettings(gang_sizing="largest")


def _member(i: int, cpu: str, gpus: str | None, note: str | None, sidecar: bool) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": gpus} if gpus is not None else {}
    spec: dict[str, Any] = {
        "containers": [
            {"name": "c", "resources": {"requests": {"cpu": cpu}, "limits": limits}},
        ]
    }
    if sidecar:
        spec["initContainers"] = [
            {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}
        ]
    notes = {slurmjob_annotation("account"): note} if note is not None else {}
    return {
        "metadata": {
            "name": f"m-{i:03d}",
            "namespace": "team",
            "uid": f"uid-{i}",
            "labels": {LABEL_POD_GROUP: "g"},
            "annotations": {**notes, "unrelated.example.com/i": str(i)},
        },
        "spec": spec,
    }


def _podgroup(size: int) -> dict[str, Any]:
    meta = {"name": "g", "namespace": "team", "uid": "uid-g"}
    return {"kind": "PodGroup", "metadata": meta, "spec": {"minMember": size}}


def _outcome(pods: list[dict[str, Any]], s: TranslateSettings) -> Any:
    try:
        spec = translate_group(pods, _podgroup(len(pods)), [], s)
    except InvalidInput as e:
        return ("error", e.field, e.reason, e.obj)
    assert isinstance(spec, JobSpec)
    return spec.model_dump(mode="json")


MEMBERS = st.lists(
    st.tuples(
        st.sampled_from(["1", "2", "-1"]),  # "-1": an error naming the first pod with it
        st.sampled_from([None, "1"]),
        st.sampled_from([None, "a", "b"]),  # a second account: the members differ
        st.booleans(),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(MEMBERS, st.sampled_from([HET, LARGEST]))
def test_a_gang_translates_as_if_every_member_were_read_on_its_own(
    members: list[tuple[str, str | None, str | None, bool]], s: TranslateSettings
) -> None:
    pods = [_member(i, *m) for i, m in enumerate(members)]
    got = _outcome(pods, s)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(job_module, "_own_needs", lambda ps, g: [pod_resources(p, g) for p in ps])
        mp.setattr(job_module, "option_annotations", lambda notes: {"every pod": id(notes)})
        assert got == _outcome(pods, s)


def test_a_member_asking_other_options_is_named_in_the_error() -> None:
    pods = [_member(i, "1", None, "a", False) for i in range(5)]
    pods[3] = _member(3, "1", None, "b", False)
    with pytest.raises(InvalidInput) as e:
        translate_group(pods, _podgroup(5), [], LARGEST)
    assert e.value.obj == "Pod team/m-003"
