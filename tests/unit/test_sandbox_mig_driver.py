"""The sandbox's stand-in for NVIDIA's DRA driver with partitionable MIG devices: what
each device consumes of its GPU's counter set adds up as on a real A100/H100 80 GB."""

from __future__ import annotations

from typing import Any

from sandbox.controllers import dra_driver


def _value(c: dict[str, Any]) -> int:
    v = str(c["value"])
    return int(v[:-2]) if v.endswith("Gi") else int(v)


def _pool(node: str, **kw: Any) -> tuple[list[dict[str, Any]], dict[str, dict[str, int]]]:
    devices_slice, counters_slice = dra_driver.mig_slices(node, **kw)
    sets = {
        s["name"]: {k: _value(c) for k, c in s["counters"].items()}
        for s in counters_slice["spec"]["sharedCounters"]
    }
    return devices_slice["spec"]["devices"], sets


def test_full_gpu_consumes_its_whole_counter_set_so_no_slice_fits_beside_it() -> None:
    devices, sets = _pool("n1", gpus=1)
    full = next(d for d in devices if d["name"] == "gpu-0")
    (consumed,) = full["consumesCounters"]
    assert {k: _value(c) for k, c in consumed["counters"].items()} == sets["gpu-0-counter-set"]


def test_seven_1g_slices_fit_one_gpu_and_an_eighth_placement_does_not_exist() -> None:
    devices, sets = _pool("n1", gpus=1)
    small = [d for d in devices if d["attributes"].get("profile") == {"string": "1g.10gb"}]
    assert [d["name"] for d in small] == [f"gpu-0-mig-1g10gb-19-{i}" for i in range(7)]
    total: dict[str, int] = {}
    for d in small:
        for k, c in d["consumesCounters"][0]["counters"].items():
            total[k] = total.get(k, 0) + _value(c)
    assert all(total[k] <= sets["gpu-0-counter-set"][k] for k in total)
    assert total["multiprocessors"] == sets["gpu-0-counter-set"]["multiprocessors"]


def test_mixed_node_has_a_whole_gpu_without_counters_and_a_partitionable_one() -> None:
    devices, sets = _pool("n1", gpus=1, full_gpus=1)
    assert list(sets) == ["gpu-1-counter-set"]
    whole = next(d for d in devices if d["name"] == "gpu-0")
    assert "consumesCounters" not in whole
    assert whole["attributes"]["type"] == {"string": "gpu"}
    migs = [d for d in devices if d["attributes"]["type"] == {"string": "mig"}]
    assert {d["attributes"]["parentIndex"]["int"] for d in migs} == {1}
    assert len(devices) == 1 + 1 + 7 + 4 + 3 + 2 + 1 + 1  # every placement of the A100-80GB
