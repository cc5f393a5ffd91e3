"""THE way tests and benchmarks wait for a condition: poll it until it holds, with a deadline
(never a fixed sleep standing in for "it has probably happened by now")."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any


async def eventually(
    check: Callable[[], Any | Awaitable[Any]],
    *,
    within: float = 30.0,
    what: str = "condition",
    every: float = 0.05,
) -> Any:
    """Call ``check`` (plain or async) every ``every`` seconds until it returns something
    truthy, and return that; AssertionError naming ``what`` after ``within`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        last = check()
        if inspect.isawaitable(last):
            last = await last
        if last:
            return last
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {within:g} s waiting for {what}; last: {last!r}")
        await asyncio.sleep(every)
