"""The keyed work queue: dedup, one worker per key, requeue-after-done, backoff on the clock."""

import asyncio

from bridge.clock import FakeClock
from scheduler.queue import WorkQueue


async def test_a_key_is_queued_once_however_often_it_is_added() -> None:
    q = WorkQueue(FakeClock())
    for _ in range(3):
        q.add("g1")
    q.add("g2")
    assert len(q) == 2
    assert await q.get() == "g1"
    assert await q.get() == "g2"


async def test_a_key_added_while_processing_comes_back_only_after_done() -> None:
    q = WorkQueue(FakeClock())
    q.add("g1")
    assert await q.get() == "g1"
    q.add("g1")
    assert len(q) == 0  # not handed to a second worker
    q.done("g1")
    assert await q.get() == "g1"


async def test_backoff_doubles_on_the_injected_clock_and_forget_resets() -> None:
    clock = FakeClock()
    q = WorkQueue(clock, base_backoff=1.0, max_backoff=4.0)
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


async def test_close_wakes_waiting_workers_with_none() -> None:
    q = WorkQueue(FakeClock())
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.close()
    assert await getter is None
