"""Heterogeneous external jobs against the REAL slurmrestd 26.05 sandbox (marker ``slurm``):
what the bridge's hetjobs rest on (docs/hetjob.md)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bridge.errors import InvalidInput
from bridge.models import JobSpec
from bridge.slurm.client import SlurmClient
from bridge.slurm.codec import SUPPORTED_VERSIONS
from bridge.slurm.models import SlurmJob
from tests.integration.conftest import SlurmSandbox, make_client
from tests.integration.test_slurm_client import ext_spec, wait_job

pytestmark = pytest.mark.slurm
Track = Callable[[int], int]


def hetjob(sb: SlurmSandbox, name: str) -> JobSpec:
    """A CPU driver (1 node, 1 CPU, shared) and two exclusive GPU workers."""
    driver = ext_spec(sb, name, cpus_per_task=1, exclusive=False, admin_comment='{"c":0}')
    workers = ext_spec(
        sb,
        name,
        min_nodes=2,
        max_nodes=2,
        tasks=2,
        tasks_per_node=1,
        cpus_per_task=2,
        tres_per_node=f"gres/gpu:{sb.node_gpus}",
        admin_comment='{"c":1}',
    )
    return driver.model_copy(update={"het_components": (workers,)})


def all_running(j: SlurmJob) -> bool:
    return len(j.components) > 1 and all(c.state.primary == "RUNNING" for c in j.components)


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
async def test_a_hetjob_is_submitted_in_one_call_and_read_back_with_every_component(
    sandbox: SlurmSandbox, track_jobs: Track, version: str
) -> None:
    async with make_client(sandbox, version) as slurm:
        await _submitted_and_read_back(slurm, sandbox, track_jobs)


async def _submitted_and_read_back(
    slurm: SlurmClient, sandbox: SlurmSandbox, track_jobs: Track
) -> None:
    leader = track_jobs(await slurm.submit(hetjob(sandbox, "it-het")))
    job = await wait_job(slurm, leader, all_running, "RUNNING in every component")
    driver, workers = job.components
    assert (driver.job_id, driver.het_job_id, driver.het_job_offset) == (leader, leader, 0)
    assert (workers.het_job_id, workers.het_job_offset) == (leader, 1)
    assert workers.job_id != leader
    assert (driver.admin_comment, workers.admin_comment) == ('{"c":0}', '{"c":1}')
    assert len(driver.nodes) == 1
    assert len(workers.nodes) == 2
    assert not set(workers.nodes) & set(driver.nodes)  # exclusive workers
    # every GPU the workers asked, and none for the shared CPU driver
    assert workers.gres_detail == (f"gpu(CNT:{sandbox.node_gpus})",) * 2
    assert driver.gres_detail == ()
    # a component read by its own id comes alone
    alone = await slurm.get_job(workers.job_id)
    assert (alone.job_id, alone.het_job_offset, alone.het_components) == (workers.job_id, 1, ())


async def test_job_state_rows_of_hetjob_components_decode(
    slurm: SlurmClient, sandbox: SlurmSandbox, track_jobs: Track
) -> None:
    """``jobs/state`` names components ``"<id>+<offset>"`` (not a number): a hetjob in
    Slurm must not stop the bridge's state scans."""
    leader = track_jobs(await slurm.submit(hetjob(sandbox, "it-het-state")))
    job = await wait_job(slurm, leader, all_running, "RUNNING in every component")
    ids = {c.job_id for c in job.components}
    by_id = {s.job_id: s.state.primary for s in await slurm.list_job_states([leader])}
    assert by_id == dict.fromkeys(ids, "RUNNING")
    scanned = await slurm.scan_job_states(lambda s: s.job_id in ids)
    assert {s.job_id for s in scanned} == ids


async def test_cancelling_the_leader_ends_every_component(
    slurm: SlurmClient, sandbox: SlurmSandbox, track_jobs: Track
) -> None:
    leader = track_jobs(await slurm.submit(hetjob(sandbox, "it-het-cancel")))
    await wait_job(slurm, leader, all_running, "RUNNING in every component")
    await slurm.cancel(leader)
    job = await wait_job(
        slurm,
        leader,
        lambda j: all(c.state.primary == "CANCELLED" for c in j.components),
        "CANCELLED in every component",
    )
    assert len(job.components) == 2


async def test_a_hetjob_is_never_allocated_at_once(
    slurm: SlurmClient, sandbox: SlurmSandbox
) -> None:
    with pytest.raises(InvalidInput, match="2078"):
        await slurm.allocate(hetjob(sandbox, "it-het-alloc"))
