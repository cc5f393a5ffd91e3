"""Table tests for the pure mutate(): which pods are touched, and what the patch does."""

from __future__ import annotations

from typing import Any

import pytest

from admission.jsonpatch import escape_token, pointer
from admission.mutate import managed_toleration, mutate
from admission.policy import AdmissionContext
from admission.review import parse_review
from bridge import wellknown
from bridge.config import parse_config
from tests.admission_helpers import apply_json_patch, decode_patch, make_pod, make_review

OURS = "slurm-bridge-scheduler"
TOL = managed_toleration(OURS)
CFG = parse_config(
    {
        "managedNamespaces": ["slurm-bridge", "hpc"],
        "managedNamespaceSelector": {"matchLabels": {"slurm-bridge/managed": "true"}},
    },
    env={},
)


def run(
    obj: dict[str, Any], *, labels: dict[str, str] | None = None, **review: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Mutate through the AdmissionReview envelope; return (review response, patched obj)."""
    req = parse_review(make_review(obj, **review))
    out = mutate(req, AdmissionContext(CFG, namespace_labels=labels)).to_review()
    assert out["response"]["uid"] == req.uid
    return out, apply_json_patch(obj, decode_patch(out))


def test_pod_in_managed_namespace_gets_scheduler_name_and_toleration() -> None:
    pod = make_pod(namespace="slurm-bridge", scheduler="default-scheduler")
    out, patched = run(pod)
    assert out["response"]["allowed"] is True
    assert out["response"]["patchType"] == "JSONPatch"
    assert patched["spec"]["schedulerName"] == OURS
    assert patched["spec"]["tolerations"] == [
        {
            "key": wellknown.MANAGED_NODE_TAINT,
            "operator": "Equal",
            "value": OURS,
            "effect": "NoExecute",
        }
    ]
    # nothing else changed
    assert {
        k: v for k, v in patched["spec"].items() if k not in ("schedulerName", "tolerations")
    } == {k: v for k, v in pod["spec"].items() if k != "schedulerName"}
    assert patched["metadata"] == pod["metadata"]


def test_pod_in_other_namespace_passes_untouched() -> None:
    pod = make_pod(namespace="default")
    out, patched = run(pod, labels={})
    assert out["response"] == {"uid": out["response"]["uid"], "allowed": True}
    assert patched == pod
    assert "patch" not in out["response"]


OTHER_TOL = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("pod", "labels", "want_sched", "want_tols", "want_node"),
    [
        pytest.param(
            make_pod(scheduler=None), None, OURS, [TOL], None, id="no-schedulerName-is-default"
        ),
        pytest.param(
            make_pod(scheduler=""), None, OURS, [TOL], None, id="empty-schedulerName-is-default"
        ),
        pytest.param(
            make_pod(namespace="hpc"), None, OURS, [TOL], None, id="second-listed-namespace"
        ),
        pytest.param(
            make_pod(namespace="team-a"),
            {"slurm-bridge/managed": "true"},
            OURS,
            [TOL],
            None,
            id="namespace-selected-by-labels",
        ),
        pytest.param(
            make_pod(namespace="team-b"),
            {"slurm-bridge/managed": "false"},
            "default-scheduler",
            None,
            None,
            id="namespace-labels-do-not-match",
        ),
        pytest.param(
            make_pod(scheduler="volcano"),
            None,
            "volcano",
            None,
            None,
            id="other-custom-scheduler-left-alone",
        ),
        pytest.param(
            make_pod(namespace="default", scheduler=OURS),
            {},
            OURS,
            [TOL],
            None,
            id="ours-already-in-unmanaged-namespace-gets-toleration",
        ),
        pytest.param(
            make_pod(scheduler=OURS, tolerations=[TOL]),
            None,
            OURS,
            [TOL],
            None,
            id="already-complete-no-patch",
        ),
        pytest.param(
            make_pod(tolerations=[OTHER_TOL]),
            None,
            OURS,
            [OTHER_TOL, TOL],
            None,
            id="existing-tolerations-appended-to",
        ),
        pytest.param(
            make_pod(tolerations=[{"key": wellknown.MANAGED_NODE_TAINT, "operator": "Exists"}]),
            None,
            OURS,
            [{"key": wellknown.MANAGED_NODE_TAINT, "operator": "Exists"}],
            None,
            id="exists-toleration-for-our-key-is-enough",
        ),
        pytest.param(
            make_pod(tolerations=[{**TOL, "effect": "NoSchedule"}]),
            None,
            OURS,
            [{**TOL, "effect": "NoSchedule"}, TOL],
            None,
            id="wrong-effect-toleration-does-not-count",
        ),
        pytest.param(
            make_pod(tolerations=[{**TOL, "value": "other"}]),
            None,
            OURS,
            [{**TOL, "value": "other"}, TOL],
            None,
            id="wrong-value-toleration-does-not-count",
        ),
        pytest.param(make_pod(node="n1"), None, OURS, [TOL], None, id="nodeName-cleared"),
        pytest.param(
            make_pod(namespace="default", node="n1"),
            {},
            "default-scheduler",
            None,
            "n1",
            id="unmanaged-nodeName-kept",
        ),
    ],
)
def test_mutate_table(
    pod: dict[str, Any],
    labels: dict[str, str] | None,
    want_sched: str,
    want_tols: list[Any] | None,
    want_node: str | None,
) -> None:
    out, patched = run(pod, labels=labels)
    assert out["response"]["allowed"] is True
    assert (patched["spec"].get("schedulerName") or "default-scheduler") == want_sched
    assert patched["spec"].get("tolerations") == want_tols
    assert patched["spec"].get("nodeName") == want_node


def test_already_complete_pod_gets_no_patch_at_all() -> None:
    out, _ = run(make_pod(scheduler=OURS, tolerations=[TOL]))
    assert "patch" not in out["response"]


@pytest.mark.parametrize(
    "review",
    [
        pytest.param({"operation": "UPDATE", "old": make_pod()}, id="update"),
        pytest.param({"operation": "DELETE"}, id="delete"),
        pytest.param({"kind": "Job", "group": "batch"}, id="other-kind"),
        pytest.param({"kind": "Pod", "group": "example.com"}, id="pod-of-another-group"),
    ],
)
def test_only_pod_create_is_mutated(review: dict[str, Any]) -> None:
    out, _ = run(make_pod(), **review)
    assert out["response"]["allowed"] is True
    assert "patch" not in out["response"]


def test_pod_without_spec_gets_a_spec_first() -> None:
    pod = make_pod()
    del pod["spec"]
    _, patched = run(pod)
    assert patched["spec"] == {"schedulerName": OURS, "tolerations": [TOL]}


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        pytest.param({"tolerations": "x"}, "spec.tolerations", id="tolerations-not-list"),
        pytest.param({"tolerations": [1]}, "spec.tolerations[0]", id="toleration-not-object"),
        pytest.param({"schedulerName": 5}, "spec.schedulerName", id="schedulerName-not-string"),
    ],
)
def test_malformed_pod_is_denied_naming_the_field(spec: dict[str, Any], field: str) -> None:
    pod = make_pod()
    pod["spec"].update(spec)
    out, _ = run(pod)
    assert out["response"]["allowed"] is False
    assert field in out["response"]["status"]["message"]


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        pytest.param("a/b", "a~1b", id="slash"),
        pytest.param("a~b", "a~0b", id="tilde"),
        pytest.param("~1", "~01", id="tilde-one-is-not-a-slash"),
        pytest.param("/~", "~1~0", id="both"),
        pytest.param("plain", "plain", id="plain"),
    ],
)
def test_json_pointer_escaping_rfc6901(raw: str, escaped: str) -> None:
    assert escape_token(raw) == escaped


def test_pointer_round_trips_keys_with_slash_and_tilde() -> None:
    doc = {"metadata": {"annotations": {"slinky.slurm.net/a~b": "x"}}}
    path = pointer("metadata", "annotations", "slinky.slurm.net/a~b")
    assert path == "/metadata/annotations/slinky.slurm.net~1a~0b"
    out = apply_json_patch(doc, [{"op": "replace", "path": path, "value": "y"}])
    assert out["metadata"]["annotations"] == {"slinky.slurm.net/a~b": "y"}
