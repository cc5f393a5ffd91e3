"""DRA device taints (KEP-5055): Kubernetes' toleration rule for devices, DeviceTaintRule
selection, when a NoExecute taint evicts, and that the claim allocation never gives a
device tainted NoSchedule/NoExecute to a request that does not tolerate it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bridge.devices.allocation import SlurmNodeView, allocate_pod
from bridge.devices.taints import (
    describe,
    eviction,
    rule_matches,
    untolerated,
    with_rules,
)
from bridge.errors import DeviceAllocationError, DeviceMismatch
from bridge.translate.dra import DraInputs, pod_devices
from tests.unit.translate.test_dra import CLASSES, GRES, claim_spec, exactly, gpu_slice, names, pod

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
BROKEN = {"key": "example.com/broken", "value": "ecc", "effect": "NoExecute"}
HOT = {"key": "example.com/hot", "effect": "NoSchedule"}
INFO = {"key": "example.com/info", "effect": "None"}


@pytest.mark.parametrize(
    ("tolerations", "taint", "tolerated"),
    [
        pytest.param([], HOT, False, id="none"),
        pytest.param([{"operator": "Exists"}], BROKEN, True, id="exists-without-key-all"),
        pytest.param([{"key": "example.com/hot", "operator": "Exists"}], HOT, True, id="exists"),
        pytest.param(
            [{"key": "example.com/broken", "operator": "Equal", "value": "ecc"}],
            BROKEN,
            True,
            id="equal-value",
        ),
        pytest.param(
            [{"key": "example.com/broken", "value": "other"}], BROKEN, False, id="other-value"
        ),
        pytest.param(
            [{"key": "example.com/hot", "operator": "Exists", "effect": "NoExecute"}],
            HOT,
            False,
            id="a-noexecute-toleration-is-not-a-noschedule-one",
        ),
        pytest.param(
            [{"key": "example.com/hot", "operator": "Exists", "effect": "NoSchedule"}],
            HOT,
            True,
            id="same-effect",
        ),
    ],
)
def test_a_request_tolerates_a_device_taint_by_kubernetes_rule(
    tolerations: list[dict[str, Any]], taint: dict[str, Any], tolerated: bool
) -> None:
    assert (untolerated([taint], tolerations) == []) is tolerated


def test_an_informational_taint_never_blocks() -> None:
    assert untolerated([INFO], []) == []


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        pytest.param(None, False, id="no-selector-matches-nothing"),
        pytest.param({}, True, id="empty-selector-matches-everything"),
        pytest.param({"driver": "gpu.nvidia.com"}, True, id="driver"),
        pytest.param({"driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"}, True, id="all"),
        pytest.param({"pool": "n2"}, False, id="other-pool"),
        pytest.param({"device": "gpu-1"}, False, id="other-device"),
    ],
)
def test_a_device_taint_rule_selects_by_driver_pool_and_device(
    selector: dict[str, str] | None, matches: bool
) -> None:
    spec: dict[str, Any] = {"taint": HOT}
    if selector is not None:
        spec["deviceSelector"] = selector
    assert rule_matches({"spec": spec}, "gpu.nvidia.com", "n1", "gpu-0") is matches


def test_rules_add_their_taints_to_copies_of_the_matching_devices() -> None:
    s = gpu_slice("n1", 2)
    rule = {"spec": {"deviceSelector": {"device": "gpu-1"}, "taint": BROKEN}}
    (out,) = with_rules([s], [rule])
    assert [d.get("taints") for d in out["spec"]["devices"]] == [None, [BROKEN]]
    assert "taints" not in s["spec"]["devices"][1]  # the cached slice is not changed
    assert describe(BROKEN) == "example.com/broken=ecc:NoExecute"


@pytest.mark.parametrize(
    ("seconds", "added_ago", "evicts", "due_in"),
    [
        pytest.param(None, 0, False, None, id="tolerated-forever"),
        pytest.param(60, 10, False, 50, id="tolerated-for-another-50s"),
        pytest.param(60, 61, True, None, id="toleration-ran-out"),
        pytest.param(0, 0, True, None, id="zero-seconds-evicts-at-once"),
    ],
)
def test_a_noexecute_taint_evicts_unless_tolerated_and_only_for_toleration_seconds(
    seconds: int | None, added_ago: int, evicts: bool, due_in: int | None
) -> None:
    taint = {**BROKEN, "timeAdded": (NOW - timedelta(seconds=added_ago)).isoformat()}
    tol: dict[str, Any] = {"key": BROKEN["key"], "operator": "Exists"}
    if seconds is not None:
        tol["tolerationSeconds"] = seconds
    got = eviction([taint], [tol], NOW)
    assert bool(got.now) is evicts
    assert got.due == (None if due_in is None else NOW + timedelta(seconds=due_in))
    assert eviction([taint], [], NOW).now == (taint,)  # not tolerated at all
    assert eviction([HOT], [], NOW).now == ()  # NoSchedule never evicts


def tainted_slice(*taints: dict[str, Any], device: int = 0, n: int = 2) -> dict[str, Any]:
    s = gpu_slice("n1", n)
    s["spec"]["devices"][device]["taints"] = list(taints)
    return s


def gpu_claim_requests(**exact: Any) -> Any:
    claims = {"c": {"spec": claim_spec(exactly("gpu", "gpu.nvidia.com", **exact))}}
    inputs = DraInputs(classes=CLASSES, claims=claims, device_class_gres=GRES)
    p = pod(claims=[{"name": "g", "resourceClaimName": "c"}])
    return pod_devices(p, inputs).requests


COUNTED = SlurmNodeView(gres={"gpu": None}, counts={"gpu": 1})  # an external node
KEY = ("g", "gpu")


@pytest.mark.parametrize("taint", [HOT, BROKEN], ids=["noschedule", "noexecute"])
def test_where_slurm_only_counts_a_tainted_device_is_skipped(taint: dict[str, Any]) -> None:
    got = allocate_pod("n1", gpu_claim_requests(), COUNTED, [tainted_slice(taint)], set())
    assert names(got) == {KEY: ["gpu-1"]}


def test_a_device_a_rule_taints_is_skipped_too() -> None:
    rule = {"spec": {"deviceSelector": {"pool": "n1", "device": "gpu-0"}, "taint": HOT}}
    slices = with_rules([gpu_slice("n1", 2)], [rule])
    got = allocate_pod("n1", gpu_claim_requests(), COUNTED, slices, set())
    assert names(got) == {KEY: ["gpu-1"]}


def test_a_request_that_tolerates_the_taint_may_get_the_device() -> None:
    reqs = gpu_claim_requests(tolerations=[{"key": HOT["key"], "operator": "Exists"}])
    got = allocate_pod("n1", reqs, COUNTED, [tainted_slice(HOT)], set())
    assert names(got) == {KEY: ["gpu-0"]}
    assert names(allocate_pod("n1", gpu_claim_requests(), COUNTED, [tainted_slice(INFO)], set()))[
        KEY
    ] == ["gpu-0"]  # informational: no effect


def test_the_only_free_device_tainted_leaves_the_claim_without_one() -> None:
    with pytest.raises(DeviceAllocationError) as e:
        allocate_pod("n1", gpu_claim_requests(), COUNTED, [tainted_slice(HOT, n=1)], set())
    assert "node n1" in str(e.value)


def test_slurm_giving_a_tainted_device_is_a_mismatch_naming_the_taint() -> None:
    """A slurmd node: Slurm's index names the tainted GPU. The job is given back
    (DeviceMismatch), never the device."""
    indexed = SlurmNodeView(gres={"gpu": (0,)})
    with pytest.raises(DeviceMismatch) as e:
        allocate_pod("n1", gpu_claim_requests(), indexed, [tainted_slice(BROKEN)], set())
    assert "gpu-0 is tainted example.com/broken=ecc:NoExecute" in str(e.value)
    assert "does not tolerate" in str(e.value)


def test_claim_tolerations_are_read_and_no_longer_refused() -> None:
    tol = {"key": HOT["key"], "operator": "Exists"}
    (r,) = gpu_claim_requests(tolerations=[tol])
    assert r.tolerations == (tol,)
