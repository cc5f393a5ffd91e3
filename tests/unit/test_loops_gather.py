"""bridge.loops.gather answers what asyncio.gather answers, for no, one and many works,
with and without return_exceptions: a lone pod's link, Binding and event awaited
directly (no Task) come to the same outcome."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from bridge.errors import KubeConflict, KubeError
from bridge.loops import gather


def _works(spec: str) -> list[Callable[[], Awaitable[int]]]:
    """One work per letter: "o" answers its index, "x" raises a KubeConflict naming it."""

    def make(i: int, kind: str) -> Callable[[], Awaitable[int]]:
        async def work() -> int:
            await asyncio.sleep(0)
            if kind == "x":
                raise KubeConflict(f"work {i}")
            return i

        return work

    return [make(i, k) for i, k in enumerate(spec)]


def _shape(results: list[Any]) -> list[object]:
    return [(type(r).__name__, str(r)) if isinstance(r, BaseException) else r for r in results]


@pytest.mark.parametrize("spec", ["", "o", "x", "oo", "ox", "xo", "xx", "oxo"])
async def test_gather_with_exceptions_returned_answers_as_asyncio_gather(spec: str) -> None:
    ours = await gather(*(w() for w in _works(spec)), return_exceptions=True)
    theirs = await asyncio.gather(*(w() for w in _works(spec)), return_exceptions=True)
    assert _shape(ours) == _shape(list(theirs))


@pytest.mark.parametrize("spec", ["", "o", "x", "oo", "ox", "xo", "oxo"])
async def test_gather_raising_answers_or_raises_as_asyncio_gather(spec: str) -> None:
    async def outcome(run: Callable[[], Awaitable[list[Any]]]) -> object:
        try:
            return _shape(await run())
        except KubeError as e:
            return ("raised", str(e))

    ours = await outcome(lambda: gather(*(w() for w in _works(spec))))
    theirs = await outcome(lambda: asyncio.gather(*(w() for w in _works(spec))))
    assert ours == theirs


async def test_gather_of_one_work_makes_no_task() -> None:
    tasks: list[int] = []

    async def work() -> str:
        tasks.append(len(asyncio.all_tasks()))
        return "done"

    before = len(asyncio.all_tasks())
    assert await gather(work()) == ["done"]
    assert await gather(work(), return_exceptions=True) == ["done"]
    assert tasks == [before, before]


async def test_gather_of_one_work_lets_an_outer_cancellation_through() -> None:
    started = asyncio.Event()

    async def slow() -> None:
        started.set()
        await asyncio.sleep(60)

    task = asyncio.ensure_future(gather(slow(), return_exceptions=True))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
