"""The scheduler's pod cache never goes back in time: a late watch event of our own
earlier write (the link patch, the pending message) must not replace the answer of a later
write, or the next write that carries the cached resourceVersion gets a 409 and counts
towards giving the allocation back (seen in the fit benchmark under load)."""

from __future__ import annotations

from typing import Any

from bridge.config import parse_config
from bridge.translate import TranslateSettings, kobj
from bridge.wellknown import LABEL_POD_GROUP
from scheduler.state import KubeState
from tests.fake_clock import FakeClock

CFG = parse_config({"managedNamespaces": ["team"]}, env={})


def _state() -> KubeState:
    clock = FakeClock()
    return KubeState(CFG, TranslateSettings.from_config(CFG), clock)


def _pod(rv: str, uid: str = "uid-a", note: str = "") -> dict[str, Any]:
    return {
        "metadata": {
            "name": "a",
            "namespace": "team",
            "uid": uid,
            "resourceVersion": rv,
            "labels": {LABEL_POD_GROUP: "g"},
            "annotations": {"note": note},
        },
        "spec": {"schedulerName": CFG.scheduler_name},
    }


async def test_a_late_event_older_than_our_write_does_not_roll_the_cached_pod_back() -> None:
    state = _state()
    await state.on_pod_event("ADDED", _pod("10"))
    state.written(_pod("12", note="our write"))
    await state.on_pod_event("MODIFIED", _pod("11", note="late event"))
    cached = state.pods["team/a"]
    assert kobj.text(cached, "metadata", "resourceVersion") == "12"


async def test_a_newer_event_replaces_the_cached_pod() -> None:
    state = _state()
    await state.on_pod_event("ADDED", _pod("10"))
    await state.on_pod_event("MODIFIED", _pod("13", note="someone else"))
    assert kobj.text(state.pods["team/a"], "metadata", "resourceVersion") == "13"


async def test_a_pod_recreated_under_the_same_name_replaces_the_cached_one() -> None:
    # another uid is another object: its (possibly smaller-looking) version is not compared
    state = _state()
    await state.on_pod_event("ADDED", _pod("20"))
    await state.on_pod_event("ADDED", _pod("5", uid="uid-b"))
    assert kobj.uid(state.pods["team/a"]) == "uid-b"


def test_resource_versions_that_are_not_numbers_are_never_called_older() -> None:
    assert kobj.not_older({"metadata": {"resourceVersion": "abc"}}, _pod("99"))
    assert kobj.not_older(_pod("1"), None)
    assert not kobj.not_older(_pod("1"), _pod("2"))


def _fat(rv: str, uid: str = "uid-a") -> dict[str, Any]:
    pod = _pod(rv, uid)
    pod["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    return pod


async def test_one_pod_version_is_slimmed_once_whichever_comes_first() -> None:
    # our write's answer, then the watch event of the same version: the cached pod is kept
    state = _state()
    await state.on_pod_event("ADDED", state.keep_pod(_fat("10")))
    kept = state.written(_fat("12"))
    assert "managedFields" not in kept["metadata"]
    assert state.keep_pod(_fat("12")) is kept
    # the watch event first, then the write's answer
    event = state.keep_pod(_fat("13"))
    assert "managedFields" not in event["metadata"]
    await state.on_pod_event("MODIFIED", event)
    assert state.written(_fat("13")) is state.pods["team/a"] is event


async def test_another_version_or_object_is_slimmed_and_kept_afresh() -> None:
    state = _state()
    await state.on_pod_event("ADDED", state.keep_pod(_fat("10")))
    cached = state.pods["team/a"]
    for other in (_fat("11"), _fat("10", uid="uid-b"), _fat("")):
        kept = state.keep_pod(other)
        assert kept is not cached
        assert "managedFields" not in kept["metadata"]
    assert state.written(_fat("", uid="uid-a")) is not cached
