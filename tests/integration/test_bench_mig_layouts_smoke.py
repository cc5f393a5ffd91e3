"""CI smoke of the every-layout MIG benchmark (``python -m tests.bench.fit --mig-layouts
random``, tests/bench/mig_layouts.py): a few random valid nodes of every model and
publication form. In process (the packer, the condition and Slurm-style jobs replayed), so
it needs no sandbox; the figures that are correctness properties must be 0."""

from __future__ import annotations

import pytest

from tests.bench.fit import parser, run

pytestmark = [pytest.mark.bench]


async def test_random_mig_layouts_pack_and_no_job_is_given_back_overcommitted_or_doubled() -> None:
    args = parser().parse_args(
        ["--mig-layouts", "random", "--seed", "40", "--mig-layout-nodes", "8", "--mig-steps", "20"]
    )
    report = await run(args)
    assert report["mig_nodes"] == 8
    assert report["jobs"] > 0
    for key in (
        "mig_packing_failures",
        "condition_false",
        "mig_givebacks",
        "counter_overcommits",
        "double_allocations",
        "wrong_profile",
    ):
        assert report[key] == 0, (key, report["failures"])
    assert report["packing_ms_p99"] >= report["packing_ms_p50"] >= 0
