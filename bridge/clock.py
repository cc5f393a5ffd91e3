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
