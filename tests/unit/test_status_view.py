"""``slurm-bridge status``'s pure join of pods and Slurm jobs, and its rendering (tables)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bridge.models import GroupId
from bridge.slurm.models import JobState, SlurmJob
from bridge.status.view import GONE, NONE, UNKNOWN, Report, build, human_age, render
from bridge.translate import admin_comment
from bridge.wellknown import LABEL_JOB_ID, LABEL_POD_GROUP

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
NS = "hpc"


def pod(
    name: str,
    *,
    ns: str = NS,
    group: str | None = None,
    job: int | None = None,
    node: str = "",
    phase: str = "Pending",
    age: float = 60,
    waiting: str = "",
) -> dict[str, Any]:
    labels: dict[str, str] = {}
    if group:
        labels[LABEL_POD_GROUP] = group
    if job is not None:
        labels[LABEL_JOB_ID] = str(job)
    conditions = []
    if waiting:
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": waiting,
            }
        )
    created = (NOW - timedelta(seconds=age)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": f"uid-{name}",
            "labels": labels,
            "creationTimestamp": created,
        },
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase, "conditions": conditions},
    }


def job(
    job_id: int,
    *,
    kind: str = "PodGroup",
    name: str = "pg",
    ns: str = NS,
    pods: tuple[str, ...] = (),
    state: str = "RUNNING",
    reason: str = "None",
    nodes: tuple[str, ...] = (),
    mcs: str = "kubernetes",
    comment: str | None = None,
) -> SlurmJob:
    gid = GroupId.model_validate({"kind": kind, "namespace": ns, "name": name, "uid": "u"})
    return SlurmJob(
        job_id=job_id,
        name=name,
        state=JobState(primary=state),
        state_reason=reason,
        nodes=nodes,
        partition="slurm-bridge",
        admin_comment=admin_comment(
            gid, [f"{ns}/{p}" for p in pods], uids=[f"uid-{p}" for p in pods]
        )
        if comment is None
        else comment,
        mcs_label=mcs,
        submit_time=NOW - timedelta(seconds=30),
    )


def rows(report: Report) -> list[tuple[Any, ...]]:
    return [
        (g.group, g.pods_bound, g.pods_total, g.job_id, g.state, g.reason, g.nodes)
        for g in report.groups
    ]


JOIN_CASES = [
    pytest.param(
        [pod("pg-0", group="pg", job=7, node="n0"), pod("pg-1", group="pg", job=7, node="n1")],
        [job(7, pods=("pg-0", "pg-1"), nodes=("n0", "n1"))],
        [("PodGroup/pg", 2, 2, 7, "RUNNING", "None", "n[0-1]")],
        id="bound-gang-joined-by-the-pod-label",
    ),
    pytest.param(
        [pod("pg-0", group="pg"), pod("pg-1", group="pg")],
        [job(8, pods=("pg-0", "pg-1"), state="PENDING", reason="Resources")],
        [("PodGroup/pg", 0, 2, 8, "PENDING", "Resources", NONE)],
        id="waiting-gang-joined-by-the-admin-comment",
    ),
    pytest.param(
        [pod("pg-0", group="pg", waiting="waiting for group PodGroup/hpc/pg: 1 of 2 pods exist")],
        [],
        [
            (
                "PodGroup/pg",
                0,
                1,
                None,
                NONE,
                "waiting for group PodGroup/hpc/pg: 1 of 2 pods exist",
                NONE,
            )
        ],
        id="no-job-yet-shows-the-bridge-message",
    ),
    pytest.param(
        [pod("solo", job=9, node="n2")],
        [job(9, kind="Pod", name="solo", pods=("solo",), nodes=("n2",))],
        [("Pod/solo", 1, 1, 9, "RUNNING", "None", "n2")],
        id="plain-pod",
    ),
    pytest.param(
        [pod("x", job=5, node="n0", phase="Succeeded")],
        [
            job(5, kind="Pod", name="x", pods=("x",), state="COMPLETED"),
            job(3, kind="Pod", name="x", pods=("x",), state="CANCELLED"),
        ],
        [("Pod/x", 1, 1, 5, "COMPLETED", "None", NONE)],
        id="the-job-the-label-names-wins-over-an-older-job-of-the-group",
    ),
    pytest.param(
        [pod("x", job=5, node="n0", phase="Succeeded")],
        [],
        [("Pod/x", 1, 1, 5, GONE, NONE, NONE)],
        id="a-job-slurm-forgot-is-gone",
    ),
    pytest.param(
        [pod("pg-0", group="pg", job=7, node="n0")],
        None,
        [("PodGroup/pg", 1, 1, 7, UNKNOWN, NONE, NONE)],
        id="slurm-unreadable-keeps-the-pods-rows",
    ),
    pytest.param(
        None,
        [job(7, pods=("pg-0",), nodes=("n0",)), job(6, state="COMPLETED", pods=("old",))],
        [("PodGroup/pg", None, None, 7, "RUNNING", "None", "n0")],
        id="kubernetes-unreadable-shows-the-active-bridge-jobs",
    ),
    pytest.param(
        [pod("pg-0", group="pg", job=7, node="n0")],
        [
            job(7, pods=("pg-0",), nodes=("n0",)),
            job(99, pods=("pg-0",), mcs="other-bridge", name="theirs"),
        ],
        [("PodGroup/pg", 1, 1, 7, "RUNNING", "None", "n0")],
        id="another-bridges-jobs-are-ignored",
    ),
]


@pytest.mark.parametrize(("pods", "jobs", "expected"), JOIN_CASES)
def test_build_joins_pods_and_jobs_into_one_row_per_group(
    pods: list[dict[str, Any]] | None, jobs: list[SlurmJob] | None, expected: list[Any]
) -> None:
    report = build(pods, jobs, now=NOW, namespace=NS, mcs_label="kubernetes")
    assert rows(report) == expected


def test_a_forged_job_id_label_never_shows_another_tenants_job_in_the_row() -> None:
    theirs = job(60, ns="team-b", name="secret", pods=("secret-0",), reason="Priority")
    forged = pod("mine-0", group="mine", job=60, waiting="waiting for group PodGroup/hpc/mine")
    report = build([forged], [theirs], now=NOW, namespace=NS, mcs_label="kubernetes")
    (row,) = report.groups
    assert row.group == "PodGroup/mine"
    assert row.job_id is None
    assert "secret" not in render(report, "wide")
    assert "Priority" not in render(report, "wide")
    ended = theirs.model_copy(update={"state": JobState(primary="CANCELLED")})
    (stray,) = build([forged], [ended], now=NOW, namespace=NS, mcs_label="kubernetes").stray_pods
    assert stray.why == "job 60 is not this pod's (its back-link does not name it)"


MISMATCH_CASES = [
    pytest.param(
        [],
        [job(11, pods=("gone-0", "gone-1"), nodes=("n0",))],
        [11],
        [],
        id="active-job-whose-pods-are-all-gone",
    ),
    pytest.param(
        [pod("other", job=12, node="n0")],
        [job(11, pods=("other",)), job(12, kind="Pod", name="other", pods=("other",))],
        [11],
        [],
        id="a-pod-labelled-for-another-job-does-not-keep-a-job-alive",
    ),
    pytest.param(
        [],
        [job(11, pods=("gone",), state="COMPLETED")],
        [],
        [],
        id="ended-jobs-are-no-orphans",
    ),
    pytest.param(
        [],
        [job(11, pods=("gone",), ns="elsewhere")],
        [],
        [],
        id="jobs-of-another-namespace-are-out-of-scope",
    ),
    pytest.param(
        [pod("r", job=13, node="n0", phase="Running")],
        [],
        [],
        [("r", 13, "job 13 is gone from Slurm")],
        id="running-pod-whose-job-slurm-forgot",
    ),
    pytest.param(
        [pod("r", job=13, node="n0", phase="Running")],
        [job(13, kind="Pod", name="r", pods=("r",), state="CANCELLED")],
        [],
        [("r", 13, "job 13 ended: CANCELLED")],
        id="running-pod-whose-job-ended",
    ),
    pytest.param(
        [pod("done", job=13, node="n0", phase="Succeeded")],
        [],
        [],
        [],
        id="finished-pods-are-no-strays",
    ),
]


@pytest.mark.parametrize(("pods", "jobs", "orphans", "strays"), MISMATCH_CASES)
def test_build_lists_orphan_jobs_and_stray_pods(
    pods: list[dict[str, Any]],
    jobs: list[SlurmJob],
    orphans: list[int],
    strays: list[tuple[str, int, str]],
) -> None:
    report = build(pods, jobs, now=NOW, namespace=NS, mcs_label="kubernetes")
    assert [j.job_id for j in report.orphan_jobs] == orphans
    assert [(p.name, p.job_id, p.why) for p in report.stray_pods] == strays


def test_no_mismatch_is_claimed_for_a_side_that_could_not_be_read() -> None:
    no_kube = build(None, [job(11, pods=("gone",))], now=NOW, namespace=NS)
    no_slurm = build([pod("r", job=13, phase="Running")], None, now=NOW, namespace=NS)
    assert no_kube.orphan_jobs == ()
    assert no_slurm.stray_pods == ()


def test_all_namespaces_keeps_every_namespace_and_sorts_rows() -> None:
    pods = [pod("b", ns="zz", job=2, node="n1"), pod("a", ns="aa", job=1, node="n0")]
    jobs = [
        job(1, kind="Pod", name="a", ns="aa", pods=("a",)),
        job(2, kind="Pod", name="b", ns="zz", pods=("b",)),
    ]
    report = build(pods, jobs, now=NOW, namespace=None)
    assert [(g.namespace, g.name) for g in report.groups] == [("aa", "a"), ("zz", "b")]


def test_age_is_from_the_oldest_pod() -> None:
    report = build(
        [pod("pg-0", group="pg", age=300), pod("pg-1", group="pg", age=10)],
        [],
        now=NOW,
        namespace=NS,
    )
    assert report.groups[0].age_seconds == 300


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, NONE),
        (0, "0s"),
        (119, "119s"),
        (125, "2m5s"),
        (600, "10m"),
        (3 * 3600 + 65, "3h1m"),
        (30 * 3600, "30h"),
        (3 * 86400 + 4 * 3600, "3d4h"),
        (12 * 86400, "12d"),
    ],
)
def test_human_age_reads_like_kubectl(seconds: float | None, text: str) -> None:
    assert human_age(seconds) == text


def test_table_has_groups_then_the_mismatches() -> None:
    report = build(
        [pod("pg-0", group="pg", job=7, node="n0"), pod("r", job=13, node="n1", phase="Running")],
        [job(7, pods=("pg-0",), nodes=("n0",)), job(11, name="lost", pods=("lost-0",))],
        now=NOW,
        namespace=NS,
    )
    text = render(report)
    lines = text.splitlines()
    header = ["GROUP", "PODS", "JOB", "STATE", "REASON", "EXPECTED", "NODES", "AGE"]
    assert lines[0].split() == header
    assert lines[1].split()[0] == "Pod/r"  # sorted by kind, then name
    assert lines[2].split() == ["PodGroup/pg", "1/1", "7", "RUNNING", "None", "-", "n0", "60s"]
    assert "Slurm jobs of the bridge whose pods are all gone:" in lines
    assert "Pods whose Slurm job is gone or ended:" in lines
    assert any(line.startswith("11 ") and "PodGroup/hpc/lost" in line for line in lines)
    assert any(line.startswith("hpc/r ") and "job 13 is gone from Slurm" in line for line in lines)


def test_wide_adds_partition_and_pod_names_and_all_namespaces_adds_namespace() -> None:
    report = build(
        [pod("pg-0", group="pg", job=7, node="n0")],
        [job(7, pods=("pg-0",), nodes=("n0",))],
        now=NOW,
        namespace=None,
    )
    header, row = render(report, "wide").splitlines()[:2]
    assert header.split()[0] == "NAMESPACE"
    assert header.split()[-3:] == ["PARTITION", "POD", "NAMES"]
    assert row.split()[0] == NS
    assert row.split()[-2:] == ["slurm-bridge", "pg-0"]


def test_json_carries_rows_mismatches_and_errors() -> None:
    report = build(
        [pod("r", job=13, phase="Running")], [], now=NOW, namespace=NS, errors=["Kubernetes: x"]
    )
    doc = json.loads(render(report, "json"))
    assert doc["namespace"] == NS
    assert doc["groups"][0]["group"] == "Pod/r"
    assert doc["groups"][0]["state"] == GONE
    assert doc["strayPods"][0]["jobId"] == 13
    assert doc["groups"][0]["podsBound"] == 0
    assert doc["groups"][0]["pods"] == ["r"]
    assert doc["errors"] == ["Kubernetes: x"]


def test_json_says_null_for_a_job_without_a_reason_and_a_group_without_a_message() -> None:
    report = build(
        [pod("pg-0", group="pg", job=7, node="n0"), pod("solo")],
        [job(7, pods=("pg-0",), nodes=("n0",))],
        now=NOW,
        namespace=NS,
    )
    assert sorted(g.reason for g in report.groups) == [NONE, "None"]  # the table's words
    rows = {g["group"]: g for g in json.loads(render(report, "json"))["groups"]}
    assert rows["PodGroup/pg"]["reason"] is None  # Slurm's "None"
    assert rows["Pod/solo"]["reason"] is None


def test_empty_scope_says_so() -> None:
    assert (
        render(build([], [], now=NOW, namespace=NS))
        == "No slurm-bridge workloads in namespace hpc."
    )


def test_a_hetjob_is_one_group_row_with_a_line_per_component_and_no_orphan() -> None:
    """``GET /jobs/`` lists each component as a job; the pods all carry the leader's id."""
    leader = job(32, kind="JobSet", name="js", pods=("js-d",), nodes=("n0",)).model_copy(
        update={"het_job_id": 32, "het_job_offset": 0}
    )
    workers = job(
        33, kind="JobSet", name="js", pods=("js-w0", "js-w1"), nodes=("n1", "n2")
    ).model_copy(update={"het_job_id": 32, "het_job_offset": 1})
    pods = [
        pod(n, job=32, node=f"n{i}", phase="Running")
        for i, n in enumerate(["js-d", "js-w0", "js-w1"])
    ]
    for p in pods:
        p["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] = "js"
    report = build(pods, [leader, workers], now=NOW, namespace=NS)
    assert report.orphan_jobs == ()
    assert report.stray_pods == ()
    [row] = report.groups
    assert (row.group, row.job_id, row.pods_bound, row.nodes) == ("JobSet/js", 32, 3, "n[0-2]")
    assert [(c.component, c.nodes) for c in row.components] == [("32+0", "n0"), ("32+1", "n[1-2]")]
    text = render(report)
    assert "  32+0" in text
    assert "  32+1" in text
    assert json.loads(render(report, "json"))["groups"][0]["components"][1]["component"] == "32+1"


def test_a_hetjob_component_pending_shows_its_reason_on_the_group() -> None:
    leader = job(40, pods=("a",), state="PENDING", reason="None").model_copy(
        update={"het_job_id": 40, "het_job_offset": 0}
    )
    other = job(41, pods=("b",), state="PENDING", reason="Resources").model_copy(
        update={"het_job_id": 40, "het_job_offset": 1}
    )
    report = build(
        [pod("a", group="pg"), pod("b", group="pg")], [leader, other], now=NOW, namespace=NS
    )
    [row] = report.groups
    assert (row.job_id, row.state) == (40, "PENDING")


def test_a_pending_group_shows_when_slurm_expects_it_to_start() -> None:
    planned = job(7, pods=("pg-0",), state="PENDING", reason="Resources").model_copy(
        update={"start_time": NOW + timedelta(minutes=12)}
    )
    unplanned = job(8, name="q", pods=("q-0",), state="PENDING", reason="Priority")
    behind_infinite = job(9, name="r", pods=("r-0",), state="PENDING").model_copy(
        update={"start_time": NOW + timedelta(days=365)}
    )
    pods = [pod("pg-0", group="pg"), pod("q-0", group="q"), pod("r-0", group="r")]
    report = build(pods, [planned, unplanned, behind_infinite], now=NOW, namespace=NS)
    rows = {r.name: r for r in report.groups}
    assert rows["pg"].expected_start == "2026-01-01T12:12:00Z"
    assert rows["pg"].expected == "12m"
    assert rows["q"].expected == "unplanned"
    assert rows["q"].expected_start == ""
    assert rows["r"].expected == "unknowable"
    lines = render(report).splitlines()
    assert lines[1].split()[5] == "12m"
    assert "2026-01-01T12:12:00Z (12m)" in render(report, "wide")
    as_json = json.loads(render(report, "json"))["groups"]
    assert as_json[0]["expectedStart"] == "2026-01-01T12:12:00Z"
    assert as_json[0]["expectedInSeconds"] == 720
    assert as_json[1]["expectedStart"] == ""


def test_a_running_group_shows_no_expected_start() -> None:
    report = build([pod("pg-0", group="pg", job=7, node="n0")], [job(7)], now=NOW, namespace=NS)
    assert report.groups[0].expected == NONE
    assert report.groups[0].expected_start == ""
