"""The scheduler's Slurm poll loop (scheduler/polling.py): during an outage each tick pings,
and the cycle hears once when Slurm answers again; an unreachable Slurm in a tick is
counted and handed to the cycle; the loop never touches the work queue itself. The plans'
loop beside it: its read of Slurm's job table never holds up a tick, and takes at most
PLANS_READ_SHARE of the time (counted in reads on a fake clock, never timed)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, cast

import pytest

from bridge.config import parse_config
from bridge.errors import SlurmUnavailable
from bridge.kube.client import KubeClient
from bridge.loops import LoopGuard
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import JobState, JobStateItem, PingResult, SlurmJob, SlurmNode
from bridge.translate import GroupRef, TranslateSettings
from scheduler.metrics import SchedulerMetrics
from scheduler.outage import SlurmReachability
from scheduler.poller import JobPoller
from scheduler.polling import PLANS_READ_SHARE, SlurmPolling
from scheduler.slurm_state import SlurmState
from scheduler.state import GroupState, KubeState
from tests.fake_clock import FakeClock
from tests.unit.scheduler.test_replanned import FakeSlurm as FakeJobTable

CFG = parse_config({"managedNamespaces": ["team"], "mcsLabel": "k8s"}, env={})


class FakeSlurm:
    def __init__(self, responding: bool) -> None:
        self.responding = responding
        self.pings = 0

    async def ping(self) -> list[PingResult]:
        self.pings += 1
        return [PingResult(hostname="ctld", responding=self.responding)]


class Told:
    """What the loop told the cycle."""

    def __init__(self) -> None:
        self.jobs: list[SlurmJob] = []
        self.unreachable: list[SlurmUnavailable] = []
        self.reachable = 0

    def job(self, job: SlurmJob) -> None:
        self.jobs.append(job)

    async def down(self, error: SlurmUnavailable) -> None:
        self.unreachable.append(error)

    def back(self) -> None:
        self.reachable += 1


def _polling(
    slurm: FakeSlurm | PendingSlurm,
    clock: FakeClock,
    outage: SlurmReachability,
    told: Told,
    state: SlurmState | None = None,
    poller: JobPoller | None = None,
) -> tuple[SlurmPolling, SchedulerMetrics]:
    metrics = SchedulerMetrics()
    client = cast(SlurmClient, slurm)
    poller = poller or JobPoller(client, told.job)
    polling = SlurmPolling(
        CFG,
        client,
        clock,
        poller,
        # None: no resync falls due on the fake clock here
        cast(SlurmState, state),
        outage,
        metrics,
        LoopGuard("scheduler-poll", clock, metrics.loop_failed),
        on_job=told.job,
        on_unreachable=told.down,
        on_reachable=told.back,
    )
    return polling, metrics


def _err() -> SlurmUnavailable:
    return SlurmUnavailable("jobs_state: cannot reach slurmrestd", endpoint="jobs_state")


async def _turns(n: int = 50) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def _stop(task: asyncio.Task[Any]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_during_an_outage_a_tick_pings_and_the_cycle_hears_once_that_slurm_is_back() -> None:
    clock, told, outage = FakeClock(), Told(), SlurmReachability()
    outage.failed(_err())
    slurm = FakeSlurm(responding=True)
    polling, _ = _polling(slurm, clock, outage, told)
    task = asyncio.create_task(polling.run_forever())
    await _turns()
    for _ in range(5):
        clock.advance(1.0)
        await _turns()
    assert told.reachable == 1
    assert outage.down is None
    assert slurm.pings == 1  # no ping once Slurm answers
    await _stop(task)


async def test_a_ping_no_controller_answers_keeps_the_outage_and_tells_the_cycle_nothing() -> None:
    clock, told, outage = FakeClock(), Told(), SlurmReachability()
    outage.failed(_err())
    slurm = FakeSlurm(responding=False)
    polling, _ = _polling(slurm, clock, outage, told)
    task = asyncio.create_task(polling.run_forever())
    for _ in range(3):
        await _turns()
        clock.advance(1.0)
    await _turns()
    assert told.reachable == 0
    assert outage.down is not None
    assert slurm.pings >= 2  # every tick of the outage
    await _stop(task)


async def test_an_unreachable_slurm_in_a_tick_is_counted_and_handed_to_the_cycle() -> None:
    clock, told, outage = FakeClock(), Told(), SlurmReachability()
    polling, metrics = _polling(FakeSlurm(responding=True), clock, outage, told)

    async def unreachable() -> int:
        raise _err()

    polling.poller.run_once = unreachable  # type: ignore[method-assign]
    task = asyncio.create_task(polling.run_forever())
    await _turns()
    assert [str(e) for e in told.unreachable] == [str(_err())]
    errors = metrics.rest_errors.labels("jobs_state", "0")._value.get()
    assert errors == 1
    await _stop(task)


class PendingSlurm(FakeJobTable):
    """Slurm with pending jobs: the poll's state reads counted; the plans' read of the job
    table (``scan_jobs``) counted when asked (``asked``) and answered (``scans``), and
    either held until ``release`` is set or taking ``read_seconds`` of the fake clock."""

    def __init__(self, clock: FakeClock, jobs: Sequence[SlurmJob]) -> None:
        super().__init__()
        self.clock = clock
        self.jobs = list(jobs)
        self.state_reads = 0
        self.asked = 0
        self.read_seconds = 0.0
        self.release: asyncio.Event | None = None

    async def list_job_states(self, job_ids: Sequence[int] | None = None) -> list[JobStateItem]:
        self.state_reads += 1
        return [JobStateItem(job_id=j.job_id, state=j.state) for j in self.jobs]

    async def list_nodes(self) -> list[SlurmNode]:  # the poll loop's resync
        return []

    async def scan_jobs(self, keep: Callable[[SlurmJob], bool], **kw: Any) -> tuple[SlurmJob, ...]:
        self.asked += 1
        if self.release is not None:
            await self.release.wait()
        self.clock.advance(self.read_seconds)  # the read's length, on the fake clock
        return await super().scan_jobs(keep, **kw)


def _following(clock: FakeClock, slurm: PendingSlurm) -> tuple[SlurmState, JobPoller, Told]:
    """A SlurmState following each of ``slurm``'s jobs (pending, reason Priority: planned
    by Slurm, not held) for a group of its own."""
    told = Told()
    state = KubeState(CFG, TranslateSettings.from_config(CFG), clock)
    poller = JobPoller(cast(SlurmClient, slurm), told.job)
    s = SlurmState(cast(KubeClient, None), cast(SlurmClient, slurm), clock, state, poller)
    for job in slurm.jobs:
        ref = GroupRef(kind="PodGroup", namespace="team", name=f"g{job.job_id}")
        g = state.groups[ref.key] = GroupState(ref, job=job)
        s.watch(g, job)
    return s, poller, told


async def _run_for(clock: FakeClock, seconds: float, turns: int = 10) -> None:
    """Let ``seconds`` pass on ``clock`` in poll intervals, the loops turning after each."""
    step = CFG.slurm_poll_interval_seconds
    end = clock.monotonic() + seconds
    while clock.monotonic() < end:
        clock.advance(step)
        await _turns(turns)


def _pending(n: int) -> list[SlurmJob]:
    return [
        SlurmJob(
            job_id=i,
            name=f"j{i}",
            state=JobState(primary="PENDING"),
            state_reason="Priority",
            partition="p",
        )
        for i in range(1, n + 1)
    ]


async def test_the_poll_ticks_go_on_while_the_plans_read_of_the_job_table_is_in_flight() -> None:
    # A read of Slurm's whole job table took minutes on a loaded sandbox; in the poll loop
    # it held up every tick behind it (2,000 pending pods: 5 minutes to show their reasons).
    clock = FakeClock()
    slurm = PendingSlurm(clock, _pending(3))
    slurm.release = asyncio.Event()  # the job table's read never ends in this test
    state, poller, told = _following(clock, slurm)
    polling, metrics = _polling(slurm, clock, SlurmReachability(), told, state, poller)
    guard = LoopGuard("scheduler-plans", clock, metrics.loop_failed)
    tasks = [
        asyncio.create_task(polling.run_forever()),
        asyncio.create_task(polling.plans_forever(guard)),
    ]
    await _run_for(clock, 40.0)  # the refresh (30 s) fell due, and its read hangs
    assert slurm.asked == 1
    ticks = slurm.state_reads
    await _run_for(clock, 20.0)
    assert (slurm.asked, slurm.scans) == (1, 0)  # the one read, still in flight
    assert slurm.state_reads >= ticks + 19  # a tick a second meanwhile (idle: 1 s apart)
    for task in tasks:
        await _stop(task)


@pytest.mark.parametrize("read_seconds", [1.0, 20.0, 60.0])
async def test_the_plans_read_takes_at_most_its_share_of_the_time(read_seconds: float) -> None:
    # The refresh's interval was counted from a read's start: a read longer than the
    # interval (30 s) was followed at once by the next, the job table read back to back.
    clock = FakeClock()
    slurm = PendingSlurm(clock, _pending(3))
    slurm.read_seconds = read_seconds
    state, poller, told = _following(clock, slurm)
    polling, metrics = _polling(slurm, clock, SlurmReachability(), told, state, poller)
    task = asyncio.create_task(
        polling.plans_forever(LoopGuard("scheduler-plans", clock, metrics.loop_failed))
    )
    hour = 3600.0
    await _run_for(clock, hour, turns=3)
    refresh = CFG.scheduler.expected_start_refresh_seconds
    # every read is followed by the refresh's interval, or by 1/share - 1 of its length
    cycle = read_seconds + max(refresh, read_seconds * (1 / PLANS_READ_SHARE - 1))
    assert slurm.scans <= hour / cycle + 1
    assert slurm.scans >= hour / cycle - 2  # and the plans are still read
    assert slurm.scans * read_seconds <= PLANS_READ_SHARE * hour + read_seconds
    await _stop(task)


async def test_a_failed_plans_read_is_counted_and_no_outage_the_next_refresh_its_retry() -> None:
    clock = FakeClock()
    slurm = PendingSlurm(clock, _pending(2))
    state, poller, told = _following(clock, slurm)
    polling, metrics = _polling(slurm, clock, SlurmReachability(), told, state, poller)
    reads = slurm.scans

    async def slow_and_cut(*_: Any, **__: Any) -> tuple[SlurmJob, ...]:
        nonlocal reads
        reads += 1
        clock.advance(50.0)  # slurmrestd took 50 s, then the answer was cut
        raise SlurmUnavailable("jobs_get: cannot reach slurmrestd", endpoint="jobs_get")

    slurm.scan_jobs = slow_and_cut  # type: ignore[method-assign]
    task = asyncio.create_task(
        polling.plans_forever(LoopGuard("scheduler-plans", clock, metrics.loop_failed))
    )
    await _run_for(clock, 31.0)
    assert reads == 1
    assert told.unreachable == []  # the poll loop's tick tells an outage, not this read
    assert metrics.rest_errors.labels("jobs_get", "0")._value.get() == 1
    await _run_for(clock, 150.0)
    assert reads == 1  # 50 s of reading: at least 200 s before the next
    await _run_for(clock, 60.0)
    assert reads == 2
    await _stop(task)
