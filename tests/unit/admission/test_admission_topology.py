"""The webhook refuses a topology request it can tell is bad, naming the field and reason;
Kueue's TAS annotations are only judged when the config maps topology levels."""

from __future__ import annotations

from typing import Any

from admission.policy import AdmissionContext
from admission.review import parse_review
from admission.validate import validate
from bridge import wellknown
from bridge.config import parse_config
from tests.admission_helpers import make_pod, make_review

LEVELS = {"cloud.example.com/block": "block", "cloud.example.com/rack": "switch"}
CFG = parse_config({"managedNamespaces": ["slurm-bridge"], "topology": {"levels": LEVELS}}, env={})
PLAIN = parse_config({"managedNamespaces": ["slurm-bridge"]}, env={})
REQUIRED = wellknown.ANNOTATION_KUEUE_REQUIRED_TOPOLOGY
SWITCHES = wellknown.slurmjob_annotation("switches")
SEGMENT = wellknown.slurmjob_annotation("segment")


def verdict(obj: dict[str, Any], cfg: Any = CFG, **review: Any) -> dict[str, Any]:
    out = validate(parse_review(make_review(obj, **review)), AdmissionContext(cfg, {}))
    resp: dict[str, Any] = out.to_review()["response"]
    return resp


def test_bad_switches_on_a_pod_is_denied_naming_the_annotation_and_slurms_syntax() -> None:
    resp = verdict(make_pod(annotations={SWITCHES: "one@10"}))
    assert resp["allowed"] is False
    msg = resp["status"]["message"]
    assert f"metadata.annotations[{SWITCHES}]" in msg
    assert "count[@max-time]" in msg


def test_bad_segment_on_a_jobset_is_denied() -> None:
    js = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "slurm-bridge", "annotations": {SEGMENT: "-1"}},
        "spec": {},
    }
    resp = verdict(js, kind="JobSet", group="jobset.x-k8s.io", version="v1alpha2")
    assert resp["allowed"] is False
    assert SEGMENT in resp["status"]["message"]


def test_unmapped_kueue_level_is_denied_naming_the_config_table() -> None:
    resp = verdict(make_pod(annotations={REQUIRED: "topology.kubernetes.io/zone"}))
    assert resp["allowed"] is False
    assert "topology.levels" in resp["status"]["message"]
    assert REQUIRED in resp["status"]["message"]


def test_mapped_kueue_level_and_good_requests_are_allowed() -> None:
    ann = {REQUIRED: "cloud.example.com/rack", SWITCHES: "1@10:00", SEGMENT: "4"}
    assert verdict(make_pod(annotations=ann))["allowed"] is True


def test_kueue_levels_are_not_judged_without_a_configured_table() -> None:
    ann = {REQUIRED: "topology.kubernetes.io/zone"}
    assert verdict(make_pod(annotations=ann), PLAIN)["allowed"] is True
