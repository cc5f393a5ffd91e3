"""Slurm's planned start on a waiting gang's pods, end to end: real slurmrestd 26.05 (its
backfill pass every second: bf_interval=1), the sandbox API server and the scheduler.

A gang waits behind a running job with a 2-minute limit: its pods show the start Slurm
plans (the message and ``slinky.slurm.net/expected-start``) within one backfill interval
of ``squeue --start``; ``kubectl slurm-bridge why`` names the running job's size and the
short resource, ``status`` its EXPECTED column; when the job starts, the annotation is
gone. On shared nodes, behind small jobs Slurm's backfill plans on whole nodes, the pods
show the bridge's own per-CPU plan instead, and say so (bridge/queueplan.py)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bridge.expected import parse_rfc3339
from bridge.models import JobSpec
from bridge.wellknown import ANNOTATION_EXPECTED_START, ANNOTATION_EXPECTED_START_BY
from tests.integration.bridge_harness import (
    NS,
    Bridge,
    job_of,
    kubectl_plugin,
    mixed_podgroup,
    podgroup,
    running_bridge,
)
from tests.integration.conftest import SlurmSandbox, blocker_spec

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]

BACKFILL_INTERVAL = 1.0  # the sandbox's bf_interval (sandbox/slurm/launcher.py)


SCHEDULER = {"rejectBackoffSeconds": 0.5, "workers": 4, "expectedStartRefreshSeconds": 1}


@pytest.fixture
async def bridge(sandbox: SlurmSandbox, tmp_path: Path) -> AsyncIterator[Bridge]:
    async with running_bridge(sandbox, tmp_path, scheduler=SCHEDULER) as b:
        yield b


@pytest.fixture
async def slurm_only(sandbox: SlurmSandbox, tmp_path: Path) -> AsyncIterator[Bridge]:
    """The bridge showing Slurm's plan only (``expectedStartBridgePlan: false``)."""
    scheduler = {**SCHEDULER, "expectedStartBridgePlan": False}
    async with running_bridge(sandbox, tmp_path, scheduler=scheduler) as b:
        yield b


async def plugin(b: Bridge, tmp_path: Path, *args: str) -> str:
    proc = await kubectl_plugin(b, tmp_path, *args)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def squeue_start(sandbox: SlurmSandbox, job_id: int) -> datetime | None:
    """``squeue --start``'s START_TIME of ``job_id`` (UTC: the sandbox runs in UTC); of a
    hetjob's leader, the latest of its components' (squeue lists each); None: N/A."""
    out = sandbox.cli("exec", "--", "squeue", "--start", "-h", "-j", str(job_id), "-o", "%S")
    try:
        starts = [datetime.fromisoformat(t).replace(tzinfo=UTC) for t in out.stdout.split()]
    except ValueError:
        return None
    return max(starts, default=None)


async def plan_shown(b: Bridge, pod: str, by: str | None) -> tuple[datetime, str] | None:
    """The expected start ``pod`` shows and its message, once it shows one planned by
    ``by`` (``slurm`` or ``slurm-bridge``; None: either)."""
    notes = (await b.get_pod(pod))["metadata"].get("annotations") or {}
    at = parse_rfc3339(notes.get(ANNOTATION_EXPECTED_START))
    msg = await b.scheduled_message(pod)
    if at is None or "planned by" not in msg:
        return None
    return (at, msg) if by is None or notes.get(ANNOTATION_EXPECTED_START_BY) == by else None


