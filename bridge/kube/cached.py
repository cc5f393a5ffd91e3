"""A small TTL cache of values looked up by name over a fetch function: namespace labels
(:mod:`bridge.kube.namespaces`), and the kind of a node a new pod names (the admission
webhook's Slurm-node guard).

Concurrent lookups of the same name share one request, at most
:data:`MAX_CONCURRENT_FETCHES` run at once, and at most ``limit`` names are kept (a review
can name anything: the least recently used is dropped). A failed lookup raises (a
KubeError) and is not cached: the webhook applies ``admission.failurePolicy``, the
controller retries its key.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from bridge.bounded import BoundedMap, CacheStats
from bridge.clock import Clock

V = TypeVar("V")
# Lookups of distinct names in flight at once, at most: reviews naming many made-up names
# cost the API server a bounded number of GETs at a time.
MAX_CONCURRENT_FETCHES = 8


class CachedLookup(Generic[V]):
    """``fetch(name)``, cached for ``ttl_seconds`` (0: no caching, still single-flight) in
    the bounded cache ``cache_name`` of at most ``limit`` names."""

    def __init__(
        self,
        cache_name: str,
        fetch: Callable[[str], Awaitable[V]],
        clock: Clock,
        ttl_seconds: float,
        limit: int,
    ) -> None:
        self._fetch = fetch
        self._cache: BoundedMap[str, V] = BoundedMap(
            cache_name, limit, ttl=max(ttl_seconds, 0.0), clock=clock
        )
        self._inflight: dict[str, asyncio.Task[V]] = {}
        self._fetching = asyncio.Semaphore(MAX_CONCURRENT_FETCHES)
        self.fetches = 0

    async def get(self, name: str) -> V:
        hit = self._cache.get(name)
        if hit is not None:
            return hit
        task = self._inflight.get(name)
        if task is None:
            task = asyncio.create_task(self._load(name))
            self._inflight[name] = task
            task.add_done_callback(lambda _t: self._inflight.pop(name, None))
        # shield: one caller's timeout must not cancel the lookup the others wait for
        return await asyncio.shield(task)

    def stats(self) -> CacheStats:
        return self._cache.stats()

    async def _load(self, name: str) -> V:
        async with self._fetching:
            self.fetches += 1
            value = await self._fetch(name)
        self._cache[name] = value
        return value
