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
