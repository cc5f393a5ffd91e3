"""Table tests for the pure validate(): annotations, the bridge's own keys, immutability."""

from __future__ import annotations

from typing import Any

import pytest

from admission.policy import AdmissionContext
from admission.review import parse_review
from admission.validate import validate
from bridge import wellknown
from bridge.config import POLICED_POD_KEYS, parse_config
from tests.admission_helpers import make_pod, make_review

# every policed key open: these tables are about parsing and bounds (the policy's own
# tests: tests/security/test_annotation_policy.py)
CFG = parse_config(
    {
        "managedNamespaces": ["slurm-bridge"],
        "defaultNamespacePolicy": {"allowPodKeys": list(POLICED_POD_KEYS)},
    },
    env={},
)
CTX = AdmissionContext(CFG, namespace_labels={})
SCHED = "system:serviceaccount:slurm-bridge:slurm-bridge-scheduler"
TL = wellknown.slurmjob_annotation("timelimit")
CPU = wellknown.slurmjob_annotation("cpu-per-task")
MEM = wellknown.slurmjob_annotation("mem-per-node")
EXCL = wellknown.slurmjob_annotation("exclusive")
MINN = wellknown.slurmjob_annotation("min-nodes")
MAXN = wellknown.slurmjob_annotation("max-nodes")
JOBID = wellknown.LABEL_JOB_ID
NODE = wellknown.ANNOTATION_SLURM_NODE


def verdict(obj: dict[str, Any] | None, **review: Any) -> dict[str, Any]:
    req = parse_review(make_review(obj, **review))
    out = validate(req, CTX).to_review()
    assert out["response"]["uid"] == req.uid
    resp: dict[str, Any] = out["response"]
    return resp


def test_bad_annotation_is_denied_with_a_message_naming_it() -> None:
    resp = verdict(make_pod(annotations={TL: "forever"}))
    assert resp["allowed"] is False
    assert TL in resp["status"]["message"]
    assert "forever" in resp["status"]["message"]  # the reason quotes the bad value
    assert resp["status"]["code"] == 422
    assert resp["status"]["details"]["causes"][0]["field"] == f"metadata.annotations[{TL}]"


def test_all_errors_are_reported_in_one_message() -> None:
    ann = {
        TL: "x",
        CPU: "lots",
        MEM: "-1Gi",
        EXCL: "maybe",
        wellknown.SLURMJOB_PREFIX + "nope": "1",
    }
    resp = verdict(make_pod(annotations=ann, labels={JOBID: "7"}))
    msg = resp["status"]["message"]
    assert msg.startswith("Pod slurm-bridge/web-0: 6 errors: ")
    for key in [*ann, JOBID]:
        assert key in msg
    assert len(resp["status"]["details"]["causes"]) == 6


