"""CI smoke of the scale benchmark (tests/bench/scale.py, ``--smoke`` sizes): the same code
path, scheduler and controller as their own processes, a tiny workload. It checks the
report's keys and that every phase ran; the figures are never asserted (shared machines)."""

from __future__ import annotations

import math

import pytest

from tests.bench.scale import KEYS, parser, run
from tests.integration.conftest import SlurmSandbox

pytestmark = [pytest.mark.slurm, pytest.mark.bench]


async def test_scale_benchmark_reports_every_key_from_both_processes(
    sandbox: SlurmSandbox,
) -> None:
    report = await run(parser().parse_args(["--smoke"]))
    assert list(report)[: len(KEYS)] == list(KEYS)
    for key in KEYS:
        assert isinstance(report[key], float | int), key
        assert math.isfinite(report[key]), key
    assert report["wave1"]["pods"] + report["wave2"]["pods"] == 6
    assert sum(report["pending_reasons"].values()) == 3
    assert report["finished_jobs_in_table"] >= 30
