"""CI smoke of the scheduler benchmark (tests/bench/scheduler.py; it lives here because a
test module inside tests/bench would put tests/bench on sys.path, where its scheduler.py
shadows the scheduler package): the same code path with a
tiny workload. It checks the report's shape and that every pod got bound; the figures
themselves are never asserted (shared, noisy machines)."""

from __future__ import annotations

import math
import statistics

import pytest

from tests.bench.scheduler import parser, run
from tests.integration.conftest import SlurmSandbox

pytestmark = [pytest.mark.slurm, pytest.mark.bench]

KEYS = (
    "pods_per_s",
    "p50_ms",
    "p99_ms",
    "raw_pods_per_s",
    "raw_ratio",
    "steady_rest_calls_per_s",
    "rss_mb",
    "paced_p50_ms",
    "paced_p99_ms",
    "raw_p50_ms",
    "gang_4_s",
    "cpu_ms_per_pod",
    "immediate_share",
    "refused_allocations",
    "queued_start_to_bound_p50_ms",
    "queued_start_to_bound_p99_ms",
)


async def test_scheduler_benchmark_reports_every_key_and_binds_every_pod(
    sandbox: SlurmSandbox,
) -> None:
    args = parser().parse_args(
        [
            "--pods",
            "6",
            "--paced",
            "2",
            "--rate",
            "50",
            "--gang",
            "4",
            "--gang-reps",
            "2",
            "--gang-pause",
            "0.2",
            "--pending",
            "3",
            "--window",
            "1",
            "--settle",
            "0.5",
        ]
    )
    report = await run(args)
    assert list(report)[: len(KEYS)] == list(KEYS)
    for key in KEYS:
        assert isinstance(report[key], float | int), key
        assert math.isfinite(report[key]), key
    assert report["bound"] == 6
    assert 0 <= report["immediate_share"] <= 1
    assert report["gang_bound"] == 4  # every pod of each gang
    assert len(report["gang_4_reps_s"]) == 2
    assert report["gang_4_s"] == round(statistics.median(report["gang_4_reps_s"]), 3)
    assert report["gang_timeline_ms"]["last_bound"] >= report["gang_timeline_ms"]["first_link"]
    assert report["pending_pods"] == 3
    assert sum(report["pending_reasons"].values()) == 3
    assert report["queued_started_jobs"] == 3  # the blocker ended: Slurm started them all
    # each gang's API requests and CPU, and the scheduler's CPU between gangs
    assert [r["PATCH pods 200"] for r in report["gang_requests"]] == [4, 4]  # the links
    assert [r["POST pods/binding 201"] for r in report["gang_requests"]] == [4, 4]
    assert all(t["scheduler_cpu"] >= 0 for t in report["gang_reps_timeline_ms"])
    assert len(report["gang_pause_scheduler_cpu_ms"]) == 1


async def test_scheduler_benchmark_runs_the_scheduler_as_admin_on_the_bare_api_server(
    sandbox: SlurmSandbox,
) -> None:
    """What 87f2bfe's bench ran (the admin's identity, no controllers beside the API
    server): the factors docs/benchmarks.md's gang comparison turned one at a time."""
    args = parser().parse_args(
        ["--pods", "2", "--paced", "0", "--gang", "4", "--gang-reps", "1", "--pending", "0",
         "--window", "0", "--settle", "0", "--wake-window", "0",
         "--scheduler-identity", "admin", "--api-server", "bare"]
    )  # fmt: skip
    report = await run(args)
    assert report["bound"] == 2
    assert report["gang_bound"] == 4
    assert report["refused_requests"] == {}
