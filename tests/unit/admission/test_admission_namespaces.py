"""The namespace label cache: TTL on injected time, one lookup per namespace at a time."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest

from bridge.errors import KubeUnavailable
from bridge.kube.namespaces import MAX_NAMESPACES, CachedNamespaceLabels
from tests.fake_clock import FakeClock


class Source:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.labels: dict[str, dict[str, str] | None] = {"a": {"team": "hpc"}, "gone": None}
        self.fail = False

    async def fetch(self, name: str) -> Mapping[str, str] | None:
        self.calls.append(name)
        await self.gate.wait()
        if self.fail:
            raise KubeUnavailable("down", status=503)
        return self.labels.get(name)


async def test_labels_are_cached_until_the_ttl_passes() -> None:
    src, clock = Source(), FakeClock()
    cache = CachedNamespaceLabels(src.fetch, clock, ttl_seconds=30)
    assert await cache.labels("a") == {"team": "hpc"}
    clock.advance(29)
    src.labels["a"] = {"team": "web"}
    assert await cache.labels("a") == {"team": "hpc"}
    clock.advance(1)
    assert await cache.labels("a") == {"team": "web"}
    assert src.calls == ["a", "a"]


async def test_missing_namespace_has_no_labels() -> None:
    cache = CachedNamespaceLabels(Source().fetch, FakeClock(), 30)
    assert await cache.labels("gone") == {}


async def test_concurrent_requests_share_one_lookup() -> None:
    src = Source()
    src.gate.clear()
    cache = CachedNamespaceLabels(src.fetch, FakeClock(), 30)
    waiters = [asyncio.create_task(cache.labels("a")) for _ in range(5)]
    await asyncio.sleep(0)
    src.gate.set()
    assert [await w for w in waiters] == [{"team": "hpc"}] * 5
    assert src.calls == ["a"]


async def test_failed_lookup_raises_and_is_not_cached() -> None:
    src = Source()
    src.fail = True
    cache = CachedNamespaceLabels(src.fetch, FakeClock(), 30)
    with pytest.raises(KubeUnavailable):
        await cache.labels("a")
    src.fail = False
    assert await cache.labels("a") == {"team": "hpc"}


async def test_a_hundred_thousand_distinct_namespaces_keep_the_cache_at_its_bound() -> None:
    src = Source()
    cache = CachedNamespaceLabels(src.fetch, FakeClock(), 30)
    for i in range(100_000):
        await cache.labels(f"ns-{i}")
    assert cache.stats().size == MAX_NAMESPACES
    assert cache.stats().name == "namespace-labels"
    assert len(src.calls) == 100_000  # each looked up once
    await cache.labels("ns-99999")
    assert len(src.calls) == 100_000  # the newest are still cached
