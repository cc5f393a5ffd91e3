"""Injected time. Components take a Clock; tests pass a fake one (tests/fake_clock.py) and
never sleep for real."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def now(self) -> datetime: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock."""

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


IDLE_INTERVAL_MAX = 1.0  # seconds between polls once nothing moves
# Once nothing moves, a poll of several requests (4,000 job ids each) is spaced so that
# the requests average at most this many a second: 2.0 averaged exactly the target's
# 2/s, and a 10 s window that caught three ticks of 8 requests measured 2.4/s.
IDLE_REQUESTS_PER_SECOND = 1.5


def idle_cap(requests: int) -> float:
    """The idle interval of a poll that makes ``requests`` requests a tick."""
    return max(IDLE_INTERVAL_MAX, requests / IDLE_REQUESTS_PER_SECOND)


# A backoff's exponent stops here: base * 2**BACKOFF_EXPONENT_MAX is far beyond any cap,
# and the delay never overflows however many failures come in a row (2.0**1024 raises
# OverflowError).
BACKOFF_EXPONENT_MAX = 32


def backoff_delay(base: float, failures: int, maximum: float) -> float:
    """``base * 2**failures``, at most ``maximum``; defined for any number of failures
    (the work queue's retries, the watches' reconnects, the pollers' idle intervals)."""
    return float(min(base * 2.0 ** min(failures, BACKOFF_EXPONENT_MAX), maximum))


def idle_backoff(base: float, idle_ticks: int, cap: float = IDLE_INTERVAL_MAX) -> float:
    """A poll interval: ``base`` while things move, doubling per idle tick up to ``cap``
    (never below ``base``), so a quiet cluster costs at most one request per ``cap``."""
    return backoff_delay(base, idle_ticks, max(base, cap))


class PollPace:
    """A Slurm poller's pacing (the scheduler's and the controller's): the configured
    interval while ticks find something, then doubling per idle tick up to
    :func:`idle_cap` of the requests a tick makes, so a quiet cluster costs at most
    :data:`IDLE_REQUESTS_PER_SECOND` requests a second however many ids a tick lists."""

    def __init__(self) -> None:
        self.idle_ticks = 0  # ticks in a row that found nothing
        self.requests = 1  # requests a tick makes (the last one, or the next)

    def ticked(self, moved: bool) -> None:
        """A tick found something (``moved``), or nothing."""
        self.idle_ticks = 0 if moved else self.idle_ticks + 1

    def interval(self, base: float) -> float:
        """Seconds until the next tick, ``base`` being the configured interval."""
        return idle_backoff(base, self.idle_ticks, idle_cap(self.requests))


async def sleep_or_wake(clock: Clock, seconds: float, wake: asyncio.Event) -> None:
    """Sleep ``seconds`` on ``clock``, cut short when ``wake`` is set."""
    sleeper = asyncio.ensure_future(clock.sleep(seconds))
    waker = asyncio.ensure_future(wake.wait())
    try:
        await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in (sleeper, waker):
            t.cancel()
