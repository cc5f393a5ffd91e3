"""Pure plan tables: pod phase x job state x deletion x node state -> actions."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from bridge.slurm.models import JobState, SlurmJob
from bridge.wellknown import (
    FINALIZER,
    LABEL_JOB_ID,
    LABEL_POD_GROUP,
)
from controller import dangling, jobs, pods
from controller.model import (
    UNKNOWN,
    CancelJob,
    DeletePod,
    FailPod,
    JobKind,
    RemoveFinalizer,
    SetPodGroupPhase,
    SlurmJobStatus,
)

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
ACTIVE = SlurmJobStatus(JobKind.ACTIVE, "RUNNING")
CANCELLED = SlurmJobStatus(JobKind.ENDED, "CANCELLED", "None")
NODE_FAIL = SlurmJobStatus(JobKind.ENDED, "NODE_FAIL", "NodeDown")
GONE = SlurmJobStatus(JobKind.GONE)


def pod(
    name: str = "p0",
    phase: str = "Running",
    *,
    deleting: str | None = None,
    finalizer: bool = True,
    node: str = "n1",
    group: str | None = None,
    containers: tuple[str, ...] = (),
    final_delete: bool = False,
) -> dict[str, Any]:
    """``containers``: each container's state kind (running, terminated, ...);
    ``final_delete``: the kubelet's DELETE with grace 0 came."""
    labels = {LABEL_JOB_ID: "7"}
    if group:
        labels[LABEL_POD_GROUP] = group
    meta: dict[str, Any] = {"namespace": "ns", "name": name, "labels": labels}
    if finalizer:
        meta["finalizers"] = [FINALIZER]
    if deleting:
        meta["deletionTimestamp"] = deleting
        meta["deletionGracePeriodSeconds"] = 0 if final_delete else 30
    status: dict[str, Any] = {"phase": phase}
    if containers:
        status["containerStatuses"] = [
            {"name": f"c{i}", "state": {k: {}}} for i, k in enumerate(containers)
        ]
    return {"metadata": meta, "spec": {"nodeName": node}, "status": status}


def node(name: str = "n1", ready: bool = True, **spec: Any) -> dict[str, Any]:
    cond = {"type": "Ready", "status": "True" if ready else "False"}
    return {"metadata": {"name": name}, "spec": spec, "status": {"conditions": [cond]}}


READY = {"n1": node()}
NOT_READY = {"n1": node(ready=False)}
LONG_AGO = "2026-01-01T11:00:00Z"
JUST_NOW = "2026-01-01T11:59:50Z"


@pytest.mark.parametrize(
    ("state", "disruption"),
    [
        ("PREEMPTED", True),
        ("NODE_FAIL", True),
        ("BOOT_FAIL", True),
        ("TIMEOUT", True),
        ("DEADLINE", True),
        ("CANCELLED", True),
        ("FAILED", False),
        ("OUT_OF_MEMORY", False),
        ("COMPLETED", False),
    ],
)
def test_only_ends_from_outside_the_workload_are_disruptions(state: str, disruption: bool) -> None:
    [action] = jobs.plan(7, [pod()], SlurmJobStatus(JobKind.ENDED, state), "fail")
    assert isinstance(action, FailPod)
    assert action.disruption is disruption


