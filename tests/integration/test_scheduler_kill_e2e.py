"""Smoke of the kill -9 fault suite (tests/bench/sched_kill.py): a few pods, 2 SIGKILLs of
the scheduler subprocess at random points and 1 between an immediate allocation and its
answer, real Slurm. Asserts the zero counts, never times; the full run
(1,000 pods x 10 kills) is ``python -m tests.bench.sched_kill``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.sched_kill import run

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]


async def test_sigkilled_scheduler_leaves_no_duplicate_or_orphan_job_and_binds_every_pod_once(
    tmp_path: Path,
) -> None:
    result = await run(
        16, 2, seed=20261122, gang_size=2, workdir=tmp_path, deadline=120, allocate_kills=1
    )
    print(result)
    assert result["allocate_kills_done"] == 1
    assert result["kills_done"] == 3
    counts = {
        k: result[k]
        for k in (
            "duplicate_jobs",
            "orphan_jobs",
            "orphan_jobs_after_sweep",
            "pods_bound_twice",
            "pods_never_bound",
            "jobs_ended_while_containers_ran",
        )
    }
    assert counts == dict.fromkeys(counts, 0)