@pytest.mark.parametrize(
    ("pod", "review", "allowed", "fields"),
    [
        pytest.param(
            make_pod(annotations={TL: "60", CPU: "2", MEM: "4Gi", EXCL: "false"}),
            {},
            True,
            [],
            id="good-annotations",
        ),
        pytest.param(make_pod(annotations={TL: "0"}), {}, False, [TL], id="timelimit-zero"),
        pytest.param(make_pod(annotations={CPU: "abc"}), {}, False, [CPU], id="cpu-not-quantity"),
        pytest.param(make_pod(annotations={MEM: "12Qi"}), {}, False, [MEM], id="mem-bad-suffix"),
        pytest.param(
            make_pod(annotations={EXCL: "yes"}), {}, False, [EXCL], id="exclusive-not-bool"
        ),
        pytest.param(
            make_pod(annotations={MINN: "4", MAXN: "2"}), {}, False, [MINN], id="min-above-max"
        ),
        pytest.param(
            make_pod(annotations={MINN: "2"}),
            {},
            False,
            [MINN],
            id="a-lone-exclusive-pod-asks-more-nodes-than-its-one-pod",
        ),
        pytest.param(
            make_pod(annotations={MINN: "2", EXCL: "false"}),
            {},
            True,
            [],
            id="a-lone-shared-pod-may-ask-min-nodes",
        ),
        pytest.param(
            make_pod(annotations={MINN: "2"}, labels={wellknown.LABEL_POD_GROUP: "g"}),
            {},
            True,
            [],
            id="a-gang-member-may-ask-min-nodes-its-group-decides",
        ),
        pytest.param(
            make_pod(annotations={TL: 5}),
            {},
            False,
            [TL],
            id="non-string-value",  # type: ignore[dict-item]
        ),
        pytest.param(
            make_pod(namespace="default", annotations={TL: "x"}),
            {},
            True,
            [],
            id="unmanaged-namespace-not-validated",
        ),
        pytest.param(
            make_pod(scheduler="volcano", annotations={TL: "x"}),
            {},
            True,
            [],
            id="other-scheduler-not-validated",
        ),
        pytest.param(
            make_pod(
                namespace="default", scheduler="slurm-bridge-scheduler", annotations={TL: "x"}
            ),
            {},
            False,
            [TL],
            id="our-scheduler-anywhere-is-validated",
        ),
        pytest.param(
            make_pod(labels={JOBID: "12"}),
            {},
            False,
            [f"metadata.labels[{JOBID}]"],
            id="user-sets-jobid-label",
        ),
        pytest.param(
            make_pod(annotations={NODE: "n1"}),
            {},
            False,
            [f"metadata.annotations[{NODE}]"],
            id="user-sets-slurm-node-annotation",
        ),
        pytest.param(
            make_pod(annotations={wellknown.ANNOTATION_SPEC_HASH: "abc"}),
            {},
            False,
            [f"metadata.annotations[{wellknown.ANNOTATION_SPEC_HASH}]"],
            id="user-sets-spec-hash-annotation",
        ),
        pytest.param(
            make_pod(
                labels={JOBID: "12"},
                annotations={NODE: "n1", wellknown.ANNOTATION_SPEC_HASH: "abc"},
            ),
            {"user": SCHED},
            True,
            [],
            id="bridge-account-may-set-its-keys",
        ),
        pytest.param(
            make_pod(annotations={wellknown.LEGACY_ANNOTATION_JOB_NAME: "old"}),
            {},
            True,
            [],
            id="legacy-job-name-accepted",
        ),
        pytest.param(make_pod(), {"operation": "DELETE"}, True, [], id="delete-allowed"),
    ],
)
def test_validate_pod_create_table(
    pod: dict[str, Any], review: dict[str, Any], allowed: bool, fields: list[str]
) -> None:
    resp = verdict(pod, **review)
    assert resp["allowed"] is allowed, resp
    if not allowed:
        causes = [c["field"] for c in resp["status"]["details"]["causes"]]
        assert causes == [
            f if f.startswith("metadata.") else f"metadata.annotations[{f}]" for f in fields
        ]
        for c in resp["status"]["details"]["causes"]:
            assert c["field"] in resp["status"]["message"]
            assert c["message"] in resp["status"]["message"]


BOUND = make_pod(annotations={TL: "60"}, node="n1", labels={JOBID: "7"})
UNBOUND = make_pod(annotations={TL: "60"})


def with_meta(
    pod: dict[str, Any],
    *,
    annotations: dict[str, Any] | None = None,
    labels: dict[str, Any] | None = None,
) -> dict[str, Any]:
    out = {**pod, "metadata": {**pod["metadata"]}}
    if annotations is not None:
        out["metadata"]["annotations"] = annotations
    if labels is not None:
        out["metadata"]["labels"] = labels
    return out


