"""A job that left PENDING but cannot be bound yet is read again, never waited on: the
poller follows PENDING jobs only, so a group whose job was read RUNNING without its nodes
(or SUSPENDED ...) waited on a job no one read again (the silent stall of the fit
benchmark's largest_shared mode under load: no Slurm call, no error, pods never bound).
Real Slurm and the sandbox API server; only the first RUNNING read of each job loses its
node list (Slurm gives one at once in the sandbox), and the first read of what it holds
finds nothing (so its record is read)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.slurm.models import NodeResources, SlurmJob
from scheduler.cycle import Scheduler
from tests.integration.bridge_harness import podgroup, running_bridge
from tests.integration.conftest import SlurmSandbox

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]


async def test_a_gang_whose_running_job_was_read_without_nodes_is_read_again_and_bound(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    async with running_bridge(sandbox, tmp_path) as b:
        nodeless: list[int] = []

        def first_running_read_without_nodes(s: Scheduler) -> None:
            real = s.slurm.get_job

            async def get_job(job_id: int) -> SlurmJob:
                job = await real(job_id)
                if job.state.primary == "RUNNING" and job_id not in nodeless:
                    nodeless.append(job_id)
                    return job.model_copy(update={"nodes": ()})
                return job

            real_resources = s.slurm.get_job_resources
            held_read: set[int] = set()

            async def get_job_resources(job_id: int) -> tuple[NodeResources, ...]:
                # A job started at once is first read from its resources (its nodes and
                # cores, scheduler.start.held_job): that first read finds nothing held,
                # so the record is read, which then lacks its node list.
                if job_id not in held_read:
                    held_read.add(job_id)
                    return ()
                return await real_resources(job_id)

            s.slurm.get_job = get_job  # type: ignore[method-assign]
            s.slurm.get_job_resources = get_job_resources  # type: ignore[method-assign]

        await b.stop_scheduler()
        await b.start_scheduler(first_running_read_without_nodes)
        names = await podgroup(b, "unsettled", 2)
        for name in names:
            await b.bound(name)
        assert nodeless, "the gang's job was never read RUNNING without its nodes"
