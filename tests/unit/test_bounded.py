"""The one bounded map every tenant-fed cache goes through: it never holds more than its
bound however many distinct keys come, drops the least recently used first, and expires
entries on the injected clock."""

import pytest

from bridge.bounded import BoundedMap, BoundedSet, CacheStats
from tests.fake_clock import FakeClock

MANY = 100_000


def test_a_hundred_thousand_distinct_keys_keep_the_map_at_its_bound() -> None:
    m: BoundedMap[str, int] = BoundedMap("t", 1000)
    for i in range(MANY):
        m[f"k{i}"] = i
    assert len(m) == 1000
    assert m.evictions == MANY - 1000
    assert list(m) == [f"k{i}" for i in range(MANY - 1000, MANY)]
    assert m.stats() == CacheStats("t", 1000, 1000, MANY - 1000)


def test_the_least_recently_read_entry_goes_first() -> None:
    m: BoundedMap[str, int] = BoundedMap("t", 2)
    m["a"] = 1
    m["b"] = 2
    assert m["a"] == 1  # a is now the most recently used
    m["c"] = 3
    assert "b" not in m
    assert dict(m) == {"a": 1, "c": 3}


def test_without_lru_reads_do_not_reorder_and_the_oldest_write_goes_first() -> None:
    m: BoundedMap[str, int] = BoundedMap("t", 2, lru=False)
    m["a"] = 1
    m["b"] = 2
    assert m.get("a") == 1
    m["c"] = 3
    assert list(m) == ["b", "c"]


def test_rewriting_a_key_does_not_grow_or_evict() -> None:
    m: BoundedMap[str, int] = BoundedMap("t", 2)
    m["a"] = 1
    m["b"] = 2
    m["a"] = 3
    assert len(m) == 2
    assert m.evictions == 0
    m["c"] = 4  # b is the oldest now
    assert dict(m) == {"a": 3, "c": 4}


def test_an_entry_expires_ttl_seconds_after_its_write_on_the_injected_clock() -> None:
    clock = FakeClock()
    m: BoundedMap[str, int] = BoundedMap("t", 10, ttl=5.0, clock=clock)
    m["a"] = 1
    clock.advance(4.9)
    assert m.get("a") == 1
    m["b"] = 2
    clock.advance(0.1)
    assert m.get("a") is None
    assert "a" not in m
    assert len(m) == 1
    assert m.get("b", -1) == 2
    clock.advance(5.0)
    assert m.expire() == 1
    assert len(m) == 0


def test_a_zero_ttl_caches_nothing() -> None:
    m: BoundedMap[str, int] = BoundedMap("t", 10, ttl=0.0, clock=FakeClock())
    m["a"] = 1
    assert "a" not in m


def test_pop_setdefault_and_delete_work_as_on_a_dict() -> None:
    m: BoundedMap[str, int] = BoundedMap("t", 3)
    assert m.setdefault("a", 1) == 1
    assert m.setdefault("a", 2) == 1
    assert m.pop("a") == 1
    assert m.pop("a", None) is None
    m["b"] = 1
    del m["b"]
    with pytest.raises(KeyError):
        m["b"]


@pytest.mark.parametrize(
    ("max_entries", "ttl", "with_clock"),
    [(0, None, False), (1, 1.0, False), (1, -1.0, True)],
    ids=["no-room", "ttl-without-clock", "negative-ttl"],
)
def test_a_bound_that_cannot_work_is_refused_naming_the_cache(
    max_entries: int, ttl: float | None, with_clock: bool
) -> None:
    with pytest.raises(ValueError, match="'named'"):
        BoundedMap("named", max_entries, ttl=ttl, clock=FakeClock() if with_clock else None)


def test_a_bounded_set_keeps_its_bound_over_a_hundred_thousand_keys() -> None:
    s: BoundedSet[int] = BoundedSet("gone", 500)
    for i in range(MANY):
        s.add(i)
    assert len(s) == 500
    assert s.evictions == MANY - 500
    assert MANY - 1 in s
    assert 0 not in s
    s.discard(MANY - 1)
    s.discard(MANY - 1)
    assert MANY - 1 not in s
    assert s.stats().name == "gone"