@pytest.mark.parametrize(
    ("old", "new", "user", "allowed", "field"),
    [
        pytest.param(
            UNBOUND,
            with_meta(UNBOUND, annotations={TL: "120"}),
            "alice",
            True,
            None,
            id="unbound-annotation-change-ok",
        ),
        pytest.param(
            UNBOUND,
            with_meta(UNBOUND, annotations={TL: "soon"}),
            "alice",
            False,
            TL,
            id="unbound-bad-new-value-denied",
        ),
        pytest.param(
            BOUND,
            with_meta(BOUND, annotations={TL: "120"}),
            "alice",
            False,
            TL,
            id="bound-annotation-change-denied",
        ),
        pytest.param(
            BOUND,
            with_meta(BOUND, annotations={TL: "120"}),
            SCHED,
            False,
            TL,
            id="bound-annotation-immutable-even-for-bridge",
        ),
        pytest.param(
            BOUND,
            with_meta(BOUND, annotations={}),
            "alice",
            False,
            TL,
            id="bound-annotation-removal-denied",
        ),
        pytest.param(
            BOUND,
            with_meta(BOUND, labels={JOBID: "8"}),
            "alice",
            False,
            f"metadata.labels[{JOBID}]",
            id="bound-jobid-change-by-user-denied",
        ),
        pytest.param(
            BOUND,
            with_meta(BOUND, labels={}),
            "alice",
            False,
            f"metadata.labels[{JOBID}]",
            id="bound-jobid-removal-by-user-denied",
        ),
        pytest.param(
            UNBOUND,
            with_meta(UNBOUND, labels={JOBID: "8"}),
            "alice",
            False,
            f"metadata.labels[{JOBID}]",
            id="unbound-jobid-added-by-user-denied",
        ),
        pytest.param(
            UNBOUND,
            with_meta(UNBOUND, labels={JOBID: "8"}, annotations={TL: "60", NODE: "n1"}),
            SCHED,
            True,
            None,
            id="bridge-sets-its-keys-on-update",
        ),
        pytest.param(
            BOUND,
            with_meta(BOUND, labels={JOBID: "7", "app": "x"}),
            "alice",
            True,
            None,
            id="bound-other-label-change-ok",
        ),
        pytest.param(
            make_pod(annotations={TL: "bad"}, node="n1"),
            {
                **make_pod(annotations={TL: "bad"}, node="n1"),
                "metadata": {**make_pod(annotations={TL: "bad"})["metadata"], "finalizers": []},
            },
            "alice",
            True,
            None,
            id="old-bad-annotation-does-not-block-unrelated-update",
        ),
    ],
)
def test_validate_pod_update_table(
    old: dict[str, Any], new: dict[str, Any], user: str, allowed: bool, field: str | None
) -> None:
    resp = verdict(new, operation="UPDATE", old=old, user=user)
    assert resp["allowed"] is allowed, resp
    if field is not None:
        want = field if field.startswith("metadata.") else f"metadata.annotations[{field}]"
        assert want in [c["field"] for c in resp["status"]["details"]["causes"]]
        assert want in resp["status"]["message"]


def test_update_without_old_object_is_denied_naming_it() -> None:
    resp = verdict(make_pod(), operation="UPDATE", old=None)
    assert resp["allowed"] is False
    assert "request.oldObject" in resp["status"]["message"]


def workload(
    kind: str,
    group: str,
    annotations: dict[str, Any],
    ns: str = "slurm-bridge",
    spec: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    obj = {
        "apiVersion": f"{group}/v1",
        "kind": kind,
        "metadata": {"name": "w", "namespace": ns, "annotations": annotations},
        "spec": spec or {},
    }
    return obj, {"kind": kind, "group": group}


@pytest.mark.parametrize(
    ("kind", "group"),
    [
        pytest.param("PodGroup", "scheduling.x-k8s.io", id="podgroup"),
        pytest.param("PodGroup", "scheduling.k8s.io", id="builtin-podgroup"),
        pytest.param("Workload", "scheduling.k8s.io", id="builtin-workload"),
        pytest.param("JobSet", "jobset.x-k8s.io", id="jobset"),
        pytest.param("LeaderWorkerSet", "leaderworkerset.x-k8s.io", id="lws"),
        pytest.param("Job", "batch", id="batch-job"),
    ],
)
def test_group_objects_with_bad_annotations_are_denied(kind: str, group: str) -> None:
    obj, review = workload(kind, group, {TL: "x", CPU: "1"})
    resp = verdict(obj, **review)
    assert resp["allowed"] is False
    assert f"{kind} slurm-bridge/w" in resp["status"]["message"]
    assert TL in resp["status"]["message"]
    obj, review = workload(kind, group, {TL: "30"})
    assert verdict(obj, **review)["allowed"] is True


def test_group_object_outside_managed_namespaces_is_not_validated() -> None:
    obj, review = workload("JobSet", "jobset.x-k8s.io", {TL: "x"}, ns="default")
    assert verdict(obj, **review)["allowed"] is True


def test_batch_job_whose_template_names_our_scheduler_is_validated_anywhere() -> None:
    spec = {"template": {"spec": {"schedulerName": "slurm-bridge-scheduler"}}}
    obj, review = workload("Job", "batch", {TL: "x"}, ns="default", spec=spec)
    assert verdict(obj, **review)["allowed"] is False


def test_group_object_update_only_checks_changed_annotations() -> None:
    old, review = workload("Job", "batch", {TL: "x"})
    new = {**old, "spec": {"suspend": True}}
    assert verdict(new, operation="UPDATE", old=old, **review)["allowed"] is True