@pytest.mark.parametrize(
    ("pods_", "view", "policy", "expected"),
    [
        pytest.param([pod()], UNKNOWN, "fail", [], id="unknown-never-fails-a-pod"),
        pytest.param([pod()], ACTIVE, "fail", [], id="active-job-leaves-running-pod"),
        pytest.param(
            [pod()],
            CANCELLED,
            "fail",
            [
                FailPod(
                    "ns",
                    "p0",
                    "SlurmJobCancelled",
                    "Slurm job 7 ended with state CANCELLED",
                    disruption=True,
                )
            ],
            id="cancelled-fails-running-pod-as-a-disruption",
        ),
        pytest.param(
            [pod(phase="Pending")],
            NODE_FAIL,
            "fail",
            [
                FailPod(
                    "ns",
                    "p0",
                    "SlurmJobNodeFail",
                    "Slurm job 7 ended with state NODE_FAIL (reason: NodeDown)",
                    disruption=True,
                )
            ],
            id="node-fail-fails-pending-pod-with-reason",
        ),
        pytest.param(
            [pod()],
            GONE,
            "delete",
            [
                DeletePod(
                    "ns",
                    "p0",
                    "SlurmJobGone",
                    "Slurm job 7 no longer exists in Slurm",
                    disruption=True,
                )
            ],
            id="gone-with-delete-policy-deletes",
        ),
        pytest.param([pod(phase="Succeeded")], CANCELLED, "fail", [], id="terminal-pod-untouched"),
        pytest.param(
            [pod(deleting=JUST_NOW)], CANCELLED, "fail", [], id="terminating-pod-not-failed"
        ),
        pytest.param(
            [pod(group="pg")],
            CANCELLED,
            "fail",
            [
                FailPod(
                    "ns",
                    "p0",
                    "SlurmJobCancelled",
                    "Slurm job 7 ended with state CANCELLED",
                    disruption=True,
                ),
                SetPodGroupPhase("ns", "pg", "Failed"),
            ],
            id="podgroup-failed-when-pods-failed",
        ),
        pytest.param(
            [pod(phase="Succeeded", group="pg")],
            CANCELLED,
            "fail",
            [SetPodGroupPhase("ns", "pg", "Finished")],
            id="podgroup-finished-when-all-succeeded",
        ),
    ],
)
def test_jobs_plan(
    pods_: list[dict[str, Any]], view: SlurmJobStatus, policy: Any, expected: Any
) -> None:
    assert jobs.plan(7, pods_, view, policy) == expected


