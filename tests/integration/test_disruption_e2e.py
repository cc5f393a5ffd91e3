"""Disruptions speak Kubernetes, end to end: real Slurm, the scheduler and the controller,
the sandbox API server with its kubelet and its Job controller stand-in. When Slurm ends a
bridge job from outside the workload, the pods get DisruptionTarget=True, and a Job's
podFailurePolicy (deploy/examples/preemptible-job.yaml) ignores that failure: a new pod
runs under a new Slurm job, backoffLimit (0) untouched."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

import pytest

from bridge.kube.resources import JOBS
from bridge.wellknown import CONDITION_DISRUPTION_TARGET
from sandbox.controllers import workload_controller
from sandbox.controllers.workload_pods import load_example
from tests.integration.bridge_harness import NS, Bridge, job_of, running_bridge
from tests.integration.conftest import SlurmSandbox

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]


class JobStandIn:
    """The stand-in ticking in a thread beside the test (urllib blocks)."""

    def __init__(self, b: Bridge, tmp_path: Path) -> None:
        api = workload_controller.Api.from_kubeconfig(b.api.write_kubeconfig(tmp_path / "standin"))
        self.s = workload_controller.StandIn(api, out=io.StringIO())

    async def tick(self) -> None:
        await asyncio.to_thread(self.s.tick)


async def _create_job(b: Bridge, tmp_path: Path) -> dict[str, Any]:
    job = load_example("preemptible-job")[0]
    path = f"/apis/batch/v1/namespaces/{NS}/jobs"
    api = workload_controller.Api.from_kubeconfig(b.api.write_kubeconfig(tmp_path / "creator"))
    return await asyncio.to_thread(api.call, "POST", path, job)


async def test_an_operator_scancel_is_a_disruption_the_jobs_pod_failure_policy_ignores(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    async with running_bridge(sandbox, tmp_path, controller=True) as b:
        jobs = JobStandIn(b, tmp_path)
        await _create_job(b, tmp_path)
        await jobs.tick()
        await b.bound("preemptible-1-x0")
        first = job_of(await b.get_pod("preemptible-1-x0"))
        await b.wait_for("the first Slurm job to run", lambda: _running(b, first))

        await b.slurm.cancel(first)  # an operator's scancel

        async def disrupted() -> dict[str, Any] | None:
            pod = await b.get_pod("preemptible-1-x0")
            conds = {c["type"]: c for c in pod["status"].get("conditions") or []}
            return conds.get(CONDITION_DISRUPTION_TARGET)

        cond = await b.wait_for("DisruptionTarget on the pod", disrupted)
        assert cond["status"] == "True"
        assert cond["reason"] == "SlurmJobCancelled"
        assert str(first) in cond["message"]

        async def replaced() -> bool:
            await jobs.tick()
            return "preemptible-1-x1" in {
                p["metadata"]["name"] for p in (await b.kube.list_pods(NS)).items
            }

        await b.wait_for("the stand-in to replace the pod", replaced)
        await b.bound("preemptible-1-x1")
        second = job_of(await b.get_pod("preemptible-1-x1"))
        assert second != first
        job = await b.kube.get(JOBS, "preemptible-1", NS)
        assert job["status"]["failed"] == 0  # ignored: backoffLimit 0 not used up
        assert not any(c.get("type") == "Failed" for c in job["status"].get("conditions") or [])


async def _running(b: Bridge, job_id: int) -> bool:
    return (await b.slurm.get_job(job_id)).state.primary == "RUNNING"