async def test_a_gang_behind_a_2_minute_job_shows_slurms_planned_start_until_it_starts(
    slurm_only: Bridge, sandbox: SlurmSandbox, track_jobs: Callable[[int], int], tmp_path: Path
) -> None:
    bridge = slurm_only
    blocker = blocker_spec(sandbox).model_copy(update={"time_limit_minutes": 2})
    blocker_id = track_jobs(await bridge.slurm.submit(blocker))
    names = await podgroup(bridge, "eta-pg", 2, cpu="3", memory="500Mi")

    async def shown() -> tuple[datetime, str] | None:
        pod = await bridge.get_pod(names[0])
        at = parse_rfc3339(
            (pod["metadata"].get("annotations") or {}).get(ANNOTATION_EXPECTED_START)
        )
        msg = await bridge.scheduled_message(names[0])
        return (at, msg) if at is not None and "Slurm expects it to start at" in msg else None

    at, msg = await bridge.wait_for("the gang's expected start", shown)
    job_id = job_of(await bridge.get_pod(names[0]))
    assert f"Slurm job {job_id} is pending: " in msg
    assert f"start at {at.strftime('%Y-%m-%dT%H:%M:%SZ')} (in " in msg
    planned = squeue_start(sandbox, job_id)
    assert planned is not None
    print(f"shown {at} squeue --start {planned}")
    assert abs((planned - at).total_seconds()) <= BACKFILL_INTERVAL
    # the blocker ends at its limit: Slurm plans the gang for then
    running = await bridge.slurm.get_job(blocker_id)
    assert running.end_time is not None
    assert abs((running.end_time - at).total_seconds()) <= 60 + BACKFILL_INTERVAL
    for n in names[1:]:  # every pod of the gang shows it
        other = await bridge.get_pod(n)
        shown_too = (other["metadata"].get("annotations") or {}).get(ANNOTATION_EXPECTED_START)
        assert parse_rfc3339(shown_too) is not None
        assert abs((parse_rfc3339(shown_too) - planned).total_seconds()) <= BACKFILL_INTERVAL

    # why, in words (the kubectl plugin): the running job's size and the short resource
    said = await plugin(bridge, tmp_path, "why", f"{NS}/{names[0]}")
    n = len(sandbox.external_nodes)
    assert f"Slurm job {job_id} is PENDING (Resources)" in said
    assert f"1 job ({n} nodes, {n * sandbox.node_cpus} CPUs) running in partition" in said
    # the gang asks whole nodes (exclusive, the default): read in a version that says so
    assert "with 3 CPUs, 500 MiB, the whole node each" in said
    assert f"{n} nodes short of idle node (exclusive)" in said
    assert f"Slurm expects it to start at {at.strftime('%Y-%m-%dT%H:%M:%SZ')}" in said
    assert "planned by Slurm's backfill" in said  # one job ahead: Slurm's plan holds
    assert "blocker" not in said  # another tenant's job: counted and sized, not named
    # the EXPECTED column
    listed = json.loads(await plugin(bridge, tmp_path, "status", "-n", NS, "-o", "json"))
    row = next(g for g in listed["groups"] if g["name"] == "eta-pg")
    assert row["expectedStart"] == at.strftime("%Y-%m-%dT%H:%M:%SZ")

    await bridge.slurm.cancel(blocker_id)  # the blocker ends: the gang starts
    for n in names:
        await bridge.bound(n)
        annotations = (await bridge.get_pod(n))["metadata"].get("annotations") or {}
        assert ANNOTATION_EXPECTED_START not in annotations
    errors = bridge.sched.metrics.expected_start_error_seconds.collect()[0].samples
    assert any(s.name.endswith("_count") and s.value == 1 for s in errors)


async def test_a_hetjob_gang_shows_the_start_of_its_last_component(
    bridge: Bridge, sandbox: SlurmSandbox, track_jobs: Callable[[int], int]
) -> None:
    blocker = blocker_spec(sandbox).model_copy(update={"time_limit_minutes": 2})
    track_jobs(await bridge.slurm.submit(blocker))
    _, names = await mixed_podgroup(bridge, "eta-het", max(1, sandbox.node_gpus))

    async def shown() -> datetime | None:
        pod = await bridge.get_pod(names[0])
        notes = pod["metadata"].get("annotations") or {}
        return parse_rfc3339(notes.get(ANNOTATION_EXPECTED_START))

    at = await bridge.wait_for("the hetjob gang's expected start", shown)
    leader = job_of(await bridge.get_pod(names[0]))
    job = await bridge.slurm.get_job(leader)
    assert job.het_components, "a gang of two shapes is one hetjob"
    planned = squeue_start(sandbox, leader)
    assert planned is not None
    assert abs((planned - at).total_seconds()) <= BACKFILL_INTERVAL


