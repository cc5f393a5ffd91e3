"""CI smoke of the expected-start benchmark (tests/bench/eta.py): a few gangs and native
jobs, each run for a fraction of its time limit (so the figures mean nothing: Slurm plans
for the whole limit). It checks the report's keys, that gangs waited and showed an
estimate (the plans re-read every 2 s: the jobs are short), and the one figure that is a
correctness property: no gang Slurm had planned went without an estimate on its pods."""

from __future__ import annotations

import pytest

from tests.bench.eta import parser, run
from tests.integration.conftest import SlurmSandbox

pytestmark = [pytest.mark.slurm, pytest.mark.bench]


async def test_eta_benchmark_reports_every_key_and_no_planned_gang_lacks_an_estimate(
    sandbox: SlurmSandbox,
) -> None:
    # a full partition (the natives fill it first) and a 2 s re-read of the plans: the
    # gangs wait longer than a re-read, so they show an estimate
    args = ["--gangs", "4", "--natives", "6", "--run-fraction", "0.15", "--refresh", "2"]
    report = await run(parser().parse_args(args))
    assert list(report)[:5] == [
        "gangs",
        "error_s",
        "squeue_start_error_s",
        "within_bf_interval",
        "planned_without_estimate",
    ]
    assert report["planned_without_estimate"] == 0
    assert report["gangs_total"] == 4
    assert report["gangs"] >= 1  # the queue was full: gangs waited with a plan shown
    assert report["error_s"]["p50"] is not None
