"""The keyed work queue: dedup, one worker per key, requeue-after-done, capped backoff on
the clock (the same capped formula as the watches' reconnects)."""

import asyncio
import random

import pytest

from bridge.clock import backoff_delay
from bridge.errors import BridgeError, SlurmUnavailable
from bridge.kube.watch import Backoff
from bridge.workqueue import WorkQueue, run_worker
from tests.fake_clock import FakeClock
from tests.waiting import eventually


async def test_a_key_is_queued_once_however_often_it_is_added() -> None:
    q: WorkQueue[str] = WorkQueue(FakeClock())
    for _ in range(3):
        q.add("g1")
    q.add("g2")
    assert len(q) == 2
    assert await q.get() == "g1"
    assert await q.get() == "g2"


@pytest.mark.parametrize("lane", ["add", "add_idle"])
async def test_a_key_added_while_processing_comes_back_only_after_done(lane: str) -> None:
    # either lane: a key being processed is never handed to a second worker
    q: WorkQueue[str] = WorkQueue(FakeClock())
    q.add("g1")
    assert await q.get() == "g1"
    getattr(q, lane)("g1")
    assert len(q) == 0  # not handed to a second worker
    assert not q.idle()
    q.done("g1")
    assert len(q) == 1
    assert await q.get() == "g1"
    q.done("g1")
    assert q.idle()


async def test_the_idle_lane_is_served_only_when_nothing_else_is_ready() -> None:
    q: WorkQueue[str] = WorkQueue(FakeClock())
    q.add_idle("restored-1")
    q.add_idle("restored-2")
    q.add("new")
    assert len(q) == 3
    assert await q.get() == "new"  # added last, served first
    q.add("after-sweep")
    assert await q.get() == "after-sweep"
    assert [await q.get(), await q.get()] == ["restored-1", "restored-2"]
    assert len(q) == 0


async def test_an_add_moves_an_idle_key_to_the_ready_lane_and_it_is_served_once() -> None:
    q: WorkQueue[str] = WorkQueue(FakeClock())
    for key in ("a", "b", "c"):
        q.add_idle(key)
    q.add("c")  # an event of that group: due now
    q.add_idle("c")  # queued already: a no-op
    assert len(q) == 3
    assert [await q.get(), await q.get(), await q.get()] == ["c", "a", "b"]
    for key in ("a", "b", "c"):
        q.done(key)
    assert q.idle()
    q.add("x")
    assert await q.get() == "x"  # c's old idle entry is not served again
    assert len(q) == 0


async def test_tuple_keys_work_as_the_controller_uses_them() -> None:
    q: WorkQueue[tuple[str, str]] = WorkQueue(FakeClock())
    q.add(("job", "1"))
    q.add(("job", "1"))
    q.add(("node", "n1"))
    assert [await q.get(), await q.get()] == [("job", "1"), ("node", "n1")]


async def test_backoff_doubles_on_the_injected_clock_and_forget_resets() -> None:
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(clock, base_backoff=1.0, max_backoff=4.0)
    timers = asyncio.create_task(q.run_timers())
    assert [q.add_rate_limited("g") for _ in range(4)] == [1.0, 2.0, 4.0, 4.0]
    q.forget("g")
    assert q.add_rate_limited("g") == 1.0
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    assert not getter.done()
    clock.advance(1.0)
    assert await asyncio.wait_for(getter, 1) == "g"
    q.close()
    await timers


async def test_a_caller_base_starts_slower_and_shares_the_keys_failure_count() -> None:
    q: WorkQueue[str] = WorkQueue(FakeClock(), base_backoff=0.05, max_backoff=300.0)
    assert q.add_rate_limited("g", base=5.0) == 5.0
    assert q.add_rate_limited("g") == 0.1  # second failure of the key, queue's own base
    assert q.add_rate_limited("g", base=5.0) == 20.0
    assert q.failures("g") == 3


async def test_ten_thousand_failures_stay_at_the_cap_and_never_overflow() -> None:
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(clock, base_backoff=0.05, max_backoff=300.0)
    timers = asyncio.create_task(q.run_timers())
    delays = [q.add_rate_limited("g") for _ in range(10_000)]
    assert delays[0] == 0.05
    assert delays[-1] == 300.0
    assert max(delays) == 300.0
    assert q.failures("g") == 10_000
    # the key still comes back once its (capped) delay has passed on the clock
    getter = asyncio.create_task(q.get())
    clock.advance(300.0)
    assert await asyncio.wait_for(getter, 1) == "g"
    q.close()
    await timers


def test_the_backoff_formula_is_defined_for_any_failure_count() -> None:
    assert backoff_delay(0.5, 0, 30.0) == 0.5
    assert backoff_delay(0.5, 3, 30.0) == 4.0
    assert backoff_delay(0.5, 1_000_000, 30.0) == 30.0


async def test_close_wakes_waiting_workers_with_none() -> None:
    q: WorkQueue[str] = WorkQueue(FakeClock())
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.close()
    assert await getter is None


def test_a_watch_failing_thousands_of_times_in_a_row_waits_at_most_its_cap() -> None:
    rng = random.Random(1)
    backoff = Backoff(base=0.5, maximum=30.0)
    assert backoff.delay(5_000, rng) <= 30.0


async def test_a_worker_without_failed_leaves_requeueing_to_process_and_ends_on_a_raise() -> None:
    """The scheduler's cycle requeues its own failures (its outcome): the shared worker
    loop neither requeues nor swallows what such a process raises."""
    q: WorkQueue[str] = WorkQueue(FakeClock())
    seen: list[str] = []

    async def process(key: str) -> None:
        seen.append(key)
        if key == "bad":
            raise RuntimeError("a bug")

    q.add("ok")
    q.add("bad")
    with pytest.raises(RuntimeError):
        await run_worker(q, process)
    assert seen == ["ok", "bad"]
    assert q.failures("bad") == 0  # not requeued by the worker
    assert q.idle()  # both marked done


async def test_run_worker_retries_a_failed_key_after_its_backoff_and_forgets_it_on_success() -> (
    None
):
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(clock, base_backoff=0.5)
    tries: list[str] = []
    told: list[tuple[str, str, float]] = []

    async def process(key: str) -> None:
        tries.append(key)
        if len(tries) == 1:
            raise SlurmUnavailable("down")

    async def failed(key: str, e: Exception, retry_in: float) -> None:
        told.append((key, str(e), retry_in))

    worker = asyncio.create_task(
        run_worker(q, process, failed, retry=(BridgeError,), forget_on_success=True)
    )
    timers = asyncio.create_task(q.run_timers())
    q.add("g")
    await eventually(lambda: told, what="the failure told")
    assert told == [("g", "down", 0.5)]
    assert q.failures("g") == 1
    clock.advance(0.5)
    await eventually(lambda: len(tries) == 2 and q.idle(), what="the retry")
    assert q.failures("g") == 0  # forgotten after the success
    q.close()
    await worker
    timers.cancel()


async def test_run_worker_ends_on_an_error_it_does_not_retry_and_marks_the_key_done() -> None:
    q: WorkQueue[str] = WorkQueue(FakeClock())

    async def process(key: str) -> None:
        raise KeyError(key)

    async def failed(key: str, e: Exception, retry_in: float) -> None:
        raise AssertionError("not told: not retried")

    q.add("g")
    with pytest.raises(KeyError):
        await run_worker(q, process, failed, retry=(BridgeError,))
    assert q.idle()
