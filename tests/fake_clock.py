"""A clock for tests: it moves only when told to (the product takes a ``bridge.clock.Clock``)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta


class FakeClock:
    """A clock that moves only when told to; sleepers wake when time passes their deadline."""

    def __init__(self, start: datetime | None = None) -> None:
        self._mono = 0.0
        self._start = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def monotonic(self) -> float:
        return self._mono

    def now(self) -> datetime:
        return self._start + timedelta(seconds=self._mono)

    async def sleep(self, seconds: float) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleepers.append((self._mono + max(seconds, 0.0), fut))
        await fut

    def advance(self, seconds: float) -> None:
        self._mono += seconds
        due = [(t, f) for t, f in self._sleepers if t <= self._mono]
        self._sleepers = [(t, f) for t, f in self._sleepers if t > self._mono]
        for _, fut in due:
            if not fut.done():
                fut.set_result(None)
