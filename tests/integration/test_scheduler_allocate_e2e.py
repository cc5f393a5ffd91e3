"""Immediate allocation end to end (real slurmrestd 26.05, the sandbox API server, the
scheduler's loops in this test's event loop): a pod on free capacity is started by
``job/allocate``; on a full partition the try is refused, the group is queued, and the
FAILED record the refused try leaves is never taken for the group's job (restart sweep,
lookup by identity, the controller's ended-job handling and dangling sweep, the kill
suite's duplicate count)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from bridge.clock import SystemClock
from bridge.slurm.models import ALLOCATE_MARK, SlurmJob
from bridge.wellknown import CONDITION_SLURM_JOB_ENDED, LABEL_JOB_ID
from controller import dangling
from scheduler.cycle import Scheduler
from tests.clients import list_jobs
from tests.integration.bridge_harness import Bridge, job_of, running_bridge
from tests.integration.conftest import SlurmSandbox, blocker_spec
from tests.integration.sched_proc import jobs_by_group_uid
from tests.scheduler_caches import list_into

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]
Track = Callable[[int], int]


@pytest.fixture
async def bridge(sandbox: SlurmSandbox, tmp_path: Path) -> AsyncIterator[Bridge]:
    # Some tests hold their job with the priority annotation: this site lets pods choose it.
    allow_hold = {"allowPodPriority": True}
    async with running_bridge(
        sandbox, tmp_path, controller=True, defaultNamespacePolicy=allow_hold
    ) as b:
        yield b


def counter(b: Bridge, name: str) -> float:
    return b.sched.metrics.registry.get_sample_value(f"slurm_bridge_{name}_total") or 0.0


async def jobs_named(b: Bridge, pod: str) -> list[SlurmJob]:
    """This pod's jobs, records of refused tries included (by its uid: the same pod name
    from an earlier run is another group)."""
    uid = (await b.get_pod(pod))["metadata"]["uid"]
    return [j for j in (await list_jobs(b.slurm)).jobs if f'"uid":"{uid}"' in j.admin_comment]


async def fill(b: Bridge, sandbox: SlurmSandbox, track: Track) -> int:
    """A job holding every external node, RUNNING."""
    blocker = track(await b.slurm.submit(blocker_spec(sandbox)))

    async def running() -> bool:
        return (await b.slurm.get_job(blocker)).state.primary == "RUNNING"

    await b.wait_for("the blocker running", running)
    return blocker


async def pending_label(b: Bridge, pod: str) -> int:
    async def label() -> int:
        labels = (await b.get_pod(pod))["metadata"].get("labels") or {}
        return int(labels.get(LABEL_JOB_ID) or 0)

    return int(await b.wait_for(f"{pod}'s pending job label", label))


async def test_pod_on_free_capacity_is_started_by_an_immediate_allocation(bridge: Bridge) -> None:
    await bridge.create_pod("at-once")
    node = await bridge.bound("at-once")
    job = await bridge.slurm.get_job(job_of(await bridge.get_pod("at-once")))
    assert job.state.primary == "RUNNING"
    assert list(job.nodes) == [node]
    assert ALLOCATE_MARK in job.comment.split()
    assert counter(bridge, "jobs_allocated") == 1
    assert counter(bridge, "jobs_submitted") == 0
    assert counter(bridge, "allocations_refused") == 0


async def test_refused_try_queues_the_group_and_its_failed_record_is_never_its_job(
    bridge: Bridge, sandbox: SlurmSandbox, track_jobs: Track
) -> None:
    blocker = await fill(bridge, sandbox, track_jobs)
    await bridge.create_pod("refused")
    job_id = await pending_label(bridge, "refused")
    mine = await jobs_named(bridge, "refused")
    records = [j for j in mine if j.refused_allocation]
    assert len(records) == 1
    assert records[0].state.primary == "FAILED"
    assert [j.job_id for j in mine if j.state.active] == [job_id]
    assert counter(bridge, "allocations_refused") == 1

    # A restarted scheduler (start-up sweep, then the group's lookup) adopts the queued
    # job, never the FAILED record; so does the lookup by identity after a lost answer.
    fresh = Scheduler(bridge.cfg, bridge.kube, bridge.sched.slurm, SystemClock())
    await list_into(fresh, bridge.kube)
    await fresh.sweep()
    await fresh.on_pod_event("ADDED", await bridge.get_pod("refused"))
    key = fresh.state.pod_group["slurm-bridge/refused"]
    fresh.groups[key].uncertain_submit = True
    await fresh.process(key)
    adopted = fresh.groups[key].job
    assert adopted is not None
    assert adopted.job_id == job_id
    # The kill suite's duplicate count and the controller's dangling sweep ignore it too.
    by_uid = jobs_by_group_uid(mine)
    assert [[j.job_id for j in js] for js in by_uid.values()] == [[job_id]]
    assert records[0].job_id not in dangling.candidates(mine, "")

    await bridge.slurm.cancel(blocker)
    await bridge.bound("refused")
    assert job_of(await bridge.get_pod("refused")) == job_id
    # The controller's ended-job handling follows the pod's job, never the FAILED record.
    assert bridge.ctl is not None
    await bridge.ctl.sweep_once()
    await bridge.ctl.poll_once()
    pod = await bridge.get_pod("refused")
    assert pod["status"].get("phase") != "Failed"
    conds = {c["type"] for c in pod["status"].get("conditions") or []}
    assert CONDITION_SLURM_JOB_ENDED not in conds


async def test_a_group_behind_a_pending_job_is_queued_without_a_try(
    bridge: Bridge, sandbox: SlurmSandbox, track_jobs: Track
) -> None:
    blocker = await fill(bridge, sandbox, track_jobs)
    await bridge.create_pod("first")
    first = await pending_label(bridge, "first")
    await bridge.create_pod("second")
    second = await pending_label(bridge, "second")
    assert counter(bridge, "allocations_refused") == 1  # only the first group tried
    assert not [j for j in await jobs_named(bridge, "second") if j.refused_allocation]
    await bridge.slurm.cancel(blocker)
    await bridge.bound("first")
    await bridge.bound("second")
    assert second != first


async def test_never_queues_every_job_with_submit(sandbox: SlurmSandbox, tmp_path: Path) -> None:
    async with running_bridge(
        sandbox, tmp_path, scheduler={"immediateAllocation": "never", "workers": 4}
    ) as b:
        await b.create_pod("queued")
        await b.bound("queued")
        job = await b.slurm.get_job(job_of(await b.get_pod("queued")))
        assert ALLOCATE_MARK not in job.comment.split()
        assert counter(b, "jobs_allocated") == 0
        assert counter(b, "jobs_submitted") == 1


async def test_a_held_pod_is_queued_without_a_try_and_shows_slurms_hold(
    bridge: Bridge, track_jobs: Track
) -> None:
    # Slurm answers an immediate allocation of a held job (priority 0) with 2038 "Job
    # dependency problem"; the pods once showed that as a rejection and never got a job.
    await bridge.create_pod("held", annotations={"slurmjob.slinky.slurm.net/priority": "0"})
    job_id = track_jobs(await pending_label(bridge, "held"))

    async def says_held() -> str:
        msg = await bridge.scheduled_message("held")
        return msg if f"Slurm job {job_id} is pending" in msg else ""

    message = await bridge.wait_for("the held pod to show Slurm's reason", says_held)
    assert "Held" in message
    assert counter(bridge, "allocations_refused") == 0
    assert not [j for j in await jobs_named(bridge, "held") if j.refused_allocation]

    # A held job does not hold its partition back (Slurm starts an immediate job ahead
    # of it): the next pod is started at once, not queued behind it.
    await bridge.create_pod("after-held")
    await bridge.bound("after-held")
    assert counter(bridge, "jobs_allocated") == 1
    assert counter(bridge, "allocations_refused") == 0
