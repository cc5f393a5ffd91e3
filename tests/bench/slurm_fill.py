"""Fill Slurm's job table with finished jobs, as a busy site's would hold (until MinJobAge).

Each filler is a small external job, submitted then cancelled: CANCELLED jobs stay in the
table (``GET /jobs/`` lists them) like finished ones. Shared by the scale benchmark and the
tests of the streamed job-table reads.
"""

from __future__ import annotations

import asyncio
import contextlib

from bridge.errors import SlurmError
from bridge.models import JobSpec
from bridge.slurm.client import SlurmClient

CONCURRENCY = 16


async def fill_finished_jobs(
    slurm: SlurmClient,
    partition: str,
    count: int,
    *,
    name: str = "filler",
    admin_comment: str = "",
    concurrency: int = CONCURRENCY,
) -> list[int]:
    """Submit ``count`` jobs then cancel them all; returns their ids."""
    spec = JobSpec(
        name=name,
        partition=partition,
        min_nodes=1,
        tasks=1,
        memory_per_node_mib=1,
        time_limit_minutes=1,
        admin_comment=admin_comment,
    )
    sem = asyncio.Semaphore(concurrency)
    ids: list[int] = []

    async def one() -> None:
        async with sem:
            job_id = await slurm.submit(spec)
            ids.append(job_id)
            with contextlib.suppress(SlurmError):
                await slurm.cancel(job_id)

    await asyncio.gather(*(one() for _ in range(count)))
    return ids
