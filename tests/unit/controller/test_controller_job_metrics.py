"""The controller's ``polled`` job metrics: which jobs a sweep reads, in what order, and what
it summarizes. Slurm is a fake here (pure logic); tests/integration/
test_controller_slurm_metrics.py runs the same against real slurmrestd."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, cast

import pytest

from bridge.config import parse_config
from bridge.kube.client import KubeClient
from bridge.models import GroupId
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import JobState, JobStateItem, SlurmJob, SlurmNode
from bridge.translate import admin_comment
from controller import runtime
from controller.runtime import Controller
from controller.slurm_metrics import JobsSummary

OURS = admin_comment(GroupId(kind="Pod", namespace="ns", name="p", uid="u"), ["ns/p"])


def job(i: int, state: str, part: str = "sb", reason: str = "None", ours: bool = False) -> SlurmJob:
    return SlurmJob(
        job_id=i,
        name=f"j{i}",
        state=JobState(primary=state),
        partition=part,
        state_reason=reason,
        admin_comment=OURS if ours else "",
    )


class FakeSlurm:
    """A job table; records the reads by id; the whole table must never be asked for."""

    def __init__(self, jobs: Iterable[SlurmJob]) -> None:
        self.jobs = {j.job_id: j for j in jobs}
        self.reads: list[list[int]] = []

    async def list_job_states(
        self, job_ids: Sequence[int] | None = None
    ) -> tuple[JobStateItem, ...]:
        ids = job_ids or list(self.jobs)
        return tuple(JobStateItem(job_id=j, state=self.jobs[j].state) for j in ids)

    async def get_jobs(self, job_ids: Iterable[int], *, concurrency: int = 16) -> list[SlurmJob]:
        ids = list(job_ids)
        self.reads.append(ids)
        return [self.jobs[j] for j in ids if j in self.jobs]

    async def list_nodes(self) -> tuple[SlurmNode, ...]:
        return ()

    async def scan_jobs(self, keep: Any) -> tuple[SlurmJob, ...]:
        raise AssertionError("the job table was read")


class Seen:
    def __init__(self) -> None:
        self.jobs: list[JobsSummary] = []

    def jobs_summarized(self, summary: JobsSummary) -> None:
        self.jobs.append(summary)

    def nodes_listed(self, nodes: Iterable[SlurmNode]) -> None:
        pass


def controller(slurm: FakeSlurm, seen: Seen, mode: str = "polled") -> Controller:
    cfg = parse_config({"controller": {"slurmJobMetrics": mode}}, env={})
    return Controller(cfg, cast(SlurmClient, slurm), cast(KubeClient, None), slurm_observer=seen)


async def test_polled_sweeps_read_each_job_once_the_bridges_last_and_never_the_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runtime, "SWEEP_READS_MAX", 3)
    slurm = FakeSlurm(
        [
            job(1, "PENDING", reason="Resources"),
            job(2, "PENDING", part="batch", reason="Priority"),
            job(3, "RUNNING"),
            job(4, "RUNNING", ours=True),  # followed: its pod is labelled
            job(5, "PENDING", reason="JobHeldUser", ours=True),  # followed
            job(9, "COMPLETED"),  # ended before any sweep: never read
        ]
    )
    seen = Seen()
    ctl = controller(slurm, seen)
    ctl.by_job = {4: {"ns/p"}, 5: {"ns/q"}}

    await ctl.sweep_once()  # the cap: the jobs no pod names first
    assert slurm.reads == [[1, 2, 3]]
    first = seen.jobs[-1]
    assert first.by_state == {
        ("sb", "PENDING"): 1,
        ("batch", "PENDING"): 1,
        ("sb", "RUNNING"): 1,
        ("", "RUNNING"): 1,
        ("", "PENDING"): 1,
        ("", "COMPLETED"): 1,
    }
    assert first.placeholders == {"RUNNING": 1, "PENDING": 1}  # followed, not read yet

    await ctl.sweep_once()  # then the bridge's
    assert slurm.reads[1:] == [[4, 5]]
    second = seen.jobs[-1]
    assert second.pending == {
        ("sb", "Resources"): 1,
        ("batch", "Priority"): 1,
        ("sb", "JobHeldUser"): 1,
    }
    assert second.placeholders == {"RUNNING": 1, "PENDING": 1}

    # a job that ends keeps its record while Slurm lists it; gone from the table: dropped
    slurm.jobs[1] = job(1, "COMPLETED")
    del slurm.jobs[2]
    await ctl.sweep_once()
    assert slurm.reads[2:] == [[]]
    assert sorted(ctl.job_facts.facts) == [1, 3, 4, 5]
    third = seen.jobs[-1]
    assert third.by_state[("sb", "COMPLETED")] == 1  # job 1, reason as last read
    assert ("batch", "PENDING") not in third.by_state


@pytest.mark.parametrize("mode", ["table", "off"])
async def test_other_modes_keep_no_records_and_read_no_followed_job(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    slurm = FakeSlurm([job(1, "PENDING"), job(4, "RUNNING", ours=True)])
    seen = Seen()
    ctl = controller(slurm, seen, mode)
    ctl.by_job = {4: {"ns/p"}}
    scanned: list[bool] = []

    async def scan(keep: Any) -> tuple[SlurmJob, ...]:
        scanned.append(True)
        return ()

    monkeypatch.setattr(slurm, "scan_jobs", scan)
    await ctl.sweep_once()
    assert slurm.reads == [[1]]  # the dangling sweep's read only
    assert len(ctl.job_facts) == 0
    assert scanned == ([True] if mode == "table" else [])
    assert len(seen.jobs) == (1 if mode == "table" else 0)
