"""The job poller's pure pacing: one state request per tick, reads only for changes and
(capped) pending-reason refreshes, idle back-off. Slurm is a fake here (pure logic); the
e2e tests and tests/bench/scheduler.py run it against real slurmrestd."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from bridge.clock import IDLE_INTERVAL_MAX
from bridge.errors import SlurmNotFound
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import JobState, JobStateItem, SlurmJob
from scheduler.poller import REASON_BUDGET, REASON_REFRESH_AT, JobPoller


def job(job_id: int, state: str = "PENDING", reason: str = "None") -> SlurmJob:
    return SlurmJob(
        job_id=job_id, name=f"j{job_id}", state=JobState(primary=state), state_reason=reason
    )


class FakeSlurm:
    """Job states and full reads from a table; counts the requests."""

    def __init__(self) -> None:
        self.jobs: dict[int, SlurmJob] = {}
        self.state_requests = 0
        self.reads: list[int] = []

    async def list_job_states(
        self, job_ids: Sequence[int] | None = None
    ) -> tuple[JobStateItem, ...]:
        self.state_requests += 1
        ids = job_ids if job_ids else list(self.jobs)
        return tuple(
            JobStateItem(job_id=j, state=self.jobs[j].state) for j in ids if j in self.jobs
        )

    async def get_job(self, job_id: int) -> SlurmJob:
        self.reads.append(job_id)
        if job_id not in self.jobs:
            raise SlurmNotFound(f"job {job_id} not found", status=404)
        return self.jobs[job_id]


def poller(slurm: FakeSlurm) -> tuple[JobPoller, list[SlurmJob]]:
    seen: list[SlurmJob] = []
    return JobPoller(cast(SlurmClient, slurm), seen.append), seen


async def test_one_state_request_per_tick_and_no_read_while_nothing_changes() -> None:
    slurm = FakeSlurm()
    p, seen = poller(slurm)
    for i in range(50):
        slurm.jobs[i] = job(i, reason="Resources")
        p.watch(slurm.jobs[i])
    for _ in range(5):
        await p.run_once()
    assert slurm.state_requests == 5
    assert slurm.reads == []
    assert seen == []


async def test_a_state_change_is_read_in_full_and_reported() -> None:
    slurm = FakeSlurm()
    p, seen = poller(slurm)
    slurm.jobs[7] = job(7, reason="Resources")
    p.watch(slurm.jobs[7])
    slurm.jobs[7] = job(7, state="RUNNING", reason="None")
    assert await p.run_once() == 1
    assert [j.job_id for j in seen] == [7]
    assert list(p.watched) == []  # running: no longer watched


async def test_a_job_without_a_reason_is_re_read_only_at_the_refresh_ages() -> None:
    slurm = FakeSlurm()
    p, _ = poller(slurm)
    slurm.jobs[1] = job(1)
    p.watch(slurm.jobs[1])
    read_at = []
    for tick in range(1, REASON_REFRESH_AT[-1] + 3):
        before = len(slurm.reads)
        await p.run_once()
        if len(slurm.reads) > before:
            read_at.append(tick)
    assert tuple(read_at) == REASON_REFRESH_AT
    assert not p.awaits_reason(1)


async def test_a_burst_of_new_pending_jobs_never_becomes_per_job_polling() -> None:
    slurm = FakeSlurm()
    p, _ = poller(slurm)
    burst = 10 * REASON_BUDGET
    for i in range(burst):
        slurm.jobs[i] = job(i)
        p.watch(slurm.jobs[i])
    per_tick = []
    for _ in range(REASON_REFRESH_AT[0] + 12):
        before = len(slurm.reads)
        await p.run_once()
        per_tick.append(len(slurm.reads) - before)
    assert max(per_tick) <= REASON_BUDGET
    # the budget goes round: every job got its first refresh before any got a second
    assert len(set(slurm.reads[:burst])) == burst


async def test_state_changes_are_read_even_when_the_reason_budget_is_spent() -> None:
    slurm = FakeSlurm()
    p, seen = poller(slurm)
    for i in range(3 * REASON_BUDGET):
        slurm.jobs[i] = job(i)
        p.watch(slurm.jobs[i])
    for _ in range(REASON_REFRESH_AT[0] - 1):
        await p.run_once()
    slurm.jobs[999] = job(999, reason="Priority")
    p.watch(slurm.jobs[999])
    slurm.jobs[999] = job(999, state="RUNNING")
    await p.run_once()  # the reason refreshes fall due at this tick too
    assert 999 in [j.job_id for j in seen]


async def test_idle_ticks_back_off_to_the_maximum_and_news_resets_the_pace() -> None:
    slurm = FakeSlurm()
    p, _ = poller(slurm)
    slurm.jobs[1] = job(1, reason="Resources")
    p.watch(slurm.jobs[1])
    base = 0.05
    intervals: list[float] = []
    for _ in range(8):
        await p.run_once()
        intervals.append(p.next_interval(base))
    assert intervals[0] == base  # the watch was news
    assert intervals == sorted(intervals)
    assert intervals[-1] == IDLE_INTERVAL_MAX
    slurm.jobs[2] = job(2, reason="Resources")
    p.watch(slurm.jobs[2])
    assert p.has_news
    await p.run_once()
    assert p.next_interval(base) == base


async def test_nothing_watched_means_no_request() -> None:
    slurm = FakeSlurm()
    p, _ = poller(slurm)
    assert await p.run_once() == 0
    assert slurm.state_requests == 0


async def test_a_watched_job_slurm_no_longer_knows_is_reported_gone_once() -> None:
    slurm = FakeSlurm()
    gone: list[int] = []
    seen: list[SlurmJob] = []
    p = JobPoller(cast(SlurmClient, slurm), seen.append, gone.append)
    slurm.jobs[1] = job(1, reason="Resources")
    p.watch(slurm.jobs[1])
    p.watch(job(2, reason="Resources"))  # purged: not in Slurm's table
    await p.run_once()
    await p.run_once()
    assert gone == [2]
    assert slurm.reads == [2]
    assert list(p.watched) == [1]
    assert seen == []
