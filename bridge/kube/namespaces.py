"""Namespace labels for ``managedNamespaceSelector``: a small TTL cache over a fetch function,
shared by the admission webhook and the controller.

Only consulted when the selector is set and the namespace is not listed by name, so a plain
``managedNamespaces`` setup never reads namespaces. Concurrent lookups of the same namespace
share one request. A failed lookup raises (a KubeError) and is not cached: the webhook
applies ``admission.failurePolicy``, the controller retries its key.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

from bridge.bounded import BoundedMap, CacheStats
from bridge.clock import Clock
from bridge.errors import KubeNotFound
from bridge.kube.client import KubeClient

# name -> labels, or None when the namespace does not exist
Fetch = Callable[[str], Awaitable[Mapping[str, str] | None]]

# A review can name any namespace (a client may call the webhook directly), so the cache
# is bounded: 10,000 namespaces is more than any cluster has.
MAX_NAMESPACES = 10_000
# Lookups of distinct namespaces in flight at once, at most: reviews naming many made-up
# namespaces cost the API server a bounded number of GETs at a time.
MAX_CONCURRENT_FETCHES = 8


class NamespaceLabelSource(Protocol):
    async def labels(self, namespace: str) -> Mapping[str, str]: ...


class CachedNamespaceLabels:
    """Labels per namespace, cached for ``ttl_seconds`` (0: no caching, still single-flight),
    at most :data:`MAX_NAMESPACES` of them; at most :data:`MAX_CONCURRENT_FETCHES` GETs at
    a time."""

    def __init__(self, fetch: Fetch, clock: Clock, ttl_seconds: float) -> None:
        self._fetch = fetch
        self._clock = clock
        self._cache: BoundedMap[str, Mapping[str, str]] = BoundedMap(
            "namespace-labels", MAX_NAMESPACES, ttl=max(ttl_seconds, 0.0), clock=clock
        )
        self._inflight: dict[str, asyncio.Task[Mapping[str, str]]] = {}
        self._fetching = asyncio.Semaphore(MAX_CONCURRENT_FETCHES)
        self.fetches = 0

    async def labels(self, namespace: str) -> Mapping[str, str]:
        hit = self._cache.get(namespace)
        if hit is not None:
            return hit
        task = self._inflight.get(namespace)
        if task is None:
            task = asyncio.create_task(self._load(namespace))
            self._inflight[namespace] = task
            task.add_done_callback(lambda _t: self._inflight.pop(namespace, None))
        # shield: one caller's timeout must not cancel the lookup the others wait for
        return await asyncio.shield(task)

    def stats(self) -> CacheStats:
        return self._cache.stats()

    async def _load(self, namespace: str) -> Mapping[str, str]:
        async with self._fetching:
            self.fetches += 1
            found = await self._fetch(namespace)
        labels: Mapping[str, str] = dict(found or {})
        self._cache[namespace] = labels
        return labels


def kube_namespace_fetch(kube: KubeClient) -> Fetch:
    """A Fetch over the bridge's KubeClient: ``GET /api/v1/namespaces/{name}``.

    404 -> None; every other failure is already a classified KubeError (KubeForbidden,
    KubeUnavailable, KubeTimeout, ...) from :func:`bridge.kube.client.error_for_status`.
    """

    async def fetch(name: str) -> Mapping[str, str] | None:
        try:
            ns = await kube.get_namespace(name)
        except KubeNotFound:
            return None
        return dict((ns.get("metadata") or {}).get("labels") or {})

    return fetch
