"""A keyed work queue: one sequential worker per key, different keys in parallel.

The client-go workqueue idea, small: a key added while it waits is not queued twice; a
key added while it is being processed is queued again when that processing is done (so
the last change is always seen, and never by two workers at once).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from bridge.clock import Clock, SystemClock

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    def __init__(self, clock: Clock | None = None) -> None:
        self._clock: Clock = clock or SystemClock()
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._ready = asyncio.Event()
        self._delayed: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, key: K) -> None:
        if key in self._dirty:
            return
        self._dirty.add(key)
        if key in self._processing:
            return
        self._queue.append(key)
        self._notify()

    def add_after(self, key: K, seconds: float) -> None:
        """Add ``key`` after ``seconds`` (retry with backoff, or a timer that comes due)."""

        async def later() -> None:
            await self._clock.sleep(seconds)
            self.add(key)

        task = asyncio.get_running_loop().create_task(later())
        self._delayed.add(task)
        task.add_done_callback(self._delayed.discard)

    def _notify(self) -> None:
        self._ready.set()

    async def get(self) -> K:
        while not self._queue:
            self._ready.clear()
            await self._ready.wait()
        key = self._queue.popleft()
        self._processing.add(key)
        self._dirty.discard(key)
        return key

    def done(self, key: K) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.append(key)
            self._notify()

    def idle(self) -> bool:
        return not self._queue and not self._processing

    def close(self) -> None:
        for t in list(self._delayed):
            t.cancel()
