"""A keyed work queue: one sequential worker per key, different keys in parallel.

Semantics (as client-go's workqueue): a key is queued at most once; a key being processed
is never handed to a second worker; a key added while it is processed is queued again
when the worker calls :meth:`WorkQueue.done`. Delayed adds and per-key exponential
backoff run on the injected clock, so tests drive them without sleeping.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque

from bridge.clock import Clock


class WorkQueue:
    def __init__(
        self, clock: Clock, *, base_backoff: float = 0.05, max_backoff: float = 300.0
    ) -> None:
        self._clock = clock
        self._base = base_backoff
        self._max = max_backoff
        self._ready: deque[str] = deque()
        self._queued: set[str] = set()
        self._processing: set[str] = set()
        self._dirty: set[str] = set()  # re-added while processing
        self._failures: dict[str, int] = {}
        self._delayed: list[tuple[float, int, str]] = []
        self._seq = itertools.count()
        self._wakeup = asyncio.Event()
        self._timer_wakeup = asyncio.Event()
        self._closed = False

    def __len__(self) -> int:
        return len(self._queued)

    def add(self, key: str) -> None:
        """Queue ``key`` now (a no-op if it is already queued)."""
        if self._closed:
            return
        if key in self._processing:
            self._dirty.add(key)
            return
        if key not in self._queued:
            self._queued.add(key)
            self._ready.append(key)
            self._wakeup.set()

    def add_after(self, key: str, delay: float) -> None:
        """Queue ``key`` once ``delay`` seconds have passed on the clock."""
        if delay <= 0:
            self.add(key)
            return
        heapq.heappush(self._delayed, (self._clock.monotonic() + delay, next(self._seq), key))
        self._timer_wakeup.set()

    def add_rate_limited(self, key: str) -> float:
        """Queue ``key`` after its next backoff step; returns the delay used."""
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        delay = float(min(self._base * (2**n), self._max))
        self.add_after(key, delay)
        return delay

    def forget(self, key: str) -> None:
        """Reset ``key``'s backoff (call after a success)."""
        self._failures.pop(key, None)

    def failures(self, key: str) -> int:
        return self._failures.get(key, 0)

    async def get(self) -> str | None:
        """The next key to process, or None once the queue is closed and drained."""
        while True:
            self._promote_due()
            if self._ready:
                key = self._ready.popleft()
                self._queued.discard(key)
                self._processing.add(key)
                return key
            if self._closed:
                return None
            self._wakeup.clear()
            await self._wakeup.wait()

    def done(self, key: str) -> None:
        """Mark ``key`` processed; if it was re-added meanwhile, queue it again."""
        self._processing.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)

    def close(self) -> None:
        self._closed = True
        self._wakeup.set()
        self._timer_wakeup.set()

    def _promote_due(self) -> None:
        now = self._clock.monotonic()
        while self._delayed and self._delayed[0][0] <= now:
            _, _, key = heapq.heappop(self._delayed)
            self.add(key)

    async def run_timers(self) -> None:
        """Move delayed keys to the ready queue when due. Runs until :meth:`close`."""
        while not self._closed:
            self._promote_due()
            if self._delayed:
                wait = max(self._delayed[0][0] - self._clock.monotonic(), 0.0)
                sleeper = asyncio.ensure_future(self._clock.sleep(wait))
                waker = asyncio.ensure_future(self._timer_wakeup.wait())
                await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
                for t in (sleeper, waker):
                    t.cancel()
            else:
                await self._timer_wakeup.wait()
            self._timer_wakeup.clear()
