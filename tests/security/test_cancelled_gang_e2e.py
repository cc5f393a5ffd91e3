"""A gang cancelled for losing members never leaves its pods Terminating forever: REAL
Slurm, the sandbox API server, the scheduler and the controller.

The scheduler cancels a pending gang's job when a member goes, and takes the job-id label
off the others. The controller follows labelled pods only, so the bridge's finalizer must
go with the label: a member deleted later is then gone at once.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bridge.errors import KubeNotFound
from bridge.wellknown import FINALIZER, LABEL_JOB_ID, slurmjob_annotation
from tests.integration.bridge_harness import job_of, podgroup, running_bridge
from tests.integration.conftest import SlurmSandbox

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]


async def test_a_gang_cancelled_for_losing_members_releases_the_rest(
    sandbox: SlurmSandbox, tmp_path: Path, track_jobs: Callable[[int], int]
) -> None:
    held = {slurmjob_annotation("priority"): "0"}  # the job waits: Slurm holds it
    async with running_bridge(
        sandbox, tmp_path, controller=True, defaultNamespacePolicy={"allowPodPriority": True}
    ) as b:
        try:
            names = await podgroup(b, "gang", 2, annotations=held)

            async def linked() -> int:
                pods = [await b.get_pod(n) for n in names]
                labels = {p["metadata"].get("labels", {}).get(LABEL_JOB_ID) for p in pods}
                return job_of(pods[0]) if len(labels) == 1 and None not in labels else 0

            job = track_jobs(await b.wait_for("the gang's pods linked to its job", linked))
            await b.kube.delete_pod("slurm-bridge", names[0])

            async def released() -> bool:
                meta = (await b.get_pod(names[1]))["metadata"]
                return LABEL_JOB_ID not in (meta.get("labels") or {}) and FINALIZER not in (
                    meta.get("finalizers") or []
                )

            await b.wait_for("the other member unlabelled and unfinalized", released)
            assert not (await b.slurm.get_job(job)).state.active

            await b.kube.delete_pod("slurm-bridge", names[1])

            async def gone() -> bool:
                try:
                    await b.get_pod(names[1])
                except KubeNotFound:
                    return True
                return False

            await b.wait_for("the released member deleted, not stuck Terminating", gone)
        finally:
            await b.cancel_jobs()
