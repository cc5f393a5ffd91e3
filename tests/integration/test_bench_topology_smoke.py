"""CI smoke of the topology benchmark (tests/bench/topology.py): a few gangs per mode on
its own tree:2x4 sandbox. It checks the report's shape, that every gang got bound, and the
one figure that is a correctness property, not a speed: no required gang straddles."""

from __future__ import annotations

import pytest

from tests.bench.topology import MODES, parser, run

pytestmark = [pytest.mark.slurm, pytest.mark.bench]


async def test_topology_benchmark_reports_every_key_and_no_required_gang_straddles() -> None:
    args = parser().parse_args(["--gangs", "6", "--hold", "0.5"])
    report = await run(args)
    assert list(report)[:5] == [
        "gangs",
        "straddling_required",
        "straddling_none",
        "wait_s_p50",
        "slurm_calls_per_gang",
    ]
    assert report["straddling_required"] == 0
    assert report["bound"] == dict.fromkeys(MODES, 6)
    for mode in MODES:
        assert report["wait_s_p50"][mode] >= 0
        assert report["slurm_calls_per_gang"][mode] > 0
