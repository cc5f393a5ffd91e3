"""The scheduler's Slurm poll loop (scheduler/polling.py): during an outage each tick pings,
and the cycle hears once when Slurm answers again; an unreachable Slurm in a tick is
counted and handed to the cycle; the loop never touches the work queue itself."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from bridge.config import parse_config
from bridge.errors import SlurmUnavailable
from bridge.loops import LoopGuard
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import PingResult, SlurmJob
from scheduler.metrics import SchedulerMetrics
from scheduler.outage import SlurmReachability
from scheduler.poller import JobPoller
from scheduler.polling import SlurmPolling
from scheduler.slurm_state import SlurmState
from tests.fake_clock import FakeClock

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
    slurm: FakeSlurm, clock: FakeClock, outage: SlurmReachability, told: Told
) -> tuple[SlurmPolling, SchedulerMetrics]:
    metrics = SchedulerMetrics()
    client = cast(SlurmClient, slurm)
    poller = JobPoller(client, told.job)
    polling = SlurmPolling(
        CFG,
        client,
        clock,
        poller,
        cast(SlurmState, None),  # no resync or replan falls due on the fake clock here
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
