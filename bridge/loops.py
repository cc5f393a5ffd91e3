"""Forever-loops that do not die on an unexpected exception.

Every worker and forever-loop of the scheduler, the controller and the webhook runs each
step inside a :class:`LoopGuard`: a step that raises anything but cancellation (or
``KeyboardInterrupt``/``SystemExit``) is logged (``loop_failed``: the loop's name, the
error's kind and text; with its traceback when it is not a :class:`BridgeError`),
counted (``slurm_bridge_loop_failures_total{loop}``, through the ``count`` callback the
component's metrics give) and followed by a capped exponential backoff on the injected
clock, so a bug or a bad input costs one log line per try, never the component.

The loops' names are fixed in code (a metric label never comes from input).
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable, Coroutine
from types import TracebackType
from typing import Any, TypeVar

from bridge.clock import Clock, backoff_delay
from bridge.errors import BridgeError
from bridge.logging import get_logger

log = get_logger("loops")

LOOP_BACKOFF_BASE_SECONDS = 1.0
LOOP_BACKOFF_MAX_SECONDS = 60.0

LoopCounter = Callable[[str], None]
T = TypeVar("T")


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """uvloop's event loop (libuv) when it is installed (a dependency of the bridge), else
    asyncio's own. The scheduler's CPU per pod is mostly the event loop, its sockets and
    aiohttp's request path; on uvloop the same work costs less (docs/benchmarks.md, "The
    cost of a pod, paired")."""
    try:
        import uvloop
    except ImportError:  # an environment set up before the dependency came
        return asyncio.new_event_loop
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on :func:`event_loop_factory`'s loop: how each component's
    ``main`` runs. What is alive by then (the modules: ~110,000 objects) is frozen out of
    the garbage collector's reach: a full collection, which holds the loop, then walks only
    what the component made since (65 ms -> a few, measured on the scheduler's imports)."""
    gc.freeze()
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        return runner.run(main)


async def gather(*works: Awaitable[T], return_exceptions: bool = False) -> list[T | BaseException]:
    """``asyncio.gather(*works, return_exceptions=...)``, but ONE work is awaited directly:
    gather wraps every work in a Task of its own, about 7 us of CPU a call even for one
    (measured under uvloop), and most groups are one pod, whose link, Binding and event
    would each pay it. The answers are the same: the results in order, or with
    ``return_exceptions`` a work's ``Exception`` in its place. (A lone work's own
    cancellation is raised rather than returned, as the caller's would be: only an outer
    cancellation cancels a lone work here.)"""
    if len(works) != 1:
        return await asyncio.gather(*works, return_exceptions=return_exceptions)
    if not return_exceptions:
        return [await works[0]]
    try:
        return [await works[0]]
    except Exception as e:
        return [e]


def _no_count(loop: str) -> None:
    del loop


class LoopGuard:
    """The failure policy of one loop. Use ``async with guard:`` around one step: an
    error is logged, counted and slept off (capped backoff), then swallowed; a step that
    ends well resets the backoff. :meth:`failed` does the same without sleeping, for a
    worker whose key has a backoff of its own (the work queue's)."""

    def __init__(
        self,
        name: str,
        clock: Clock,
        count: LoopCounter | None = None,
        *,
        base_seconds: float = LOOP_BACKOFF_BASE_SECONDS,
        max_seconds: float = LOOP_BACKOFF_MAX_SECONDS,
    ) -> None:
        self.name = name
        self.clock = clock
        self.count = count or _no_count
        self.base_seconds = base_seconds
        self.max_seconds = max_seconds
        self.failures = 0  # in a row
        self.total = 0

    def failed(self, error: BaseException, **context: object) -> float:
        """Log and count ``error``; returns the backoff before the next try."""
        self.failures += 1
        self.total += 1
        self.count(self.name)
        delay = backoff_delay(self.base_seconds, self.failures - 1, self.max_seconds)
        fields = {
            "loop": self.name,
            "kind": type(error).__name__,
            "error": str(error)[:500],
            "retry_in": delay,
            **context,
        }
        if isinstance(error, BridgeError):
            log.warning("loop_failed", **fields)
        else:
            log.error("loop_failed", exc_info=error, **fields)
        return delay

    def ok(self) -> None:
        self.failures = 0

    async def __aenter__(self) -> LoopGuard:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        if exc is None:
            self.ok()
            return False
        if not isinstance(exc, Exception):
            return False  # cancellation, KeyboardInterrupt, SystemExit: let it end the loop
        await self.clock.sleep(self.failed(exc))
        return True