@pytest.mark.parametrize(
    ("pods_", "view", "node_map", "expected"),
    [
        pytest.param(
            [pod(phase="Succeeded")], UNKNOWN, READY, [], id="unknown-job-nothing-happens"
        ),
        pytest.param([pod()], ACTIVE, READY, [], id="running-pod-keeps-job"),
        pytest.param(
            [pod(phase="Succeeded"), pod("p1", phase="Failed")],
            ACTIVE,
            READY,
            [CancelJob(7, "all pods stopped")],
            id="all-terminal-cancels-job",
        ),
        pytest.param(
            [pod(phase="Succeeded"), pod("p1")], ACTIVE, READY, [], id="one-still-running-keeps-job"
        ),
        pytest.param(
            [pod(deleting=JUST_NOW, containers=("running",))],
            ACTIVE,
            READY,
            [],
            id="deleted-pod-keeps-job-while-its-containers-run",
        ),
        pytest.param(
            [pod(deleting=JUST_NOW, containers=("terminated", "running"))],
            ACTIVE,
            READY,
            [],
            id="deleted-pod-keeps-job-while-one-container-runs",
        ),
        pytest.param(
            [pod(deleting=JUST_NOW, containers=("terminated", "terminated"))],
            ACTIVE,
            READY,
            [CancelJob(7, "all pods stopped")],
            id="deleted-pod-whose-containers-all-terminated-ends-job",
        ),
        pytest.param(
            [pod(deleting=JUST_NOW, containers=("running",), final_delete=True)],
            ACTIVE,
            READY,
            [CancelJob(7, "all pods stopped")],
            id="kubelets-final-delete-ends-job",
        ),
        pytest.param(
            [pod(deleting=JUST_NOW, node="")],
            ACTIVE,
            READY,
            [CancelJob(7, "all pods stopped")],
            id="deleted-unbound-pod-ends-job",
        ),
        pytest.param(
            [pod(phase="Failed", containers=("running",))],
            ACTIVE,
            READY,
            [],
            id="pod-failed-from-outside-keeps-job-until-kubelet-stops-it",
        ),
        pytest.param(
            [pod(phase="Failed", containers=("running",))],
            ACTIVE,
            {},
            [CancelJob(7, "all pods stopped")],
            id="terminal-pod-on-deleted-node-ends-job",
        ),
        pytest.param(
            [pod(deleting=JUST_NOW, containers=("running",))],
            ACTIVE,
            NOT_READY,
            [],
            id="terminating-on-not-ready-node-keeps-job-within-grace",
        ),
        pytest.param(
            [pod(phase="Succeeded"), pod("p1", deleting=JUST_NOW, containers=("running",))],
            ACTIVE,
            READY,
            [],
            id="gang-keeps-job-until-all-pods-stopped",
        ),
        pytest.param([], ACTIVE, READY, [CancelJob(7, "all pods deleted")], id="no-pods-cancels"),
        pytest.param(
            [pod(phase="Succeeded")],
            ACTIVE,
            READY,
            [CancelJob(7, "all pods stopped")],
            id="finalizer-stays-while-job-active",
        ),
        pytest.param(
            [pod(phase="Succeeded")],
            CANCELLED,
            READY,
            [RemoveFinalizer("ns", "p0")],
            id="finalizer-off-once-job-ended",
        ),
        pytest.param(
            [pod(phase="Failed")], GONE, READY, [RemoveFinalizer("ns", "p0")], id="gone-frees-pod"
        ),
        pytest.param([pod()], CANCELLED, READY, [], id="running-pod-keeps-finalizer"),
        pytest.param(
            [pod(deleting=LONG_AGO)],
            CANCELLED,
            READY,
            [RemoveFinalizer("ns", "p0")],
            id="terminating-on-ready-node-left-to-kubelet",
        ),
        pytest.param(
            [pod(deleting=JUST_NOW)],
            CANCELLED,
            NOT_READY,
            [RemoveFinalizer("ns", "p0")],
            id="not-ready-node-within-grace-waits",
        ),
        pytest.param(
            [pod(deleting=LONG_AGO)],
            CANCELLED,
            NOT_READY,
            [
                RemoveFinalizer("ns", "p0"),
                DeletePod(
                    "ns",
                    "p0",
                    "StuckTerminating",
                    "node n1 is gone or NotReady; Slurm job 7 has ended",
                    grace_period_seconds=0,
                ),
            ],
            id="stuck-on-not-ready-node-force-deleted",
        ),
        pytest.param(
            [pod(deleting=LONG_AGO, finalizer=False)],
            GONE,
            {},
            [
                DeletePod(
                    "ns",
                    "p0",
                    "StuckTerminating",
                    "node n1 is gone or NotReady; Slurm job 7 has ended",
                    grace_period_seconds=0,
                )
            ],
            id="stuck-on-deleted-node-force-deleted",
        ),
        pytest.param(
            [pod(deleting=LONG_AGO)],
            ACTIVE,
            {},
            [CancelJob(7, "all pods stopped")],
            id="stuck-but-job-active-cancels-first",
        ),
    ],
)
def test_pods_plan(
    pods_: list[dict[str, Any]], view: SlurmJobStatus, node_map: dict[str, Any], expected: Any
) -> None:
    assert pods.plan(7, pods_, view, node_map, NOW, 300.0) == expected


def sjob(job_id: int, state: str, comment: str, mcs: str = "kubernetes") -> SlurmJob:
    return SlurmJob(
        job_id=job_id,
        name="j",
        state=JobState(primary=state),
        admin_comment=comment,
        mcs_label=mcs,
    )


OURS = '{"pods":["ns/a","ns/b"]}'


