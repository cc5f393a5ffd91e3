"""Issue #30, finding 12 and deliver 3: no loop dies on an unexpected exception.

A token file with control characters made every request raise a plain ValueError (from
the HTTP library), which the controller's loops did not catch (they caught BridgeError):
the token provider now refuses such a file with the project's error, naming the file and
never the token. And every worker and forever-loop of the scheduler, the controller and
the webhook logs, counts (``slurm_bridge_loop_failures_total{loop}``) and backs off
(capped) on anything but cancellation: one test per loop feeds it an error no one
foresaw and checks it goes on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from admission.tls import CertReloader
from bridge.config import parse_config
from bridge.errors import SlurmUnauthorized
from bridge.kube.client import KubeClient
from bridge.kube.leader import LeaderElector
from bridge.kube.resources import PODS
from bridge.kube.watch import Watcher, WatchEvent, list_then_watch
from bridge.loops import LOOP_BACKOFF_BASE_SECONDS, LoopGuard
from bridge.slurm.client import SlurmClient
from bridge.slurm.token import TokenProvider
from controller.model import NO_NEXT
from controller.runtime import Controller
from scheduler.cycle import Scheduler
from scheduler.outcome import NOTHING, Outcome
from tests.fake_clock import FakeClock

CFG = parse_config({"managedNamespaces": ["team"], "mcsLabel": "k8s"}, env={})
TOKEN = "eyJhbGciOiJIUzI1NiJ9.e30.c2VjcmV0LXRva2Vu"


async def _turns(n: int = 50) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


class Flaky:
    """A step that raises ``error`` on its first ``fails`` calls, then returns ``value``."""

    def __init__(self, error: BaseException, fails: int = 1, value: Any = None) -> None:
        self.error = error
        self.fails = fails
        self.value = value
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls <= self.fails:
            raise self.error
        return self.value

    async def call(self, *args: Any, **kwargs: Any) -> Any:
        return self(*args, **kwargs)


async def _stop(task: asyncio.Task[Any]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


# ---------------------------------------------------------------- the token (finding 12)
@pytest.mark.parametrize("bad", ["\x01", "\x7f", "\x00", "é"], ids=["soh", "del", "nul", "accent"])
def test_a_token_file_with_control_characters_is_refused_naming_the_file(
    tmp_path: Path, bad: str
) -> None:
    jwt = tmp_path / "jwt"
    jwt.write_text(TOKEN[:10] + bad + TOKEN[10:], encoding="utf-8")
    with pytest.raises(SlurmUnauthorized) as e:
        TokenProvider(jwt).headers()
    assert str(jwt) in str(e.value)
    assert TOKEN[:10] not in str(e.value)


async def test_a_request_with_such_a_token_fails_with_the_projects_error(tmp_path: Path) -> None:
    # It used to be aiohttp's ValueError ("Forbidden control character detected in headers").
    async def ok(_: web.Request) -> web.Response:
        return web.json_response({"jobs": [], "errors": []})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", ok)
    server = TestServer(app)
    await server.start_server()
    jwt = tmp_path / "jwt"
    jwt.write_text(TOKEN + "\x01", encoding="utf-8")
    try:
        async with SlurmClient(
            str(server.make_url("")), TokenProvider(jwt), api_version="v0.0.45", retry_attempts=1
        ) as client:
            with pytest.raises(SlurmUnauthorized) as e:
                await client.list_job_states([1])
    finally:
        await server.close()
    assert TOKEN not in str(e.value)


# ---------------------------------------------------------------- the guard itself
async def test_the_guard_passes_cancellation_through_and_backs_off_capped() -> None:
    clock = FakeClock()
    counted: list[str] = []
    guard = LoopGuard("x", clock, counted.append, base_seconds=1.0, max_seconds=4.0)
    delays = [guard.failed(RuntimeError("boom")) for _ in range(5)]
    assert delays == [1.0, 2.0, 4.0, 4.0, 4.0]
    assert counted == ["x"] * 5
    guard.ok()
    assert guard.failed(RuntimeError("again")) == 1.0

    async def cancelled() -> None:
        async with guard:
            raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await cancelled()
    assert len(counted) == 6  # cancellation is not a failure


# ---------------------------------------------------------------- the controller
def _controller(clock: FakeClock, counted: list[str]) -> Controller:
    return Controller(
        CFG,
        cast(SlurmClient, None),
        cast(KubeClient, None),
        clock=clock,
        on_loop_failure=counted.append,
    )


async def test_the_controllers_sweep_loop_goes_on_after_an_unexpected_error() -> None:
    clock, counted = FakeClock(), []
    ctl = _controller(clock, counted)
    step = Flaky(ValueError("Forbidden control character detected in headers"))
    task = asyncio.create_task(ctl._every("controller-sweep", 30.0, step.call))
    await _turns()
    assert step.calls == 1
    assert counted == ["controller-sweep"]
    clock.advance(LOOP_BACKOFF_BASE_SECONDS)  # the backoff, then the interval
    await _turns()
    clock.advance(30.0)
    await _turns()
    assert step.calls == 2
    await _stop(task)


async def test_the_controllers_poll_loop_goes_on_after_an_unexpected_error() -> None:
    clock, counted = FakeClock(), []
    ctl = _controller(clock, counted)
    poll = Flaky(ValueError("boom"), value=NO_NEXT)
    ctl.poller.poll_once = poll.call  # type: ignore[method-assign]
    task = asyncio.create_task(ctl._poll_loop())
    await _turns()
    assert counted == ["controller-poll"]
    for _ in range(5):
        clock.advance(2.0)
        await _turns()
    assert poll.calls >= 2
    await _stop(task)


async def test_a_controller_worker_goes_on_to_the_next_key_after_an_unexpected_error() -> None:
    clock, counted = FakeClock(), []
    ctl = _controller(clock, counted)
    seen: list[tuple[str, str]] = []

    async def reconcile(key: tuple[str, str]) -> None:
        seen.append(key)
        if key == ("job", "1"):
            raise KeyError("a bug")

    ctl.reconcile = reconcile  # type: ignore[assignment, method-assign]
    task = asyncio.create_task(ctl._worker())
    ctl.queue.add(("job", "1"))
    ctl.queue.add(("job", "2"))
    await _turns()
    assert seen == [("job", "1"), ("job", "2")]
    assert counted == ["controller-worker"]
    assert ctl.queue.failures(("job", "1")) == 1  # backs off per key
    await _stop(task)


class _FakeWatcher:
    """What the watch loops use of a Watcher: a context, relist(), events()."""

    resource = PODS

    def __init__(self, listed: list[WatchEvent], streamed: list[WatchEvent]) -> None:
        self.listed = listed
        self.streamed = streamed

    async def __aenter__(self) -> _FakeWatcher:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass

    async def relist(self) -> list[WatchEvent]:
        return self.listed

    async def events(self) -> AsyncIterator[WatchEvent]:
        for ev in self.streamed:
            yield ev


def _ev(name: str) -> WatchEvent:
    return WatchEvent("ADDED", {"metadata": {"name": name, "namespace": "team"}})


async def test_the_controllers_watch_skips_an_event_whose_handling_raises() -> None:
    clock, counted = FakeClock(), []
    ctl = _controller(clock, counted)
    handled: list[str] = []

    async def handler(ev: WatchEvent) -> None:
        handled.append(ev.key)
        if ev.key == "team/bad":
            raise TypeError("unforeseen")

    watcher = _FakeWatcher([_ev("bad"), _ev("a")], [_ev("bad"), _ev("b")])
    await list_then_watch(
        cast(Watcher, watcher), handler, guard=ctl._guard("controller-watch-pods")
    )
    assert handled == ["team/bad", "team/a", "team/bad", "team/b"]
    assert counted == ["controller-watch-pods"] * 2


# ---------------------------------------------------------------- the scheduler
def _failures(sched: Scheduler, loop: str) -> float:
    value = sched.metrics.registry.get_sample_value(
        "slurm_bridge_loop_failures_total", {"loop": loop}
    )
    return value or 0.0


def _scheduler(clock: FakeClock) -> Scheduler:
    return Scheduler(CFG, cast(KubeClient, None), cast(SlurmClient, None), clock)


async def test_a_scheduler_worker_counts_an_unexpected_error_and_goes_on() -> None:
    clock = FakeClock()
    sched = _scheduler(clock)
    seen: list[str] = []

    async def cycle(key: str) -> Outcome:
        seen.append(key)
        if key == "g1":
            raise ZeroDivisionError("a bug")
        return NOTHING

    sched._cycle = cycle  # type: ignore[method-assign]  # the cycle's steps, then _requeue
    task = asyncio.create_task(sched.worker())
    sched.queue.add("g1")
    sched.queue.add("g2")
    await _turns()
    assert seen == ["g1", "g2"]
    assert _failures(sched, "scheduler-worker") == 1
    await _stop(task)


async def test_the_scheduler_poll_loop_goes_on_after_an_unexpected_error() -> None:
    clock = FakeClock()
    sched = _scheduler(clock)
    poll = Flaky(ValueError("Forbidden control character detected in headers"))
    sched.poller.run_once = poll.call  # type: ignore[method-assign]
    task = asyncio.create_task(sched.polling.run_forever())
    await _turns()
    assert _failures(sched, "scheduler-poll") == 1
    for _ in range(10):
        clock.advance(1.0)
        await _turns()
    assert poll.calls >= 2
    await _stop(task)


async def test_the_scheduler_sweep_is_retried_after_an_unexpected_error() -> None:
    clock = FakeClock()
    sched = _scheduler(clock)
    sweep = Flaky(AttributeError("unforeseen answer"))
    sched.slurm_state.sweep_once = sweep.call  # type: ignore[method-assign]
    task = asyncio.create_task(sched.sweep())
    await _turns()
    assert _failures(sched, "scheduler-sweep") == 1
    clock.advance(1.0)
    await _turns()
    assert task.done()
    assert sweep.calls == 2


async def test_the_scheduler_watch_feed_skips_an_event_whose_handling_raises() -> None:
    clock = FakeClock()
    sched = _scheduler(clock)
    handled: list[str] = []

    def handler(ev: WatchEvent) -> None:
        handled.append(ev.key)
        if ev.key == "team/bad":
            raise IndexError("unforeseen")

    watcher = _FakeWatcher([_ev("bad")], [_ev("bad"), _ev("b")])
    synced = asyncio.Event()
    guard = sched.guard("scheduler-watch-pods")
    await list_then_watch(
        cast(Watcher, watcher), handler, synced=synced, keep_on_list_error=True, guard=guard
    )
    assert synced.is_set()
    assert handled == ["team/bad", "team/bad", "team/b"]
    assert _failures(sched, "scheduler-watch-pods") == 2


async def test_the_scheduler_dra_watch_skips_an_event_whose_handling_raises() -> None:
    clock = FakeClock()
    sched = _scheduler(clock)
    handled: list[str] = []

    def handler(ev: WatchEvent) -> None:
        handled.append(ev.key)
        if ev.key == "team/bad":
            raise KeyError("unforeseen")

    watcher = _FakeWatcher([_ev("bad")], [_ev("bad"), _ev("b")])
    guard = sched.guard("scheduler-watch-resourceclaims")
    await list_then_watch(
        cast(Watcher, watcher), handler, keep_on_list_error=True, absent_ok=True, guard=guard
    )
    assert handled == ["team/bad", "team/bad", "team/b"]
    assert _failures(sched, "scheduler-watch-resourceclaims") == 2


# ---------------------------------------------------------------- the webhook, the shared loops
async def test_the_webhooks_certificate_reloader_goes_on_after_an_unexpected_error() -> None:
    clock, counted = FakeClock(), []
    reloader = object.__new__(CertReloader)
    check = Flaky(UnicodeDecodeError("utf-8", b"\xff", 0, 1, "bad"), value=False)
    reloader.reload_if_changed = check  # type: ignore[method-assign]
    task = asyncio.create_task(reloader.run(clock, 10.0, counted.append))
    for _ in range(4):
        clock.advance(10.0)
        await _turns()
    assert counted == ["admission-cert-reload"]
    assert check.calls >= 2
    await _stop(task)


async def test_leader_election_keeps_trying_after_an_unexpected_error() -> None:
    clock = FakeClock()
    elector = LeaderElector(
        cast(KubeClient, None), namespace="ns", name="l", identity="me", clock=clock
    )
    attempt = Flaky(RuntimeError("unforeseen"), value=True)
    elector.try_acquire_or_renew = attempt.call  # type: ignore[method-assign]
    task = asyncio.create_task(elector._acquire())
    await _turns()
    clock.advance(LOOP_BACKOFF_BASE_SECONDS)
    await _turns()
    clock.advance(elector.retry_period)
    await _turns()
    assert task.done()
    assert attempt.calls == 2


async def test_a_watch_lists_again_after_an_unexpected_error() -> None:
    class _Client:
        def new_session(self) -> object:
            return object()

    clock = FakeClock()
    watcher = Watcher(cast(KubeClient, _Client()), PODS, clock=clock)
    relist = Flaky(RuntimeError("unforeseen"), value=[_ev("a")])
    watcher.relist = relist.call  # type: ignore[method-assign]

    async def watch_once() -> AsyncIterator[WatchEvent]:
        watcher.stop()
        yield _ev("b")

    watcher.watch_once = watch_once  # type: ignore[method-assign]
    got: list[str] = []

    async def consume() -> None:
        async for ev in watcher.events():
            got.append(ev.key)

    task = asyncio.create_task(consume())
    await _turns()
    for _ in range(5):
        clock.advance(30.0)
        await _turns()
    await asyncio.wait_for(task, 5)
    assert got == ["team/a", "team/b"]
    assert relist.calls == 2
