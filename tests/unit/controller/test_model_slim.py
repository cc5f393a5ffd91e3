"""What the controller keeps of a pod (its watch's ``keep``): exactly what its plans read,
so a plan on the slim pod decides as on the whole one. Pure: tables."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from bridge import fastjson
from bridge.kube.resources import LAST_APPLIED, slim
from bridge.wellknown import FINALIZER, LABEL_JOB_ID, LABEL_POD_GROUP
from controller import claims, jobs, pods
from controller.model import JobKind, SlurmJobStatus, slim_pod

KEPT_META = {
    "name": "p",
    "namespace": "ns",
    "uid": "u-1",
    "resourceVersion": "7",
    "labels": {LABEL_JOB_ID: "12", LABEL_POD_GROUP: "g"},
    "finalizers": [FINALIZER],
}


def whole_pod(**over: Any) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            **KEPT_META,
            "annotations": {"a": "b" * 1000},
            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
            "ownerReferences": [{"kind": "Job", "name": "j", "uid": "o"}],
        },
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "c", "image": "x", "env": [{"name": "E", "value": "v"}]}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "claim-1"}],
            "schedulingGroup": {"podGroupName": "pg"},
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "claim-1"}],
        },
    }
    for path, value in over.items():
        section, key = path.split("__")
        pod[section][key] = value
    return pod


def test_slim_pod_keeps_identity_labels_finalizers_node_phase_claims_and_podgroup_only() -> None:
    kept = slim_pod(whole_pod())
    assert kept == {
        "metadata": KEPT_META,
        "spec": {
            "nodeName": "n1",
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "claim-1"}],
            "schedulingGroup": {"podGroupName": "pg"},
        },
        "status": {
            "phase": "Running",
            "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "claim-1"}],
        },
    }


@pytest.mark.parametrize(
    "over",
    [
        {},
        {"status__phase": "Succeeded"},
        {"status__phase": "Failed"},
        {"metadata__deletionTimestamp": "2026-01-01T00:00:00Z"},
        {"metadata__finalizers": []},
        {
            "metadata__deletionTimestamp": "2026-01-01T00:00:00Z",
            "metadata__deletionGracePeriodSeconds": 30,
            "status__containerStatuses": [{"name": "c", "state": {"running": {"startedAt": "x"}}}],
        },
        {
            "metadata__deletionTimestamp": "2026-01-01T00:00:00Z",
            "metadata__deletionGracePeriodSeconds": 30,
            "status__containerStatuses": [
                {"name": "c", "state": {"terminated": {"exitCode": 0}}, "image": "x"}
            ],
        },
        {
            "metadata__deletionTimestamp": "2026-01-01T00:00:00Z",
            "metadata__deletionGracePeriodSeconds": 0,
        },
    ],
    ids=[
        "running",
        "succeeded",
        "failed",
        "deleting",
        "no-finalizer",
        "deleting-containers-run",
        "deleting-containers-stopped",
        "final-delete",
    ],
)
@pytest.mark.parametrize(
    "view",
    [
        SlurmJobStatus(JobKind.ACTIVE, "RUNNING"),
        SlurmJobStatus(JobKind.ENDED, "CANCELLED"),
        SlurmJobStatus(JobKind.ENDED, "PREEMPTED"),
        SlurmJobStatus(JobKind.ACTIVE, "RUNNING", preempted=True),
    ],
    ids=["running", "cancelled", "preempted", "selected-for-preemption"],
)
def test_every_plan_decides_on_the_slim_pod_as_on_the_whole_one(
    over: dict[str, Any], view: SlurmJobStatus
) -> None:
    whole = whole_pod(**over)
    now = datetime(2026, 1, 2, tzinfo=UTC)
    nodes: dict[str, Any] = {}
    assert jobs.plan(12, [whole], view, "fail") == jobs.plan(12, [slim_pod(whole)], view, "fail")
    assert pods.plan(12, [whole], view, nodes, now, 60) == pods.plan(
        12, [slim_pod(whole)], view, nodes, now, 60
    )
    assert claims.plan([whole], [], set()) == claims.plan([slim_pod(whole)], [], set())


def test_slim_drops_managed_fields_last_applied_and_node_images_only() -> None:
    node = {
        "metadata": {
            "name": "n",
            "managedFields": [{"manager": "kubelet"}],
            "annotations": {LAST_APPLIED: "{}", "keep": "me"},
        },
        "status": {"images": [{"names": ["x"]}], "capacity": {"cpu": "8"}},
    }
    assert slim(node) == {
        "metadata": {"name": "n", "annotations": {"keep": "me"}},
        "status": {"capacity": {"cpu": "8"}},
    }


def test_slimmed_objects_share_one_copy_of_each_repeated_string() -> None:
    # decoded as the clients decode (bridge.fastjson): its key cache shares the keys
    a, b = (slim(fastjson.loads(fastjson.dumps(whole_pod()))) for _ in range(2))
    assert a == b
    assert a["metadata"]["namespace"] is b["metadata"]["namespace"]
    assert a["spec"]["containers"][0]["image"] is b["spec"]["containers"][0]["image"]
    assert next(iter(a["status"])) is next(iter(b["status"]))  # keys too
    c, d = (slim_pod(fastjson.loads(fastjson.dumps(whole_pod()))) for _ in range(2))
    assert c["status"]["phase"] is d["status"]["phase"]