async def test_on_shared_nodes_a_gang_behind_small_jobs_shows_the_bridges_plan_and_says_so(
    bridge: Bridge, sandbox: SlurmSandbox, track_jobs: Callable[[int], int], tmp_path: Path
) -> None:
    # the partition is full for 2 minutes; one small job per node is queued before the
    # gang: Slurm's backfill reserves each one's node whole for its window, so it plans
    # the gang a window later, while all of them fit on the nodes' CPUs at once
    blocker = blocker_spec(sandbox).model_copy(update={"time_limit_minutes": 2})
    blocker_id = track_jobs(await bridge.slurm.submit(blocker))
    for i in range(len(sandbox.external_nodes)):
        small = JobSpec(
            name=f"small-{i}",
            partition=sandbox.partition,
            min_nodes=1,
            tasks=1,
            cpus_per_task=1,
            memory_per_node_mib=100,
            exclusive=False,
            time_limit_minutes=2,
        )
        track_jobs(await bridge.slurm.submit(small))
    names = await podgroup(bridge, "eta-shared", 2, cpu="1", memory="100Mi")

    at, msg = await bridge.wait_for(
        "the bridge's plan on the gang", lambda: plan_shown(bridge, names[0], "slurm-bridge")
    )
    job_id = job_of(await bridge.get_pod(names[0]))
    stamp = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert f"slurm-bridge expects it to start at {stamp} (in " in msg
    assert "planned by slurm-bridge from Slurm's queue (Slurm's backfill: " in msg
    # Slurm's own plan is a window later; the bridge's is the blocker's end
    planned = squeue_start(sandbox, job_id)
    assert planned is not None
    print(f"shown {at} squeue --start {planned}: {msg}")
    assert (planned - at).total_seconds() >= 60
    running = await bridge.slurm.get_job(blocker_id)
    assert running.end_time is not None
    assert abs((running.end_time - at).total_seconds()) <= 60 + BACKFILL_INTERVAL
    # why and status say whose plan it is
    said = await plugin(bridge, tmp_path, "why", f"{NS}/{names[0]}")
    assert f"slurm-bridge expects it to start at {stamp}" in said
    assert "planned by slurm-bridge from Slurm's queue" in said
    listed = json.loads(await plugin(bridge, tmp_path, "status", "-n", NS, "-o", "json"))
    row = next(g for g in listed["groups"] if g["name"] == "eta-shared")
    assert (row["expectedStart"], row["expectedBy"]) == (stamp, "slurm-bridge")

    await bridge.slurm.cancel(blocker_id)  # the blocker ends: the gang starts with the rest
    for n in names:
        await bridge.bound(n)
        annotations = (await bridge.get_pod(n))["metadata"].get("annotations") or {}
        assert ANNOTATION_EXPECTED_START not in annotations
        assert ANNOTATION_EXPECTED_START_BY not in annotations


async def test_behind_one_job_the_bridges_plan_is_its_end_to_the_second_slurms_the_next_slot(
    bridge: Bridge, sandbox: SlurmSandbox, track_jobs: Callable[[int], int]
) -> None:
    # Slurm's backfill plans in slots of bf_resolution (60 s): its plan is the running
    # job's end rounded up to the slot; the bridge's is the end itself, and says so
    blocker = blocker_spec(sandbox).model_copy(update={"time_limit_minutes": 2})
    blocker_id = track_jobs(await bridge.slurm.submit(blocker))
    names = await podgroup(bridge, "eta-slot", 2, cpu="3", memory="500Mi")

    at, msg = await bridge.wait_for(
        "the gang's expected start", lambda: plan_shown(bridge, names[0], None)
    )
    running = await bridge.slurm.get_job(blocker_id)
    assert running.end_time is not None
    assert abs((running.end_time - at).total_seconds()) <= BACKFILL_INTERVAL
    planned = squeue_start(sandbox, job_of(await bridge.get_pod(names[0])))
    assert planned is not None
    print(f"shown {at} squeue --start {planned} end {running.end_time}: {msg}")
    if planned > at:  # Slurm's slot began before the end: the bridge's plan is the end
        assert "planned by slurm-bridge from Slurm's queue (Slurm's backfill: " in msg
        assert (planned - at).total_seconds() <= 60
    else:
        assert "planned by Slurm's backfill" in msg
