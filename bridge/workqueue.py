"""A keyed work queue: one sequential worker per key, different keys in parallel.

The scheduler (keys: groups) and the controller (keys: jobs and nodes) share it.
Semantics (as client-go's workqueue): a key is queued at most once; a key being processed
is never handed to a second worker; a key added while it is processed is queued again
when the worker calls :meth:`WorkQueue.done`, so the last change is always seen, and never
by two workers at once. Delayed adds and the per-key exponential backoff run on the
injected clock (:meth:`WorkQueue.run_timers`), so tests drive them without sleeping.

Two lanes: :meth:`WorkQueue.add` queues a key in the ready lane; :meth:`WorkQueue.add_idle`
in the idle lane, served only while the ready lane is empty (a restarted scheduler's
thousands of restored pending groups, which need a look but no action, stay behind new
work). An :meth:`~WorkQueue.add` of a key waiting in the idle lane moves it to the ready
lane.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from bridge.clock import Clock, backoff_delay, sleep_or_wake
from bridge.loops import LoopGuard

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    def __init__(
        self, clock: Clock, *, base_backoff: float = 0.05, max_backoff: float = 300.0
    ) -> None:
        self._clock = clock
        self._base = base_backoff
        self._max = max_backoff
        self._ready: deque[K] = deque()
        # the idle lane: served only when nothing is ready; an entry whose key is no
        # longer in _idle_keys (moved to the ready lane by add()) is skipped
        self._idle: deque[K] = deque()
        self._idle_keys: set[K] = set()
        self._queued: set[K] = set()  # in either lane
        self._processing: set[K] = set()
        self._dirty: set[K] = set()  # re-added while processing
        self._failures: dict[K, int] = {}
        self._delayed: list[tuple[float, int, K]] = []
        self._seq = itertools.count()
        self._wakeup = asyncio.Event()
        self._timer_wakeup = asyncio.Event()
        self._closed = False

    def __len__(self) -> int:
        return len(self._queued)

    def add(self, key: K) -> None:
        """Queue ``key`` now (a no-op if it is already queued)."""
        if self._closed:
            return
        if key in self._processing:
            self._dirty.add(key)
            return
        if key in self._idle_keys:  # waiting in the idle lane: due now
            self._idle_keys.discard(key)
            self._ready.append(key)
            self._wakeup.set()
        elif key not in self._queued:
            self._queued.add(key)
            self._ready.append(key)
            self._wakeup.set()

    def add_idle(self, key: K) -> None:
        """Queue ``key`` in the idle lane: processed once nothing added with :meth:`add`
        is waiting (a no-op if it is queued already, in either lane; a key being processed
        is queued again, in the ready lane, when it is done)."""
        if self._closed:
            return
        if key in self._processing:
            self._dirty.add(key)
            return
        if key not in self._queued:
            self._queued.add(key)
            self._idle_keys.add(key)
            self._idle.append(key)
            self._wakeup.set()

    def add_after(self, key: K, delay: float) -> None:
        """Queue ``key`` once ``delay`` seconds have passed on the clock."""
        if delay <= 0:
            self.add(key)
            return
        heapq.heappush(self._delayed, (self._clock.monotonic() + delay, next(self._seq), key))
        self._timer_wakeup.set()

    def add_rate_limited(self, key: K, *, base: float | None = None) -> float:
        """Queue ``key`` after its next backoff step (``base`` doubled per failure since
        the last :meth:`forget`, at most ``max_backoff``); returns the delay used. ``base``
        defaults to the queue's; a caller with a slower first step (a rejected group)
        passes its own, and the key's failures count either way."""
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        delay = backoff_delay(self._base if base is None else base, n, self._max)
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        """Reset ``key``'s backoff (after a success, or when the key is gone for good)."""
        self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        return self._failures.get(key, 0)

    async def get(self) -> K | None:
        """The next key to process, or None once the queue is closed."""
        while True:
            self._promote_due()
            if self._ready:
                return self._take(self._ready.popleft())
            while self._idle:
                key = self._idle.popleft()
                if key in self._idle_keys:
                    self._idle_keys.discard(key)
                    return self._take(key)
            if self._closed:
                return None
            self._wakeup.clear()
            await self._wakeup.wait()

    def _take(self, key: K) -> K:
        self._queued.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: K) -> None:
        """Mark ``key`` processed; if it was re-added meanwhile, queue it again."""
        self._processing.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)

    def idle(self) -> bool:
        """Nothing queued and nothing being processed (delayed keys do not count)."""
        return not self._queued and not self._processing

    def close(self) -> None:
        """Stop: waiting workers get None, timers end, later adds are dropped."""
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
                await sleep_or_wake(self._clock, wait, self._timer_wakeup)
            else:
                await self._timer_wakeup.wait()
            self._timer_wakeup.clear()


async def run_worker(
    queue: WorkQueue[K],
    process: Callable[[K], Awaitable[None]],
    failed: Callable[[K, Exception, float], Awaitable[None]] | None = None,
    *,
    retry: tuple[type[Exception], ...] = (Exception,),
    forget_on_success: bool = False,
    guard: LoopGuard | None = None,
) -> None:
    """One worker: take keys from ``queue`` until it is closed and ``process`` each.

    A key whose processing raised one of ``retry`` is queued again after its backoff
    (:meth:`WorkQueue.add_rate_limited`), then ``failed(key, error, delay)`` is told (it
    logs, counts, reports). Any other exception (a bug, an input nobody foresaw) backs the
    key off the same way and is logged and counted by ``guard``
    (:class:`~bridge.loops.LoopGuard`); without a guard it ends the worker. Without
    ``failed`` nothing is caught but by ``guard``: a ``process`` that requeues its own
    failures (the scheduler's cycle) never raises. With
    ``forget_on_success`` a processed key's backoff is reset. The key is always marked
    :meth:`~WorkQueue.done`.
    """
    while True:
        key = await queue.get()
        if key is None:
            return
        try:
            await process(key)
        except retry as e:
            if failed is None:
                if guard is None:
                    raise
                guard.failed(e, key=str(key), retry_in=queue.add_rate_limited(key))
            else:
                await failed(key, e, queue.add_rate_limited(key))
        except Exception as e:  # not cancellation (a BaseException)
            if guard is None:
                raise
            guard.failed(e, key=str(key), retry_in=queue.add_rate_limited(key))
        else:
            if forget_on_success:
                queue.forget(key)
        finally:
            queue.done(key)
