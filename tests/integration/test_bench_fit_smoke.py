"""CI smoke of the exact-fit benchmark (tests/bench/fit.py): two gangs of each kind per
mode. It checks the report's shape, that every gang got bound, and the figure that is a
correctness property, not a speed: a hetjob holds exactly the GPUs its pods ask. The MIG
smoke (``--mig``, on a sandbox of its own) checks the same of slices, and that no slice
is held twice and no GPU's counters are overcommitted."""

from __future__ import annotations

import pytest

from tests.bench.fit import MODES, parser, run

pytestmark = [pytest.mark.slurm, pytest.mark.bench]


async def test_fit_benchmark_reports_every_key_and_hetjobs_hold_exactly_the_gpus_asked() -> None:
    args = parser().parse_args(["--gangs", "6", "--hold", "0.2", "--cpu-nodes", "1"])
    report = await run(args)
    assert list(report)[:4] == ["gangs", "gpus_requested", "gpus_allocated", "gpu_fit"]
    assert report["bound"] == dict.fromkeys(MODES, 6)
    assert report["gpu_fit"]["hetjob_exclusive"] == 1.0
    assert report["gpu_fit"]["hetjob_shared"] == 1.0
    # sized by the largest member, the CPU drivers and leaders hold GPUs too
    assert report["gpu_fit"]["largest_exclusive"] > 1.0
    assert report["gpu_fit"]["largest_shared"] > 1.0
    for mode in MODES:
        assert report["gpus_requested"][mode] > 0
        assert report["wait_s"][mode]["p99"] >= report["wait_s"][mode]["p50"] >= 0
        assert report["slurm_calls_per_gang"][mode] > 0
        assert report["cpu_fit"][mode] > 0


async def test_mig_benchmark_holds_every_slice_asked_without_overcommit_or_double() -> None:
    """``--mig``: one MIG node (a whole GPU and a GPU cut in four), more pods than devices;
    Slurm held each pod the device type it asked, never a slice twice, never more than a
    GPU's compute and memory slices."""
    args = parser().parse_args(["--mig", "--pods", "16", "--hold", "0.3", "--mig-nodes", "1"])
    report = await run(args)
    assert report["bound"] == 16
    assert report["in_flight"] > report["nodes"]["devices_per_node"]  # busy: pods wait
    assert report["slices_requested"] > 0
    assert report["slices_allocated"] == report["slices_requested"]
    assert report["whole_gpus_requested"] > 0
    assert report["whole_gpus_allocated"] == report["whole_gpus_requested"]
    assert report["wrong_type"] == 0
    assert report["counter_overcommits"] == 0
    assert report["double_allocations"] == 0
    assert report["layout_mismatches"] == 0
    assert report["samples"] > 0
    assert report["wait_s"]["p99"] >= report["wait_s"]["p50"] >= 0
