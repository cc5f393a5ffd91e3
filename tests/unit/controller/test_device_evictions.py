"""A NoExecute device taint on a device a running pod's claim holds evicts the pod, as a
drained node does (DisruptionTarget, then the delete): by slice or DeviceTaintRule,
unless the claim's request tolerates it (for tolerationSeconds only until they run out)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bridge.devices.taints import EVICTION_REASON, request_tolerations
from controller.device_evictions import noexecute_on, plan
from controller.model import DeletePod

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
BROKEN = {"key": "example.com/broken", "value": "ecc", "effect": "NoExecute"}


def running_pod(name: str = "p", node: str = "n1", phase: str = "Running") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}"},
        "spec": {"nodeName": node, "resourceClaims": [{"name": "g", "resourceClaimName": "c"}]},
        "status": {"phase": phase},
    }


def claim(tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "gpu.nvidia.com"}
    if tolerations is not None:
        exactly["tolerations"] = tolerations
    result = {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"}
    return {
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
        "status": {"allocation": {"devices": {"results": [result]}}},
    }


def slices(*taints: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    device: dict[str, Any] = {"name": "gpu-0"}
    if taints:
        device["taints"] = list(taints)
    spec = {"driver": "gpu.nvidia.com", "pool": {"name": "n1"}, "devices": [device]}
    return {"n1": [{"spec": spec}]}


def test_a_noexecute_slice_taint_evicts_the_pod_with_disruption_target() -> None:
    out = plan(7, [running_pod()], {("ns", "c"): claim()}, slices(BROKEN), [], NOW)
    (a,) = out.actions
    assert isinstance(a, DeletePod)
    assert (a.namespace, a.name, a.reason, a.disruption) == ("ns", "p", EVICTION_REASON, True)
    assert "gpu.nvidia.com/n1/gpu-0 of ResourceClaim c is tainted" in a.message
    assert "example.com/broken=ecc:NoExecute" in a.message
    assert "Slurm job 7 ends once its pods have stopped" in a.message


def test_a_device_taint_rule_evicts_too() -> None:
    rule = {"spec": {"deviceSelector": {"device": "gpu-0"}, "taint": BROKEN}}
    out = plan(7, [running_pod()], {("ns", "c"): claim()}, slices(), [rule], NOW)
    assert [a.name for a in out.actions if isinstance(a, DeletePod)] == ["p"]
    assert noexecute_on(slices()["n1"], [rule])
    assert not noexecute_on(slices({**BROKEN, "effect": "NoSchedule"})["n1"], [])


@pytest.mark.parametrize(
    ("pods", "tolerations", "taint"),
    [
        pytest.param([running_pod()], [{"operator": "Exists"}], BROKEN, id="tolerated"),
        pytest.param([running_pod()], None, {**BROKEN, "effect": "NoSchedule"}, id="noschedule"),
        pytest.param([running_pod(phase="Succeeded")], None, BROKEN, id="pod-done"),
    ],
)
def test_no_eviction_when_tolerated_not_noexecute_or_the_pod_is_done(
    pods: list[dict[str, Any]], tolerations: list[dict[str, Any]] | None, taint: dict[str, Any]
) -> None:
    assert plan(7, pods, {("ns", "c"): claim(tolerations)}, slices(taint), [], NOW).actions == []


def test_toleration_seconds_evict_once_run_out_and_say_when_to_look_again() -> None:
    taint = {**BROKEN, "timeAdded": (NOW - timedelta(seconds=30)).isoformat()}
    tol = [{"key": BROKEN["key"], "operator": "Exists", "tolerationSeconds": 60}]
    out = plan(7, [running_pod()], {("ns", "c"): claim(tol)}, slices(taint), [], NOW)
    assert out.actions == []
    assert out.due == NOW + timedelta(seconds=30)
    later = plan(7, [running_pod()], {("ns", "c"): claim(tol)}, slices(taint), [], out.due)
    assert len(later.actions) == 1


def test_a_first_available_choice_uses_its_own_tolerations() -> None:
    c = {
        "spec": {
            "devices": {
                "requests": [
                    {"name": "gpu", "firstAvailable": [{"name": "big", "tolerations": [{"x": 1}]}]}
                ]
            }
        }
    }
    assert request_tolerations(c, "gpu/big") == [{"x": 1}]
    assert request_tolerations(c, "gpu") == ()
