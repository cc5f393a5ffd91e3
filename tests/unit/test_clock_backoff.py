"""idle_backoff and PollPace: the poll interval of a quiet cluster (the scheduler's poller
and the controller's)."""

from __future__ import annotations

import asyncio

import pytest

from bridge.clock import (
    IDLE_INTERVAL_MAX,
    PollPace,
    idle_backoff,
    idle_cap,
    sleep_or_wake,
)
from tests.fake_clock import FakeClock


@pytest.mark.parametrize(
    ("base", "idle", "want"),
    [
        (0.25, 0, 0.25),  # something moved: the configured interval
        (0.25, 1, 0.5),
        (0.25, 2, 1.0),
        (0.25, 3, IDLE_INTERVAL_MAX),  # capped
        (0.25, 10_000, IDLE_INTERVAL_MAX),  # no overflow however long it stays idle
        (5.0, 0, 5.0),  # a configured interval above the cap is kept
        (5.0, 4, 5.0),
    ],
)
def test_idle_backoff_doubles_per_idle_tick_up_to_the_cap(
    base: float, idle: int, want: float
) -> None:
    assert idle_backoff(base, idle) == want


@pytest.mark.parametrize(
    ("requests", "cap"),
    [(0, IDLE_INTERVAL_MAX), (1, IDLE_INTERVAL_MAX), (3, 2.0), (8, 8 / 1.5)],
)
def test_an_idle_poll_of_several_requests_averages_at_most_1_5_a_second(
    requests: int, cap: float
) -> None:
    assert idle_cap(requests) == pytest.approx(cap)
    # over any 10 s window: at most ceil(10 / cap) ticks; 31,000 followed jobs (8 requests
    # a tick) stay under 2 requests a second, which 2.0 a second did not (2.4 measured)
    assert -(-10 // idle_cap(requests)) * requests <= 2 * 10


def test_poll_pace_backs_off_per_idle_tick_and_comes_back_at_once_when_something_moves() -> None:
    pace = PollPace()
    assert pace.interval(0.25) == 0.25
    for want in (0.5, 1.0, IDLE_INTERVAL_MAX):
        pace.ticked(False)
        assert pace.interval(0.25) == want
    pace.requests = 8  # a tick of 8 requests idles longer: 1.5 requests a second at most
    for _ in range(3):
        pace.ticked(False)
    assert pace.interval(0.25) == pytest.approx(8 / 1.5)
    pace.ticked(True)
    assert pace.interval(0.25) == 0.25


async def test_sleep_or_wake_ends_when_woken_before_the_clock_says_so() -> None:
    clock, wake = FakeClock(), asyncio.Event()
    nap = asyncio.ensure_future(sleep_or_wake(clock, 60.0, wake))
    await asyncio.sleep(0)
    assert not nap.done()
    wake.set()
    await asyncio.wait_for(nap, timeout=5)
    assert not clock._sleepers or all(f.cancelled() for _, f in clock._sleepers)
