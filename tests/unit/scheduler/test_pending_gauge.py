"""The pending-pods gauge labels a pod by Slurm's reason, read with the one parser of the
pending message: a job with a topology request is labelled by Slurm's reason, not by its
topology note."""

from __future__ import annotations

from typing import Any

from bridge.clock import SystemClock
from bridge.config import parse_config
from bridge.kube.events import EventRecorder
from bridge.models import JobSpec
from bridge.translate import TranslateSettings
from bridge.wellknown import CONDITION_POD_SCHEDULED
from scheduler.decide import JobSnapshot, pending_message
from scheduler.metrics import SchedulerMetrics
from scheduler.report import Reporter
from scheduler.state import KubeState


def pod(name: str, reason: str | None, message: str = "") -> dict[str, Any]:
    conditions = (
        [{"type": CONDITION_POD_SCHEDULED, "status": "False", "reason": reason, "message": message}]
        if reason is not None
        else []
    )
    return {"metadata": {"name": name, "namespace": "ns"}, "status": {"conditions": conditions}}


def test_the_gauge_counts_pods_by_slurms_reason_whatever_note_follows_it() -> None:
    cfg = parse_config({}, env={})
    clock = SystemClock()
    kube: Any = object()  # never called: the gauge reads the cache only
    state = KubeState(cfg, TranslateSettings.from_config(cfg), clock=clock)
    metrics = SchedulerMetrics()
    report = Reporter(kube, EventRecorder(kube, "s"), state, metrics, clock)
    topology = JobSpec(name="g", min_nodes=4, tasks=4, segment_size=4)
    state.pods = {
        "ns/a": pod("a", "Unschedulable", pending_message(JobSnapshot(7, "PENDING", "Resources"))),
        "ns/b": pod(
            "b",
            "Unschedulable",
            pending_message(JobSnapshot(8, "PENDING", "Resources"), topology),
        ),
        "ns/c": pod("c", "Unschedulable", "waiting for group ns/g: 1 of 2 pods exist"),
        "ns/d": pod("d", None),
    }
    report.update_gauges()

    def gauge(reason: str) -> float | None:
        return metrics.registry.get_sample_value("slurm_bridge_pending_pods", {"reason": reason})

    assert gauge("Resources") == 2
    assert gauge("Unschedulable") == 1
    assert gauge("New") == 1
