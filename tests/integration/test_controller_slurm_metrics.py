"""The controller's Slurm-side metrics against the REAL Slurm sandbox: one sweep (one
streamed ``GET /jobs/`` for the job metrics, the sweep's own ``GET /nodes/``) and the numbers
match what slurmctld says; with ``controller.slurmJobMetrics`` off the job table is never
read."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bridge.models import JobSpec
from bridge.slurm.client import SlurmClient
from bridge.slurm.token import TokenProvider
from controller.app import ControllerMetrics
from controller.runtime import Controller
from controller.slurm_metrics import MIB
from tests.bench.scheduler import CountingSlurmClient
from tests.integration.conftest import SlurmSandbox
from tests.integration.controller_harness import (
    controller_config,
    place_group,
    sandbox_kube,
    unique_mcs,
    wait_for,
)
from tests.prom import scrape, total

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]


async def test_one_sweep_exports_jobs_pending_reasons_nodes_and_partition_resources(
    sandbox: SlurmSandbox, slurm: SlurmClient, track_jobs: Callable[[int], int]
) -> None:
    mcs = unique_mcs()
    cfg = controller_config(sandbox, mcs)
    part, node0 = sandbox.partition, sandbox.external_nodes[0]
    async with (
        sandbox_kube(sandbox) as (_, kube),
        CountingSlurmClient(
            sandbox.rest_url,
            TokenProvider(sandbox.jwt_file, sandbox.user),
            request_timeout_seconds=10,
        ) as counted,
    ):
        running = await place_group(kube, slurm, sandbox, mcs, ["met-a"], node0, track_jobs)
        # every external node, exclusively: it waits while met-a holds one of them
        waiting = track_jobs(
            await slurm.submit(
                JobSpec(
                    name="met-wait",
                    partition=part,
                    min_nodes=len(sandbox.external_nodes),
                    tasks=len(sandbox.external_nodes),
                )
            )
        )

        async def states_settled() -> bool:
            jobs = {j.job_id: j for j in (await slurm.list_jobs()).jobs}
            return (
                jobs[running].state.primary == "RUNNING"
                and jobs[waiting].state.primary == "PENDING"
                and jobs[waiting].state_reason not in ("", "None")
            )

        await wait_for(states_settled, what="met-a RUNNING and met-wait PENDING with a reason")
        reason = (await slurm.get_job(waiting)).state_reason
        metrics = ControllerMetrics(mcs_label=mcs)
        ctl = Controller(cfg, counted, kube, slurm_observer=metrics.slurm)
        await counted.api_version()
        counted.calls.clear()
        await ctl.sweep_once()
        # one streamed job-table read for the job metrics, the sweep's own node read
        assert counted.calls["jobs_get"] == 1
        assert counted.calls["nodes_get"] == 1
        off = controller_config(sandbox, mcs, controller={"slurmJobMetrics": False})
        quiet = Controller(off, counted, kube, slurm_observer=ControllerMetrics().slurm)
        counted.calls.clear()
        await quiet.sweep_once()
        assert counted.calls["jobs_get"] == 0
        assert counted.calls["nodes_get"] == 1

    got = scrape(metrics.registry)
    assert total(got, "slurm_bridge_slurm_jobs", partition=part, state="RUNNING") >= 1
    assert total(got, "slurm_bridge_slurm_pending_jobs", partition=part, reason=reason) >= 1
    # only met-a carries this test's mcs label and the bridge's back-link
    assert total(got, "slurm_bridge_placeholder_jobs") == 1
    assert total(got, "slurm_bridge_placeholder_jobs", state="RUNNING") == 1

    n = len(sandbox.external_nodes)
    assert total(got, "slurm_bridge_slurm_nodes", partition=part) == n
    assert total(got, "slurm_bridge_slurm_nodes", partition=part, state="IDLE") <= n - 1
    cpus = "slurm_bridge_slurm_partition_cpus"
    assert total(got, cpus, partition=part) == n * sandbox.node_cpus
    assert total(got, cpus, partition=part, status="allocated") >= 1
    mem = "slurm_bridge_slurm_partition_memory_bytes"
    assert total(got, mem, partition=part) == n * sandbox.node_mem_mb * MIB
    gpus = "slurm_bridge_slurm_partition_gpus"
    assert total(got, gpus, partition=part) == n * sandbox.node_gpus
    assert total(got, "slurm_bridge_slurm_last_read_timestamp_seconds", what="nodes") > 0