@pytest.mark.parametrize(
    ("job", "existing", "expected"),
    [
        pytest.param(
            sjob(1, "RUNNING", OURS),
            {},
            [CancelJob(1, "dangling: its pods are gone from Kubernetes")],
            id="all-pods-gone-cancels",
        ),
        pytest.param(sjob(7, "RUNNING", OURS), {"ns/b": pod("b")}, [], id="one-pod-left-keeps"),
        pytest.param(
            sjob(1, "PENDING", OURS),
            {"ns/a": {"metadata": {"namespace": "ns", "name": "a"}}},
            [],
            id="unlabelled-pod-not-bound-yet-keeps",
        ),
        pytest.param(
            sjob(8, "RUNNING", OURS),
            {"ns/a": pod("a")},
            [CancelJob(8, "dangling: its pods are gone from Kubernetes")],
            id="pod-labelled-for-another-job-does-not-count",
        ),
        pytest.param(sjob(1, "COMPLETED", OURS), {}, [], id="ended-job-ignored"),
        pytest.param(sjob(1, "RUNNING", "user text"), {}, [], id="foreign-comment-ignored"),
        pytest.param(sjob(1, "RUNNING", OURS, mcs="other"), {}, [], id="other-mcs-label-ignored"),
    ],
)
def test_dangling_plan(job: SlurmJob, existing: dict[str, Any], expected: Any) -> None:
    named = dangling.candidates([job], "kubernetes")
    assert dangling.plan(named, {k: existing.get(k) for ks in named.values() for k in ks}) == (
        expected
    )


@pytest.mark.parametrize(
    ("pod_", "node_map", "expected"),
    [
        pytest.param(
            pod(deleting=JUST_NOW, containers=("running",)),
            NOT_READY,
            datetime(2026, 1, 1, 12, 4, 50, tzinfo=UTC),
            id="dead-node-due-at-deletion-plus-stuck-grace",
        ),
        pytest.param(pod(deleting=JUST_NOW, containers=("running",)), READY, None, id="ready"),
        pytest.param(
            pod(deleting=JUST_NOW, containers=("terminated",)), NOT_READY, None, id="stopped"
        ),
        pytest.param(pod(containers=("running",)), NOT_READY, None, id="not-deleted"),
    ],
)
def test_release_due_times_the_recheck_of_a_pod_terminating_on_a_dead_node(
    pod_: dict[str, Any], node_map: dict[str, Any], expected: datetime | None
) -> None:
    assert pods.release_due(pod_, node_map, 300.0) == expected


def het(leader: int, *, states: tuple[str, str] = ("RUNNING", "RUNNING")) -> SlurmJob:
    """A hetjob read by its leader's id: component 0 names ns/a, component 1 ns/b."""
    c1 = sjob(leader + 1, states[1], '{"pods":["ns/b"]}').model_copy(
        update={"het_job_id": leader, "het_job_offset": 1}
    )
    c0 = sjob(leader, states[0], '{"pods":["ns/a"]}')
    return c0.model_copy(
        update={"het_job_id": leader, "het_job_offset": 0, "het_components": (c1,)}
    )


def test_dangling_sweep_never_takes_a_hetjob_component_for_a_stray_job() -> None:
    """The pods carry the leader's id (7): component 8 read alone is not a candidate,
    and the leader stands for the pods of every component."""
    leader = het(7)
    component = leader.het_components[0]
    assert dangling.candidates([component], "kubernetes") == {}
    assert dangling.candidates([leader], "kubernetes") == {7: ("ns/a", "ns/b")}
    only_b = {"ns/a": None, "ns/b": pod("b")}  # component 0's pod gone, component 1's runs
    assert dangling.plan(dangling.candidates([leader], "kubernetes"), only_b) == []


def test_a_hetjob_component_ended_fails_every_pod_then_the_rest_is_cancelled() -> None:
    view = SlurmJobStatus(
        JobKind.ACTIVE, "CANCELLED", "None", component="7+1", component_ended=True
    )
    running = [pod("a"), pod("b")]
    failed = jobs.plan(7, running, view, "fail")
    assert [type(a) for a in failed] == [FailPod, FailPod]
    assert all(a.disruption for a in failed if isinstance(a, FailPod))
    assert "hetjob component 7+1" in failed[0].message  # type: ignore[union-attr]
    # still ACTIVE: no finalizer comes off while a component holds nodes ...
    assert pods.plan(7, [pod("a", "Running")], view, READY, NOW, 300.0) == []
    # ... and once every pod has stopped, the whole hetjob is cancelled
    stopped = [pod("a", "Failed"), pod("b", "Failed")]
    assert pods.plan(7, stopped, view, READY, NOW, 300.0) == [CancelJob(7, "all pods stopped")]
