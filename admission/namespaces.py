"""Namespace labels for ``managedNamespaceSelector``: a small TTL cache over a fetch function.

Only consulted when the selector is set and the namespace is not listed by name, so a plain
``managedNamespaces`` setup never talks to the API server from the webhook. Concurrent
requests for the same namespace share one lookup. A failed lookup raises (a KubeError) and
the server applies ``admission.failurePolicy``; it is not cached.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import aiohttp

from bridge.clock import Clock
from bridge.errors import KubeError, KubeForbidden, KubeTimeout, KubeUnavailable

# name -> labels, or None when the namespace does not exist
Fetch = Callable[[str], Awaitable[Mapping[str, str] | None]]

_MAX_ENTRIES = 10_000


class NamespaceLabelSource(Protocol):
    async def labels(self, namespace: str) -> Mapping[str, str]: ...


class CachedNamespaceLabels:
    """Labels per namespace, cached for ``ttl_seconds`` (0: no caching, still single-flight)."""

    def __init__(self, fetch: Fetch, clock: Clock, ttl_seconds: float) -> None:
        self._fetch = fetch
        self._clock = clock
        self._ttl = ttl_seconds
        self._cache: dict[str, tuple[float, Mapping[str, str]]] = {}
        self._inflight: dict[str, asyncio.Task[Mapping[str, str]]] = {}
        self.fetches = 0

    async def labels(self, namespace: str) -> Mapping[str, str]:
        hit = self._cache.get(namespace)
        if hit is not None and self._clock.monotonic() - hit[0] < self._ttl:
            return hit[1]
        task = self._inflight.get(namespace)
        if task is None:
            task = asyncio.create_task(self._load(namespace))
            self._inflight[namespace] = task
            task.add_done_callback(lambda _t: self._inflight.pop(namespace, None))
        # shield: one caller's timeout must not cancel the lookup the others wait for
        return await asyncio.shield(task)

    async def _load(self, namespace: str) -> Mapping[str, str]:
        self.fetches += 1
        found = await self._fetch(namespace)
        labels: Mapping[str, str] = dict(found or {})
        if len(self._cache) >= _MAX_ENTRIES:
            self._cache.pop(next(iter(self._cache)))
        self._cache[namespace] = (self._clock.monotonic(), labels)
        return labels


def kube_namespace_fetch(api_client: Any, timeout_seconds: float) -> Fetch:
    """A Fetch over a kubernetes_asyncio ApiClient: GET /api/v1/namespaces/{name}.

    Errors are classified by HTTP status (404 -> None, 401/403 -> KubeForbidden, anything
    else -> KubeUnavailable) and connection failures -> KubeUnavailable / KubeTimeout.
    """
    from kubernetes_asyncio.client import CoreV1Api
    from kubernetes_asyncio.client.exceptions import ApiException

    core = CoreV1Api(api_client)

    async def fetch(name: str) -> Mapping[str, str] | None:
        try:
            ns = await core.read_namespace(name, _request_timeout=timeout_seconds)
        except ApiException as e:
            if e.status == 404:
                return None
            cls: type[KubeError] = KubeForbidden if e.status in (401, 403) else KubeUnavailable
            raise cls(f"reading namespace {name}: HTTP {e.status}", status=e.status) from None
        except TimeoutError:
            raise KubeTimeout(f"reading namespace {name}: no answer") from None
        except aiohttp.ClientError as e:
            raise KubeUnavailable(f"reading namespace {name}: {type(e).__name__}") from None
        return dict(ns.metadata.labels or {})

    return fetch
