"""The objects the workload kinds read come from watch caches (scheduler.related): the
snapshot reads them in memory, and an object that comes is an event that regroups and
wakes the groups it concerns, and only those (no timed retry, no regroup storm)."""

from __future__ import annotations

import inspect
from typing import Any

from bridge.config import parse_config
from bridge.translate import TranslateSettings
from bridge.wellknown import LABEL_POD_GROUP
from bridge.workloads import kind_named
from bridge.workloads.builtin import PODGROUPS, WORKLOADS
from scheduler.snapshot import Snapshots
from scheduler.state import KubeState
from tests.fake_clock import FakeClock

CFG = parse_config({"managedNamespaces": ["team"]}, env={})
COSCHEDULING = kind_named("PodGroup").api


def _state() -> KubeState:
    return KubeState(CFG, TranslateSettings.from_config(CFG), FakeClock())


def _pod(name: str, *, podgroup: str = "", label: str = "") -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}", "labels": {}},
        "spec": {"schedulerName": CFG.scheduler_name},
    }
    if podgroup:
        body["spec"]["schedulingGroup"] = {"podGroupName": podgroup}
    if label:
        body["metadata"]["labels"][LABEL_POD_GROUP] = label
    return body


def _builtin(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": kind,
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}"},
        "spec": spec,
    }


WORKLOAD = _builtin("Workload", "wl", {"podGroupTemplates": [{"name": "a"}, {"name": "b"}]})


def _podgroup(name: str, template: str) -> dict[str, Any]:
    return _builtin(
        "PodGroup",
        name,
        {
            "workloadRef": {"workloadName": "wl", "templateName": template},
            "schedulingPolicy": {"gang": {"minCount": 1}},
        },
    )


def test_the_snapshot_is_taken_without_an_await() -> None:
    """Snapshots.take is an in-memory copy (kueue's is): no coroutine, no I/O."""
    assert not inspect.iscoroutinefunction(Snapshots.take)


async def test_pods_seen_before_their_workload_move_to_its_gang_when_it_comes() -> None:
    state = _state()
    state.on_related_event(PODGROUPS, "ADDED", _podgroup("pg-a", "a"))
    state.on_related_event(PODGROUPS, "ADDED", _podgroup("pg-b", "b"))
    first = await state.on_pod_event("ADDED", _pod("a-0", podgroup="pg-a"))
    await state.on_pod_event("ADDED", _pod("b-0", podgroup="pg-b"))
    assert first == "WorkloadPodGroup/team/pg-a"  # its Workload is not there yet
    woken = state.on_related_event(WORKLOADS, "ADDED", WORKLOAD)
    assert "Workload/team/wl" in woken
    assert {"WorkloadPodGroup/team/pg-a", "WorkloadPodGroup/team/pg-b"} <= set(woken)
    assert state.groups["Workload/team/wl"].pods == {"team/a-0", "team/b-0"}
    assert not state.groups["WorkloadPodGroup/team/pg-a"].pods  # dropped at its next cycle


async def test_a_podgroup_that_comes_wakes_its_own_group_only() -> None:
    state = _state()
    for i in range(3):
        await state.on_pod_event("ADDED", _pod(f"p{i}", label=f"g{i}"))
    body = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "g1", "namespace": "team", "uid": "uid-g1"},
        "spec": {"minMember": 1},
    }
    assert state.on_related_event(COSCHEDULING, "ADDED", body) == ["PodGroup/team/g1"]
    assert state.group_object(state.groups["PodGroup/team/g1"].ref) is not None
    assert state.group_object(state.groups["PodGroup/team/g0"].ref) is None
