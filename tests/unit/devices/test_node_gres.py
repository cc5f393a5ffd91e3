"""The node's devices as Slurm GRES, and whether Slurm and Kubernetes agree (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.config import DEFAULT_GRES_MAPPING
from bridge.devices.node_gres import (
    Agreement,
    GresKind,
    GresTable,
    compare,
    gres_text,
    kube_inventory,
    parse_slurm_gres,
    registration_gres,
    slice_inventory,
)
from bridge.errors import InvalidInput
from sandbox.controllers import dra_driver as sandbox_dra

DRIVERS = {"gpu.nvidia.com": "gpu"}
TABLE = GresTable.of(DEFAULT_GRES_MAPPING)
GPU = GresKind("gpu")
MIG1 = GresKind("gpu", "1g.10gb")


def gpu(i: int, consumes: dict[str, Any] | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {"name": f"gpu-{i}", "attributes": {"type": {"string": "gpu"}}}
    if consumes:
        d["consumesCounters"] = [consumes]
    return d


def mig(name: str, profile: str, consumes: dict[str, Any] | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {
        "name": name,
        "attributes": {"type": {"string": "mig"}, "profile": {"string": profile}},
    }
    if consumes:
        d["consumesCounters"] = [consumes]
    return d


def uses(cset: str, slices: list[int], sms: int) -> dict[str, Any]:
    counters = {f"memory-slice-{k}": {"value": "1"} for k in slices}
    counters["multiprocessors"] = {"value": str(sms)}
    return {"counterSet": cset, "counters": counters}


def counter_set(cset: str) -> dict[str, Any]:
    counters = {f"memory-slice-{k}": {"value": "1"} for k in range(7)}
    counters["multiprocessors"] = {"value": "98"}
    return {"name": cset, "counters": counters}


def rslice(name: str, devices: list[dict[str, Any]], counters: list[Any] | None = None) -> Any:
    spec: dict[str, Any] = {"driver": "gpu.nvidia.com", "nodeName": "n", "pool": {"name": "n"}}
    if counters is not None:
        spec["sharedCounters"] = counters
    else:
        spec["devices"] = devices
    return {"metadata": {"name": name}, "spec": spec}


def partitionable(g: int) -> list[Any]:
    """GPU ``g`` as NVIDIA's driver publishes it with partitionable devices: the whole GPU,
    seven 1g.10gb placements and two 3g.40gb ones, all drawing on one counter set."""
    cs = f"gpu-{g}-counter-set"
    devices = [gpu(g, uses(cs, list(range(7)), 98))]
    devices += [mig(f"gpu-{g}-mig-1g10gb-{k}", "1g.10gb", uses(cs, [k], 14)) for k in range(7)]
    devices += [
        mig(f"gpu-{g}-mig-3g40gb-{k}", "3g.40gb", uses(cs, [k, k + 1, k + 2], 42)) for k in (0, 4)
    ]
    return [rslice(f"n-gpu-{g}", devices), rslice(f"n-gpu-{g}-counters", [], [counter_set(cs)])]


def verdict(slurm: str, slices: list[Any], node: dict[str, Any] | None = None) -> Any:
    inv = kube_inventory(node or {}, slices, DRIVERS, TABLE)
    return compare(slurm, inv, slurm_node="n", table=TABLE)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("", {}),
        ("(null)", {}),
        ("gpu:2", {GPU: 2}),
        ("gpu", {GPU: 1}),
        ("gpu:1g.10gb:7(S:0)", {MIG1: 7}),
        ("gpu:a100:1(S:0-1),gpu:1g.10gb:7", {GresKind("gpu", "a100"): 1, MIG1: 7}),
        ("gpu:2,shard:8", {GPU: 2, GresKind("shard"): 8}),
    ],
)
def test_slurm_node_gres_is_read_per_kind(text: str, want: dict[GresKind, int]) -> None:
    assert parse_slurm_gres(text) == want


def test_a_malformed_slurm_gres_names_the_field_and_the_item() -> None:
    with pytest.raises(InvalidInput) as e:
        parse_slurm_gres("gpu:1g.10gb:7 x", field_name="Slurm node n: gres")
    assert "Slurm node n: gres" in str(e.value)
    assert "'gpu:1g.10gb:7 x'" in str(e.value)


def test_whole_gpus_that_match_slurms_count_agree() -> None:
    v = verdict("gpu:2(S:0)", [rslice("s", [gpu(0), gpu(1)])])
    assert v.status is Agreement.COMPATIBLE
    assert v.reason == "SlurmGRESCompatible"


def test_a_gpu_typed_by_model_in_slurm_counts_as_a_whole_gpu() -> None:
    assert verdict("gpu:a100:2", [rslice("s", [gpu(0), gpu(1)])]).status is Agreement.COMPATIBLE


def test_slurm_with_more_gpus_than_kubernetes_publishes_disagrees_naming_both_counts() -> None:
    v = verdict("gpu:3", [rslice("s", [gpu(0), gpu(1)])])
    assert v.status is Agreement.INCOMPATIBLE
    assert v.reason == "IncompatibleSlurmGRES"
    assert "Slurm has gpu:3 but the node's ResourceSlices have 2 such device(s)" in v.message


def test_kubernetes_with_more_gpus_than_slurm_disagrees() -> None:
    v = verdict("gpu:1", [rslice("s", [gpu(0), gpu(1)])])
    assert v.status is Agreement.INCOMPATIBLE
    assert "have 2 device(s) of gpu but Slurm has 1" in v.message


def test_slices_that_slurm_has_as_whole_gpus_disagree_on_the_type() -> None:
    devices = [mig(f"gpu-0-mig-{k}", "1g.10gb") for k in range(7)]
    v = verdict("gpu:2", [rslice("s", devices)])
    assert v.status is Agreement.INCOMPATIBLE
    assert "Slurm has gpu:2 but the node's ResourceSlices have 0 such device(s)" in v.message
    assert "7 device(s) of gpu:1g.10gb that Slurm does not have" in v.message


def test_a_mig_profile_is_the_typed_gres_of_the_mapping_table() -> None:
    table = GresTable.of({**DEFAULT_GRES_MAPPING, "nvidia.com/mig-1g.10gb": "gpu:a100_1g.10gb"})
    inv = slice_inventory([rslice("s", [mig("m0", "1g.10gb")])], DRIVERS, table)
    assert inv.counts() == {GresKind("gpu", "a100_1g.10gb"): 1}
    v = compare("gpu:a100_1g.10gb:1", inv, slurm_node="n", table=table)
    assert v.status is Agreement.COMPATIBLE


def test_seven_slices_of_a_partitionable_gpu_fit_its_counters() -> None:
    assert verdict("gpu:1g.10gb:7", partitionable(0)).status is Agreement.COMPATIBLE


def test_a_whole_gpu_of_a_partitionable_gpu_agrees_with_gpu_1() -> None:
    assert verdict("gpu:1", partitionable(0)).status is Agreement.COMPATIBLE


def test_slurm_slices_that_overcommit_the_gpus_counters_disagree() -> None:
    # 3g.40gb at 0-2 and 4-6 leave one memory slice: five 1g.10gb do not fit beside them
    v = verdict("gpu:3g.40gb:2,gpu:1g.10gb:5", partitionable(0))
    assert v.status is Agreement.INCOMPATIBLE
    assert "Slurm has gpu:1g.10gb:5 but only 1 of them fit the GPUs' shared counters" in v.message


def test_a_mixed_node_with_a_whole_gpu_and_slices_of_another_agrees() -> None:
    slices = [rslice("a", [gpu(0)]), *partitionable(1)]
    assert verdict("gpu:1,gpu:1g.10gb:7", slices).status is Agreement.COMPATIBLE


def test_a_partitionable_gpu_slurm_does_not_use_disagrees() -> None:
    v = verdict("gpu:1", [rslice("a", [gpu(0)]), *partitionable(1)])
    assert v.status is Agreement.INCOMPATIBLE
    assert "no GRES of Slurm uses the GPU(s) of counter set gpu-1-counter-set" in v.message


def test_without_gpu_slices_the_device_plugins_allocatable_is_kubernetes_side() -> None:
    node = {"status": {"allocatable": {"cpu": "8", "nvidia.com/mig-1g.10gb": "7"}}}
    v = verdict("gpu:1g.10gb:7", [], node)
    assert v.status is Agreement.COMPATIBLE
    assert "allocatable" in v.message
    assert verdict("gpu:2", [], node).status is Agreement.INCOMPATIBLE


def test_a_node_without_gpus_on_either_side_agrees_and_other_gres_are_not_compared() -> None:
    assert verdict("shard:4", []).status is Agreement.COMPATIBLE
    assert verdict("", [rslice("cpu", [])]).status is Agreement.COMPATIBLE


def test_an_unreadable_slurm_gres_is_unknown_not_incompatible() -> None:
    v = verdict("gpu:?", [rslice("s", [gpu(0)])])
    assert v.status is Agreement.UNKNOWN
    assert v.reason == "SlurmGRESVerificationError"


def test_registration_takes_the_whole_gpu_of_a_partitionable_gpu_and_set_up_slices() -> None:
    inv = slice_inventory([rslice("a", [gpu(0)]), *partitionable(1)], DRIVERS, TABLE)
    assert gres_text(registration_gres(inv)) == "gpu:2"
    static = [rslice("s", [mig(f"m{k}", "1g.10gb") for k in range(7)]), rslice("g", [gpu(1)])]
    inv = slice_inventory(static, DRIVERS, TABLE)
    assert gres_text(registration_gres(inv)) == "gpu:1,gpu:1g.10gb:7"


def test_a_malformed_counter_names_the_slice_and_the_device() -> None:
    bad = gpu(0, {"counterSet": "c", "counters": {"memory": {"value": "lots"}}})
    with pytest.raises(InvalidInput) as e:
        slice_inventory([rslice("s", [bad])], DRIVERS, TABLE)
    assert "ResourceSlice s: device gpu-0: consumesCounters[c].memory.value" in str(e.value)


# --------------------------------------------------------------------------- the stand-in
# What the sandbox's NVIDIA driver stand-in publishes (partitionable A100-80GB GPUs: the
# whole GPU and every placement of five profiles on one counter set per GPU).
@pytest.mark.parametrize(
    ("slurm", "status"),
    [
        ("gpu:1g.10gb:7", Agreement.COMPATIBLE),
        ("gpu:1", Agreement.COMPATIBLE),
        ("gpu:2g.20gb:3,gpu:1g.10gb:1", Agreement.COMPATIBLE),
        ("gpu:3g.40gb:2", Agreement.COMPATIBLE),
        ("gpu:1g.10gb:8", Agreement.INCOMPATIBLE),
        ("gpu:7g.80gb:1,gpu:1g.10gb:1", Agreement.INCOMPATIBLE),
        ("", Agreement.INCOMPATIBLE),
    ],
)
def test_slurms_gres_against_the_sandbox_drivers_partitionable_gpu(
    slurm: str, status: Agreement
) -> None:
    assert verdict(slurm, sandbox_dra.mig_slices("n", 1)).status is status


def test_a_mixed_node_of_the_sandbox_driver_agrees_with_a_typed_whole_gpu_beside_slices() -> None:
    slices = sandbox_dra.mig_slices("n", 1, full_gpus=1)
    assert verdict("gpu:a100:1,gpu:1g.10gb:7", slices).status is Agreement.COMPATIBLE
    inv = slice_inventory(slices, DRIVERS, TABLE)
    assert gres_text(registration_gres(inv)) == "gpu:2"  # whole GPUs unless set up as slices
