"""The expected start as the Reporter tells it: which pods are written again, and the two
metrics (how far ahead the first plan shown was; how far off it was at the start)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

from bridge.config import parse_config
from bridge.expected import Plan, note, rfc3339
from bridge.kube.client import KubeClient
from bridge.kube.events import EventRecorder
from bridge.translate import GroupRef, TranslateSettings
from bridge.wellknown import ANNOTATION_EXPECTED_START
from scheduler.metrics import SchedulerMetrics
from scheduler.report import Reporter
from scheduler.state import GroupState, KubeState
from tests.fake_clock import FakeClock

CFG = parse_config({"managedNamespaces": ["team"]}, env={})
BASE = "Slurm job 48 is pending: Resources"


def reporter() -> tuple[Reporter, SchedulerMetrics, FakeClock]:
    clock = FakeClock()
    state = KubeState(CFG, TranslateSettings.from_config(CFG), clock)
    metrics = SchedulerMetrics()
    kube, events = cast(KubeClient, None), cast(EventRecorder, None)
    return Reporter(kube, events, state, metrics, clock), metrics, clock


def pod(name: str, message: str, shown: str | None) -> dict[str, Any]:
    notes = {ANNOTATION_EXPECTED_START: shown} if shown else {}
    cond = {"type": "PodScheduled", "status": "False", "message": message}
    return {
        "metadata": {"name": name, "namespace": "team", "annotations": notes},
        "status": {"conditions": [cond]},
    }


def sample(metrics: SchedulerMetrics, name: str, suffix: str) -> float:
    hist = getattr(metrics, name)
    return next(s.value for s in hist.collect()[0].samples if s.name.endswith(suffix))


def test_only_the_pods_whose_plan_moved_past_the_step_are_written_again() -> None:
    r, _, clock = reporter()
    now = clock.now()
    at = now + timedelta(minutes=12)
    told = BASE + note(Plan(at), now)
    pods = [
        pod("same", told, rfc3339(at)),
        pod("new", BASE, None),  # told before the plan came
        pod("old-plan", BASE + note(Plan(at - timedelta(minutes=5)), now), rfc3339(at)),
    ]
    later = at + timedelta(seconds=45)  # moved by less than the step (60 s)
    stale = r.stale_pods(pods, BASE + note(Plan(later), now), Plan(later), now)
    assert [p["metadata"]["name"] for p in stale] == ["new"]


def test_the_first_plan_shown_and_its_error_at_the_start_are_observed_once() -> None:
    r, metrics, clock = reporter()
    g = GroupState(GroupRef(kind="PodGroup", namespace="team", name="g"))
    now = clock.now()
    first = now + timedelta(minutes=12)
    r.expected_shown(g, Plan(first), now)
    r.expected_shown(g, Plan(first + timedelta(minutes=3)), now)  # not the first: ignored
    assert sample(metrics, "expected_start_seconds", "_count") == 1
    assert sample(metrics, "expected_start_seconds", "_sum") == 720
    r.started(g, first + timedelta(seconds=40))
    r.started(g, first + timedelta(seconds=90))  # once
    assert sample(metrics, "expected_start_error_seconds", "_count") == 1
    assert sample(metrics, "expected_start_error_seconds", "_sum") == 40
