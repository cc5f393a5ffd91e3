"""The loop the in-process controllers share (namespace controller, garbage collector,
ResourceClaim controller): a background task fed by the store's events, each handled once,
failures retried with back-off."""

from __future__ import annotations

import asyncio
import contextlib

from sandbox.kubeapi.admission_chain import Writes
from sandbox.kubeapi.store import StoreEvent
from sandbox.kubeapi.verbs import ObjectApi


class ControllerLoop:
    """A background task driven by store events and retries with back-off."""

    def __init__(
        self, api: ObjectApi, writes: Writes, *, retry_initial: float = 0.05, retry_max: float = 2.0
    ) -> None:
        self.api = api
        self.writes = writes
        self.retry_initial = retry_initial
        self.retry_max = retry_max
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        raise NotImplementedError

    async def handle(self, ev: StoreEvent) -> bool:
        """One store event; False to have it retried with back-off."""
        raise NotImplementedError

    async def _event_loop(self) -> None:
        """Every store event to :meth:`handle`; failures retried, the delay doubling from
        ``retry_initial`` up to ``retry_max``."""
        store = self.api.store
        sub = store.subscribe(None)
        loop = asyncio.get_running_loop()
        retry: list[tuple[float, float, StoreEvent]] = []  # (due, delay, event)
        try:
            while True:
                wait = max(min(t for t, _, _ in retry) - loop.time(), 0.0) if retry else None
                todo: list[tuple[float, StoreEvent]] = []
                with contextlib.suppress(TimeoutError):
                    todo.append((self.retry_initial, await asyncio.wait_for(sub.queue.get(), wait)))
                while not sub.queue.empty():
                    todo.append((self.retry_initial, sub.queue.get_nowait()))
                now = loop.time()
                todo += [(min(d * 2, self.retry_max), e) for t, d, e in retry if t <= now]
                retry = [r for r in retry if r[0] > now]
                for d, ev in todo:
                    if not await self.handle(ev):
                        retry.append((loop.time() + d, d, ev))
        finally:
            store.unsubscribe(sub)
