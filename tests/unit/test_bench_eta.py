"""The expected-start benchmark's queue (tests/bench/eta.py): its jobs share nodes unless
``--exclusive`` asks for whole nodes (backfill plans pending jobs on whole nodes, so that
is the case where its plan can hold: docs/benchmarks.md, Expected start)."""

from __future__ import annotations

from tests.bench.eta import gang_pod, parser

EXCLUSIVE = "slurmjob.slinky.slurm.net/exclusive"


def test_gang_pods_share_nodes_by_default() -> None:
    pod = gang_pod("g-0", "g", cpus=2, limit=1)
    assert pod["metadata"]["annotations"][EXCLUSIVE] == "false"
    assert parser().parse_args([]).exclusive is False


def test_exclusive_flag_puts_gang_pods_on_whole_nodes() -> None:
    args = parser().parse_args(["--exclusive"])
    pod = gang_pod("g-0", "g", cpus=2, limit=1, exclusive=args.exclusive)
    assert pod["metadata"]["annotations"][EXCLUSIVE] == "true"


def test_the_report_measures_the_first_estimate_shown_against_the_real_start() -> None:
    # a tiny hand-made run: three gangs that waited with an estimate, one planned by Slurm
    # that started without one ever shown, and a native job
    from datetime import UTC, datetime, timedelta

    from tests.bench.eta import Tracked, summarize

    t0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)

    def gang(name: str, shown_s: float | None, squeue_s: float, start_s: float, by: str) -> Tracked:
        t = Tracked(name, 1, 60.0, gang=True, started=t0 + timedelta(seconds=start_s))
        t.planned_at = t0
        if shown_s is not None:
            t.shown, t.shown_by = t0 + timedelta(seconds=shown_s), by
            t.squeue_then = t0 + timedelta(seconds=squeue_s)
            t.shown_at = t.last_shown = t.shown
        return t

    items = [
        gang("a", 60, 60, 61, "slurm"),
        gang("b", 120, 300, 121, "slurm-bridge"),
        gang("c", 180, 400, 200, "slurm-bridge"),
        gang("d", None, 30, 40, ""),  # planned 40 s ahead, never shown: counted
        Tracked("n", 1, 60.0, gang=False),
    ]
    args = parser().parse_args([])
    report = summarize(items, args, 1.0, rate=0.5, seconds=10.0)
    assert report["gangs"] == 3
    assert report["error_s"] == {"p50": 1.0, "p90": 20.0}
    assert report["squeue_start_error_s"] == {"p50": 179.0, "p90": 200.0}
    assert report["within_bf_interval"] == 0.67
    assert report["planned_without_estimate"] == 1
    assert report["first_shown_by"] == {"slurm": 1, "slurm-bridge": 2}
