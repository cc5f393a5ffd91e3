"""The keyed work queue: no duplicates, one worker per key, changes during work not lost."""

from __future__ import annotations

from controller.queue import WorkQueue


async def test_a_key_added_twice_while_waiting_is_processed_once() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("a")
    q.add("b")
    assert len(q) == 2
    assert await q.get() == "a"
    assert await q.get() == "b"


async def test_a_key_added_while_processing_waits_for_done_then_comes_back() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    key = await q.get()
    q.add("a")  # changed while a worker holds it: must not be handed to a second worker
    assert len(q) == 0
    q.done(key)
    assert len(q) == 1
    assert await q.get() == "a"
    q.done("a")
    assert q.idle()
