"""Slurm's preemption seen early (controller/preemption.py) and what the jobs plan makes of
it: the pods fail as disruptions, and the built-in PodGroups of the gang get
DisruptionTarget (PreemptionByScheduler), as kube-scheduler sets it. Pure: tables."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from bridge.slurm.models import JobState, SlurmJob, SlurmPartition
from controller import jobs
from controller.model import DisruptPodGroup, FailPod, JobKind, SlurmJobStatus
from controller.preemption import (
    PREEMPT_READS_PER_POLL,
    grace_warnings,
    next_reads,
    selected_for_preemption,
    watch,
)
from tests.unit.controller.test_controller_plans import pod

NODES = ("kube-node-0", "kube-node-1")
WHEN = datetime(2026, 1, 1, tzinfo=UTC)


def part(
    name: str, tier: int = 1, grace: int = 0, nodes: tuple[str, ...] = NODES
) -> SlurmPartition:
    return SlurmPartition(name=name, nodes=nodes, priority_tier=tier, grace_time_seconds=grace)


def job(state: str, preempt: datetime | None) -> SlurmJob:
    return SlurmJob(job_id=7, name="j", state=JobState(primary=state), preempt_time=preempt)


@pytest.mark.parametrize(
    ("j", "expected"),
    [
        (job("RUNNING", WHEN), True),
        (job("RUNNING", None), False),
        (job("PREEMPTED", WHEN), False),  # over: the poller's state says so
    ],
)
def test_a_running_job_with_a_preempt_time_is_being_preempted(j: SlurmJob, expected: bool) -> None:
    assert selected_for_preemption(j) is expected


def test_preemption_is_watched_only_where_a_bridge_partition_has_a_grace_time() -> None:
    assert watch([part("slurm-bridge", grace=60)], ["slurm-bridge"])
    assert not watch([part("slurm-bridge"), part("other", grace=60)], ["slurm-bridge"])


@pytest.mark.parametrize(
    ("parts", "warned"),
    [
        pytest.param([part("slurm-bridge"), part("urgent", tier=10)], True, id="no-grace"),
        pytest.param(
            [part("slurm-bridge", grace=20), part("urgent", tier=10)], True, id="grace-too-short"
        ),
        pytest.param(
            [part("slurm-bridge", grace=60), part("urgent", tier=10)], False, id="grace-enough"
        ),
        pytest.param([part("slurm-bridge"), part("other")], False, id="same-tier-never-preempts"),
        pytest.param(
            [part("slurm-bridge"), part("urgent", tier=10, nodes=("batch-0",))],
            False,
            id="higher-tier-on-other-nodes",
        ),
    ],
)
def test_the_grace_contract_warning_names_the_partition_and_the_grace_it_needs(
    parts: list[SlurmPartition], warned: bool
) -> None:
    got = grace_warnings(parts, ["slurm-bridge"], 0.25)
    assert bool(got) is warned
    if warned:
        assert "slurm-bridge" in got[0]
        assert "urgent" in got[0]
        assert ">= 31 s" in got[0]


def test_reads_take_turns_over_the_running_jobs() -> None:
    running = list(range(1, 3 * PREEMPT_READS_PER_POLL + 1))
    first, cursor = next_reads(running, 0)
    second, cursor = next_reads(running, cursor)
    third, cursor = next_reads(running, cursor)
    assert first + second + third == running
    again, _ = next_reads(running, cursor)
    assert again == first
    assert next_reads([], 5) == ([], 0)


def test_a_job_selected_for_preemption_fails_its_pods_as_a_disruption_at_once() -> None:
    view = SlurmJobStatus(JobKind.ACTIVE, "RUNNING", preempted=True)
    [action] = jobs.plan(7, [pod()], view, "fail")
    assert isinstance(action, FailPod)
    assert (action.reason, action.disruption) == ("SlurmJobPreempted", True)
    assert jobs.plan(7, [pod()], SlurmJobStatus(JobKind.ACTIVE, "RUNNING"), "fail") == []


# ------------------------------------------------- the gang's built-in PodGroups (#41 item 4)
def gang_pod(name: str, podgroup: str, phase: str = "Running") -> dict[str, Any]:
    """A pod of a built-in PodGroup (``spec.schedulingGroup.podGroupName``)."""
    p = pod(name, phase)
    p["spec"]["schedulingGroup"] = {"podGroupName": podgroup}
    return p


PREEMPTIONS = [
    pytest.param(
        SlurmJobStatus(JobKind.ACTIVE, "RUNNING", preempted=True),
        "Slurm job 7 was selected for preemption",
        id="selected-grace-runs",
    ),
    pytest.param(
        SlurmJobStatus(JobKind.ENDED, "PREEMPTED", "None"),
        "Slurm job 7 ended with state PREEMPTED",
        id="ended-preempted",
    ),
    pytest.param(
        SlurmJobStatus(JobKind.ACTIVE, "PREEMPTED", component="7+1", component_ended=True),
        "Slurm job 7 ended with state PREEMPTED in hetjob component 7+1",
        id="hetjob-component-preempted",
    ),
]


@pytest.mark.parametrize(("view", "said"), PREEMPTIONS)
def test_every_built_in_podgroup_of_a_preempted_gang_is_told_naming_the_slurm_job(
    view: SlurmJobStatus, said: str
) -> None:
    gang = [gang_pod("cpu-0", "cpu"), gang_pod("gpu-0", "gpu"), gang_pod("gpu-1", "gpu")]
    told = [a for a in jobs.plan(7, gang, view, "fail") if isinstance(a, DisruptPodGroup)]
    assert [(a.namespace, a.name) for a in told] == [("ns", "cpu"), ("ns", "gpu")]
    assert all(a.message.startswith(said) for a in told)
    # the pods fail as before, as disruptions
    fails = [a for a in jobs.plan(7, gang, view, "fail") if isinstance(a, FailPod)]
    assert len(fails) == 3
    assert all(a.disruption for a in fails)


@pytest.mark.parametrize(
    "view",
    [
        SlurmJobStatus(JobKind.ENDED, "CANCELLED", "None"),
        SlurmJobStatus(JobKind.ENDED, "NODE_FAIL", "NodeDown"),
        SlurmJobStatus(JobKind.ENDED, "TIMEOUT", "None"),
        SlurmJobStatus(JobKind.ENDED, "COMPLETED", "None"),
        SlurmJobStatus(JobKind.GONE),
        SlurmJobStatus(JobKind.ACTIVE, "RUNNING"),
    ],
    ids=["cancelled", "node-fail", "timeout", "completed", "gone", "running"],
)
def test_only_a_preemption_marks_the_podgroups(view: SlurmJobStatus) -> None:
    plan = jobs.plan(7, [gang_pod("a-0", "a")], view, "fail")
    assert not [a for a in plan if isinstance(a, DisruptPodGroup)]


def test_a_podgroup_is_told_once_per_job_even_after_its_pods_stopped() -> None:
    view = SlurmJobStatus(JobKind.ENDED, "PREEMPTED", "None")
    stopped = [gang_pod("a-0", "a", "Failed"), gang_pod("b-0", "b", "Failed")]
    # the pods failed already (an earlier write of the PodGroup's condition failed): told
    assert jobs.plan(7, stopped, view, "fail") == [
        DisruptPodGroup("ns", "a", "Slurm job 7 ended with state PREEMPTED"),
        DisruptPodGroup("ns", "b", "Slurm job 7 ended with state PREEMPTED"),
    ]
    # once written, never again for this job
    assert jobs.plan(7, stopped, view, "fail", {("ns", "a"), ("ns", "b")}) == []


def test_pods_of_no_built_in_podgroup_mark_nothing() -> None:
    view = SlurmJobStatus(JobKind.ENDED, "PREEMPTED", "None")
    assert not [
        a for a in jobs.plan(7, [pod("lone")], view, "delete") if isinstance(a, DisruptPodGroup)
    ]
