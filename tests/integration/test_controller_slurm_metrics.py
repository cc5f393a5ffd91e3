"""The controller's Slurm-side metrics against the REAL Slurm sandbox. By default
(``controller.slurmJobMetrics: polled``) the job metrics come from what the controller
reads anyway and it never asks for the job table (no ``GET /jobs/``); with ``table`` one
sweep makes one streamed ``GET /jobs/`` and the sweep's own ``GET /nodes/``; with ``off``
no job table either. The numbers match what slurmctld says."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bridge.models import JobSpec
from bridge.slurm.client import SlurmClient
from bridge.slurm.token import TokenProvider
from controller.app import ControllerMetrics
from controller.runtime import Controller
from controller.slurm_metrics import MIB
from tests.bench.scheduler_child import CountingSlurmClient
from tests.clients import api_version
from tests.integration.conftest import SlurmSandbox
from tests.integration.controller_harness import (
    controller_config,
    place_group,
    running_controller,
    sandbox_kube,
    unique_mcs,
    wait_for,
)
from tests.prom import scrape, total

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]


def counting_client(sandbox: SlurmSandbox) -> CountingSlurmClient:
    return CountingSlurmClient(
        sandbox.rest_url,
        TokenProvider(sandbox.jwt_file, sandbox.user),
        request_timeout_seconds=10,
    )


async def wait_every_node_busy(
    slurm: SlurmClient, sandbox: SlurmSandbox, running: int, track: Callable[[int], int]
) -> int:
    """Submit a job (not the bridge's) for every external node, which waits while
    ``running`` holds one of them; returns it once Slurm says so (its first reason may be
    ``Priority``, until the scheduler has looked at it)."""
    n = len(sandbox.external_nodes)
    waiting = track(
        await slurm.submit(
            JobSpec(name="met-wait", partition=sandbox.partition, min_nodes=n, tasks=n)
        )
    )

    async def states_settled() -> bool:
        run, wait = await slurm.get_jobs([running, waiting])
        return (
            run.state.primary == "RUNNING"
            and wait.state.primary == "PENDING"
            and wait.state_reason == "Resources"
        )

    await wait_for(states_settled, what="the bridge's job RUNNING, met-wait PENDING (Resources)")
    return waiting


async def test_polled_job_metrics_count_a_users_and_the_bridges_jobs_without_the_job_table(
    sandbox: SlurmSandbox, slurm: SlurmClient, track_jobs: Callable[[int], int]
) -> None:
    mcs = unique_mcs()
    cfg = controller_config(sandbox, mcs)
    assert cfg.controller.slurm_job_metrics == "polled"  # the default
    part, node0 = sandbox.partition, sandbox.external_nodes[0]
    metrics = ControllerMetrics(mcs_label=mcs)
    async with sandbox_kube(sandbox) as (_, kube), counting_client(sandbox) as counted:
        running = await place_group(kube, slurm, sandbox, mcs, ["pol-a"], node0, track_jobs)
        waiting = await wait_every_node_busy(slurm, sandbox, running, track_jobs)
        # the bridge's job for a pod that waits, held (priority 0): pods labelled, unbound
        held = await place_group(
            kube, slurm, sandbox, mcs, ["pol-held"], node0, track_jobs, bind=False, priority=0
        )

        async def held_reason() -> str:
            job = await slurm.get_job(held)
            return job.state_reason if job.state.primary == "PENDING" else ""

        async def held_says_why() -> bool:
            return (await held_reason()).startswith("JobHeld")

        await wait_for(held_says_why, what="the held job's reason")
        held_why = await held_reason()
        async with running_controller(cfg, kube, counted, slurm_observer=metrics.slurm) as ctl:

            async def exported() -> bool:
                got = scrape(metrics.registry)
                return (
                    held in ctl.caches.by_job
                    and waiting in ctl.job_facts.facts  # read once, by id
                    and total(got, "slurm_bridge_placeholder_jobs", state="PENDING") == 1
                    and total(got, "slurm_bridge_placeholder_jobs", state="RUNNING") == 1
                    and total(
                        got, "slurm_bridge_slurm_pending_jobs", partition=part, reason=held_why
                    )
                    >= 1
                )

            await wait_for(exported, what="the job metrics from polled data")
            sweeps = counted.calls["nodes_get"]

            async def two_more_sweeps() -> bool:
                return counted.calls["nodes_get"] >= sweeps + 2

            await wait_for(two_more_sweeps, what="two more sweeps")
        # not one read of the whole job table: the states list and reads by id only
        assert counted.calls["jobs_get"] == 0
        assert counted.calls["jobs_state"] >= 3

    got = scrape(metrics.registry)
    assert total(got, "slurm_bridge_slurm_pending_jobs", partition=part, reason="Resources") >= 1
    assert total(got, "slurm_bridge_slurm_jobs", partition=part, state="RUNNING") >= 1
    assert total(got, "slurm_bridge_slurm_jobs", partition=part, state="PENDING") >= 2
    # only pol-a and pol-held carry this test's mcs label and the bridge's back-link
    assert total(got, "slurm_bridge_placeholder_jobs", state="RUNNING") == 1
    assert total(got, "slurm_bridge_placeholder_jobs", state="PENDING") == 1
    assert total(got, "slurm_bridge_slurm_last_read_timestamp_seconds", what="jobs") > 0


async def test_table_mode_reads_the_job_table_once_a_sweep_and_off_never(
    sandbox: SlurmSandbox, slurm: SlurmClient, track_jobs: Callable[[int], int]
) -> None:
    mcs = unique_mcs()
    cfg = controller_config(sandbox, mcs, controller={"slurmJobMetrics": "table"})
    part, node0 = sandbox.partition, sandbox.external_nodes[0]
    async with sandbox_kube(sandbox) as (_, kube), counting_client(sandbox) as counted:
        running = await place_group(kube, slurm, sandbox, mcs, ["met-a"], node0, track_jobs)
        await wait_every_node_busy(slurm, sandbox, running, track_jobs)
        metrics = ControllerMetrics(mcs_label=mcs)
        ctl = Controller(cfg, counted, kube, slurm_observer=metrics.slurm)
        await api_version(counted)
        counted.calls.clear()
        await ctl.sweep_once()
        # one streamed job-table read for the job metrics, the sweep's own node read
        assert counted.calls["jobs_get"] == 1
        assert counted.calls["nodes_get"] == 1
        off = controller_config(sandbox, mcs, controller={"slurmJobMetrics": "off"})
        quiet = Controller(off, counted, kube, slurm_observer=ControllerMetrics().slurm)
        counted.calls.clear()
        await quiet.sweep_once()
        assert counted.calls["jobs_get"] == 0
        assert counted.calls["nodes_get"] == 1

    got = scrape(metrics.registry)
    assert total(got, "slurm_bridge_slurm_jobs", partition=part, state="RUNNING") >= 1
    assert total(got, "slurm_bridge_slurm_pending_jobs", partition=part, reason="Resources") >= 1
    # of the active jobs, only met-a carries this test's mcs label and the bridge's
    # back-link (other tests' ended jobs may carry a back-link and no mcs label)
    assert total(got, "slurm_bridge_placeholder_jobs", state="RUNNING") == 1
    assert total(got, "slurm_bridge_placeholder_jobs", state="PENDING") == 0

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
