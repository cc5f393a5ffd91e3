"""Namespace labels for ``managedNamespaceSelector``: a small TTL cache over a fetch function,
shared by the admission webhook and the controller.

Only consulted when the selector is set and the namespace is not listed by name, so a plain
``managedNamespaces`` setup never reads namespaces. Concurrent lookups of the same namespace
share one request. A failed lookup raises (a KubeError) and is not cached: the webhook
applies ``admission.failurePolicy``, the controller retries its key.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

from bridge.bounded import CacheStats
from bridge.clock import Clock
from bridge.errors import KubeNotFound
from bridge.kube.cached import CachedLookup
from bridge.kube.client import KubeClient

# name -> labels, or None when the namespace does not exist
Fetch = Callable[[str], Awaitable[Mapping[str, str] | None]]

# A review can name any namespace (a client may call the webhook directly), so the cache
# is bounded: 10,000 namespaces is more than any cluster has.
MAX_NAMESPACES = 10_000


class NamespaceLabelSource(Protocol):
    async def labels(self, namespace: str) -> Mapping[str, str]: ...


class CachedNamespaceLabels:
    """Labels per namespace, cached for ``ttl_seconds`` (0: no caching, still single-flight),
    at most :data:`MAX_NAMESPACES` of them; at most
    :data:`~bridge.kube.cached.MAX_CONCURRENT_FETCHES` GETs at a time."""

    def __init__(self, fetch: Fetch, clock: Clock, ttl_seconds: float) -> None:
        async def labels_of(namespace: str) -> Mapping[str, str]:
            return dict(await fetch(namespace) or {})

        self._lookup = CachedLookup(
            "namespace-labels", labels_of, clock, ttl_seconds, MAX_NAMESPACES
        )

    @property
    def fetches(self) -> int:
        return self._lookup.fetches

    async def labels(self, namespace: str) -> Mapping[str, str]:
        return await self._lookup.get(namespace)

    def stats(self) -> CacheStats:
        return self._lookup.stats()


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
