"""One bounded map for every cache fed by what a tenant can name.

A pod name, a label, a nodeSelector, a namespace or an owner uid is chosen by whoever
creates the object, so a map keyed by one grows as fast as a tenant can create objects
unless it has a bound. :class:`BoundedMap` is that bound: at most ``max_entries`` entries,
the least recently used dropped first (or the oldest written, with ``lru=False``), and,
with ``ttl``, an entry older than ``ttl`` seconds on the injected clock is a miss.

Every instance has a ``name`` (the cache's name in docs/security.md and in the
``slurm_bridge_cache_*`` metrics) and counts its evictions. The module is pure (no clock,
no I/O): the clock is passed in, so the pure translation layer uses it too.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterator, MutableMapping
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, overload

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
D = TypeVar("D")


class Monotonic(Protocol):
    """What a TTL needs of a clock (``bridge.clock.Clock`` is one)."""

    def monotonic(self) -> float: ...


@dataclass(frozen=True)
class CacheStats:
    """One cache's figures for metrics: its size, bound and evictions so far."""

    name: str
    size: int
    max_entries: int
    evictions: int


class BoundedMap(MutableMapping[K, V]):
    """A mapping of at most ``max_entries`` entries.

    Reads (``m[k]``, ``get``, ``in``) of a live entry make it the most recently used
    (unless ``lru=False``); a write past the bound evicts the least recently used. With
    ``ttl`` (seconds, needs ``clock``) an entry expires ``ttl`` after it was last written:
    an expired entry reads as absent and is dropped when seen.
    """

    def __init__(
        self,
        name: str,
        max_entries: int,
        *,
        ttl: float | None = None,
        clock: Monotonic | None = None,
        lru: bool = True,
    ) -> None:
        if max_entries < 1:
            raise ValueError(f"bounded map {name!r}: max_entries must be at least 1")
        if ttl is not None and (ttl < 0 or clock is None):
            raise ValueError(f"bounded map {name!r}: a ttl needs a clock and ttl >= 0")
        self.name = name
        self.max_entries = max_entries
        self.evictions = 0
        self._ttl = ttl
        self._clock = clock
        self._lru = lru
        self._data: OrderedDict[K, V] = OrderedDict()
        self._written: dict[K, float] = {}

    def _now(self) -> float:
        return self._clock.monotonic() if self._clock is not None else 0.0

    def _expired(self, key: K) -> bool:
        if self._ttl is None:
            return False
        return self._now() - self._written[key] >= self._ttl

    def __getitem__(self, key: K) -> V:
        value = self._data[key]
        if self._expired(key):
            del self[key]
            raise KeyError(key)
        if self._lru:
            self._data.move_to_end(key)
        return value

    def __setitem__(self, key: K, value: V) -> None:
        if key in self._data:
            self._data.move_to_end(key)
        self._data[key] = value
        if self._ttl is not None:
            self._written[key] = self._now()
        while len(self._data) > self.max_entries:
            old, _ = self._data.popitem(last=False)
            self._written.pop(old, None)
            self.evictions += 1

    def __delitem__(self, key: K) -> None:
        del self._data[key]
        self._written.pop(key, None)

    def __contains__(self, key: object) -> bool:
        try:
            self[key]  # type: ignore[index]
        except KeyError:
            return False
        return True

    @overload
    def get(self, key: K, /) -> V | None: ...
    @overload
    def get(self, key: K, /, default: V | D) -> V | D: ...
    def get(self, key: K, /, default: object = None) -> object:
        try:
            return self[key]
        except KeyError:
            return default

    def __iter__(self) -> Iterator[K]:
        # over a snapshot: a reader may drop expired entries while the caller iterates
        return iter(list(self._data))

    def __len__(self) -> int:
        return len(self._data)

    def clear(self) -> None:
        self._data.clear()
        self._written.clear()

    def expire(self) -> int:
        """Drop every expired entry now; returns how many (a no-op without ``ttl``)."""
        if self._ttl is None:
            return 0
        cutoff = self._now() - self._ttl
        stale = [k for k, t in self._written.items() if t <= cutoff]
        for key in stale:
            del self[key]
        return len(stale)

    def stats(self) -> CacheStats:
        return CacheStats(self.name, len(self._data), self.max_entries, self.evictions)

    def __repr__(self) -> str:
        return f"BoundedMap({self.name!r}, {len(self._data)}/{self.max_entries})"


class BoundedSet(Generic[K]):
    """A set of at most ``max_entries`` keys over a :class:`BoundedMap` (same eviction)."""

    def __init__(self, name: str, max_entries: int, *, lru: bool = True) -> None:
        self._map: BoundedMap[K, None] = BoundedMap(name, max_entries, lru=lru)
        self.name = name
        self.max_entries = max_entries

    def add(self, key: K) -> None:
        self._map[key] = None

    def discard(self, key: K) -> None:
        self._map.pop(key, None)

    def __contains__(self, key: object) -> bool:
        return key in self._map

    def __iter__(self) -> Iterator[K]:
        return iter(self._map)

    def __len__(self) -> int:
        return len(self._map)

    def clear(self) -> None:
        self._map.clear()

    @property
    def evictions(self) -> int:
        return self._map.evictions

    def stats(self) -> CacheStats:
        return self._map.stats()

    def __repr__(self) -> str:
        return f"BoundedSet({self.name!r}, {len(self)}/{self.max_entries})"
