"""The MIG benchmark's checks (tests/bench/mig_fit.py), pure: reading what a job holds
from ``gres_detail``, and counting counter overcommits and double allocations over
samples of what every job holds."""

from __future__ import annotations

from bridge.devices.mig import nvidia_mig_gpu
from sandbox.slurm.mig import MigLayout
from tests.bench.mig_fit import (
    ClaimLedger,
    Held,
    Ledger,
    Pool,
    Window,
    claim_devices,
    held_gpus,
    parse_mix,
    replay,
)

MIXED = MigLayout.parse("a100,3g.40gb+2g.20gb+1g.10gb*2")


def ledger(layout: MigLayout = MIXED) -> Ledger:
    return Ledger(layout, nvidia_mig_gpu("A100-80GB"))


def test_gres_detail_names_indices_counts_and_leaves_out_types_held_none_of() -> None:
    assert held_gpus("gpu:1g.10gb:2(IDX:0,3-4)") == (Held("1g.10gb", 2, (0, 3, 4)),)
    untyped = "gpu:a100:0(IDX:),gpu:3g.40gb:0(IDX:),gpu:1g.10gb:1(IDX:3)"
    assert held_gpus(untyped) == (Held("1g.10gb", 1, (3,)),)
    assert held_gpus("gpu(CNT:2)") == (Held("", 2, ()),)
    assert held_gpus("gpu:a100:1(IDX:0),tmpfs(CNT:1)") == (Held("a100", 1, (0,)),)


def test_slices_that_fill_a_gpu_exactly_are_no_overcommit() -> None:
    lg = ledger()
    lg.sample(
        {
            1: {"n0": (Held("a100", 1, (0,)),)},
            2: {"n0": (Held("3g.40gb", 1, (1,)),)},
            3: {"n0": (Held("2g.20gb", 1, (2,)),)},
            4: {"n0": (Held("1g.10gb", 2, (3, 4)),)},
        }
    )
    assert (lg.overcommits, len(lg.doubles), lg.mismatches, lg.peak) == (0, 0, 0, 5)


def test_one_slice_held_by_two_jobs_is_a_double_allocation_and_may_overcommit() -> None:
    lg = ledger()
    both = {"n0": (Held("3g.40gb", 1, (1,)),)}
    lg.sample({1: both, 2: both, 3: {"n0": (Held("2g.20gb", 1, (2,)),)}})
    lg.sample({1: both, 2: both})  # the same pair seen again: counted once
    assert len(lg.doubles) == 1
    # 3g twice + 2g = 8 compute slices of 7: over
    assert lg.overcommits == 1


def test_a_layout_no_gpu_holds_is_caught_as_overcommitted_when_its_slices_are_held() -> None:
    lg = ledger(MigLayout.parse("4g.40gb+4g.40gb"))  # not checked: 8 compute slices
    lg.sample({1: {"n0": (Held("4g.40gb", 1, (0,)),)}})
    assert lg.overcommits == 0
    lg.sample({1: {"n0": (Held("4g.40gb", 1, (0,)),)}, 2: {"n0": (Held("4g.40gb", 1, (1,)),)}})
    assert lg.overcommits == 1
    assert not lg.doubles


def test_a_held_type_other_than_the_layouts_at_its_index_is_a_mismatch() -> None:
    lg = ledger()
    lg.sample({1: {"n0": (Held("1g.10gb", 1, (1,)),)}})
    assert lg.mismatches == 1


def test_the_mix_repeats_kinds() -> None:
    assert parse_mix("1g.10gb*2,whole") == ["1g.10gb", "1g.10gb", "whole"]


def test_job_windows_that_overlap_on_one_slice_are_a_double_however_short() -> None:
    a = Window(1, 0.0, 1.0, {"n0": (Held("1g.10gb", 1, (3,)),)})
    b = Window(2, 0.9, 2.0, {"n0": (Held("1g.10gb", 1, (3,)),)})
    after = Window(3, 2.0, 3.0, {"n0": (Held("1g.10gb", 1, (3,)),)})  # b had ended
    lg = ledger()
    replay(lg, [a, b, after])
    assert lg.doubles == {("n0", 3, frozenset({1, 2}))}
    assert lg.samples == 3


def _pool_obj(node: str) -> list[dict[str, object]]:
    counters = {"mem": {"value": "2"}}
    return [
        {
            "spec": {
                "driver": "gpu.nvidia.com",
                "pool": {"name": node},
                "sharedCounters": [{"name": "gpu-0-counter-set", "counters": counters}],
            }
        },
        {
            "spec": {
                "driver": "gpu.nvidia.com",
                "pool": {"name": node},
                "devices": [
                    {
                        "name": name,
                        "attributes": {"profile": {"string": profile}},
                        "consumesCounters": [
                            {"counterSet": "gpu-0-counter-set", "counters": {"mem": {"value": m}}}
                        ],
                    }
                    for name, profile, m in (("a", "1g", "1"), ("b", "1g", "1"), ("big", "2g", "2"))
                ],
            }
        },
    ]


def _claim(*devices: str) -> dict[str, object]:
    results = [{"driver": "gpu.nvidia.com", "pool": "n0", "device": d} for d in devices]
    return {"status": {"allocation": {"devices": {"results": results}}}}


def test_claims_whose_devices_overlap_in_a_counter_set_are_an_overcommit() -> None:
    pool = Pool.of(_pool_obj("n0"))  # type: ignore[arg-type]
    assert pool.attributes[("gpu.nvidia.com", "n0", "big")] == {"profile": "2g"}
    lg = ClaimLedger(pool)
    lg.sample({"c1": claim_devices(_claim("a")), "c2": claim_devices(_claim("b"))})
    assert (lg.overcommits, lg.doubles) == (0, set())
    lg.sample({"c1": claim_devices(_claim("a")), "c3": claim_devices(_claim("big"))})
    assert lg.overcommits == 1  # 1 + 2 of 2
    assert not lg.doubles  # two devices, one counter set


def test_one_device_in_two_claims_is_a_double_allocation() -> None:
    lg = ClaimLedger(Pool.of(_pool_obj("n0")))  # type: ignore[arg-type]
    lg.sample({"c1": claim_devices(_claim("a")), "c2": claim_devices(_claim("a"))})
    assert lg.doubles == {(("gpu.nvidia.com", "n0", "a"), frozenset({"c1", "c2"}))}
    assert lg.unknown == 0
    lg.sample({"c4": claim_devices(_claim("ghost"))})
    assert lg.unknown == 1
    assert claim_devices({"status": {}}) == ()
