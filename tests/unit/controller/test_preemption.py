"""Slurm's preemption seen early (controller/preemption.py) and what the jobs plan makes of
it. Pure: tables."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bridge.slurm.models import JobState, SlurmJob, SlurmPartition
from controller import jobs
from controller.model import FailPod, JobKind, SlurmJobStatus
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
