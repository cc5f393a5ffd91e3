"""The workload controller end to end: REAL Slurm sandbox + in-process sandbox API server.

The test plays the scheduler (one placeholder job per group, pods labelled, finalized,
bound) and runs the controller as a task of the test's loop.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from pathlib import Path

import aiohttp
import pytest

from bridge.errors import KubeNotFound
from bridge.kube.client import KubeClient
from bridge.kube.resources import EVENTS, LEASES
from bridge.slurm.client import SlurmClient
from bridge.slurm.token import TokenProvider
from bridge.wellknown import CONDITION_DISRUPTION_TARGET, CONDITION_SLURM_JOB_ENDED, FINALIZER
from controller.app import serve
from controller.runtime import Controller
from sandbox.annotations import IGNORE_SIGTERM
from tests.integration.conftest import SlurmSandbox
from tests.integration.controller_harness import (
    NS,
    controller_config,
    place_group,
    running_controller,
    sandbox_kube,
    unique_mcs,
    wait_for,
)
from tests.integration.identities import component_kubeconfig

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]


async def _phase(kube: KubeClient, name: str) -> str:
    return str((await kube.get_pod(NS, name)).get("status", {}).get("phase"))


async def test_scancel_fails_the_running_pods_naming_cancelled_as_a_disruption(
    sandbox: SlurmSandbox, slurm: SlurmClient, track_jobs: Callable[[int], int]
) -> None:
    mcs = unique_mcs()
    cfg = controller_config(sandbox, mcs)
    async with sandbox_kube(sandbox) as (_, kube), running_controller(cfg, kube):
        node = sandbox.external_nodes[0]
        job = await place_group(kube, slurm, sandbox, mcs, ["a-0", "a-1"], node, track_jobs)
        await slurm.cancel(job)

        async def both_failed() -> bool:
            return all([await _phase(kube, n) == "Failed" for n in ("a-0", "a-1")])

        await wait_for(both_failed, what="pods Failed after scancel")
        pod = await kube.get_pod(NS, "a-0")
        assert pod["status"]["reason"] == "SlurmJobCancelled"
        assert "CANCELLED" in pod["status"]["message"]
        assert str(job) in pod["status"]["message"]
        conds = {c["type"]: c for c in pod["status"]["conditions"]}
        assert conds[CONDITION_SLURM_JOB_ENDED]["status"] == "True"
        disruption = conds[CONDITION_DISRUPTION_TARGET]
        assert disruption["status"] == "True"
        assert disruption["reason"] == "SlurmJobCancelled"
        assert "CANCELLED" in disruption["message"]

        async def stopped() -> bool:  # the kubelet tears down a pod whose phase is Failed
            return not any([await _containers_run(kube, n) for n in ("a-0", "a-1")])

        await wait_for(stopped, what="the kubelet to stop the failed pods' containers")

        async def finalizers_gone() -> bool:
            for n in ("a-0", "a-1"):
                if FINALIZER in ((await kube.get_pod(NS, n))["metadata"].get("finalizers") or []):
                    return False
            return True

        await wait_for(finalizers_gone, what="finalizers removed after the job ended")
        events = (await kube.list(EVENTS, NS)).items
        assert any(e.get("reason") == "SlurmJobCancelled" for e in events)


async def test_delete_policy_deletes_pods_of_a_cancelled_job(
    sandbox: SlurmSandbox, slurm: SlurmClient, track_jobs: Callable[[int], int]
) -> None:
    mcs = unique_mcs()
    cfg = controller_config(sandbox, mcs, controller={"jobEndedPodPolicy": "delete"})
    async with sandbox_kube(sandbox) as (_, kube), running_controller(cfg, kube):
        job = await place_group(
            kube, slurm, sandbox, mcs, ["d-0"], sandbox.external_nodes[1], track_jobs
        )
        await slurm.cancel(job)

        async def gone() -> bool:
            try:
                await kube.get_pod(NS, "d-0")
            except KubeNotFound:
                return True
            return False

        await wait_for(gone, what="pod deleted (delete policy)")


async def test_all_pods_succeeded_ends_the_job_and_frees_the_pods(
    sandbox: SlurmSandbox, slurm: SlurmClient, track_jobs: Callable[[int], int]
) -> None:
    mcs = unique_mcs()
    cfg = controller_config(sandbox, mcs)
    async with sandbox_kube(sandbox) as (srv, kube), running_controller(cfg, kube):
        names = ["s-0", "s-1"]
        job = await place_group(
            kube, slurm, sandbox, mcs, names, sandbox.external_nodes[2], track_jobs
        )

        async def running() -> bool:
            return all([await _phase(kube, n) == "Running" for n in names])

        await wait_for(running, what="sandbox kubelet runs the pods")
        srv.finish_pod(NS, "s-0", exit_code=0)
        # One pod still running: the job must stay.
        assert (await slurm.get_job(job)).state.active
        srv.finish_pod(NS, "s-1", exit_code=0)

        async def job_ended() -> bool:
            return not (await slurm.get_job(job)).state.active

        await wait_for(job_ended, what="Slurm job ended after all pods succeeded")

        async def freed() -> bool:
            pods = [await kube.get_pod(NS, n) for n in names]
            return all(FINALIZER not in (p["metadata"].get("finalizers") or []) for p in pods)

        await wait_for(freed, what="finalizers removed")
        assert [await _phase(kube, n) for n in names] == ["Succeeded", "Succeeded"]


async def test_sweep_cancels_a_job_whose_pods_vanished_while_the_controller_was_down(
    sandbox: SlurmSandbox, slurm: SlurmClient, track_jobs: Callable[[int], int]
) -> None:
    mcs = unique_mcs()
    cfg = controller_config(sandbox, mcs)
    async with sandbox_kube(sandbox) as (_, kube):
        job = await place_group(
            kube, slurm, sandbox, mcs, ["g-0"], sandbox.external_nodes[0], track_jobs
        )
        # Controller down: the pod goes away entirely.
        await kube.patch_pod(NS, "g-0", {"metadata": {"finalizers": None}}, patch_type="merge")
        await kube.delete_pod(NS, "g-0", grace_period_seconds=0)
        assert (await slurm.get_job(job)).state.active
        async with running_controller(cfg, kube):

            async def cancelled() -> bool:
                return (await slurm.get_job(job)).state.primary == "CANCELLED"

            await wait_for(cancelled, what="dangling job cancelled by the sweep")


async def test_unreachable_slurm_never_fails_or_deletes_a_pod(
    sandbox: SlurmSandbox, slurm: SlurmClient, track_jobs: Callable[[int], int]
) -> None:
    mcs = unique_mcs()
    # Port 9 on loopback: nothing listens, every request is refused.
    cfg = controller_config(sandbox, mcs, slurmRestApi="http://127.0.0.1:9")
    refused = SlurmClient(
        cfg.slurm_rest_api, TokenProvider(sandbox.jwt_file, sandbox.user), retry_attempts=1
    )
    async with sandbox_kube(sandbox) as (_, kube), refused:
        job = await place_group(
            kube, slurm, sandbox, mcs, ["u-0"], sandbox.external_nodes[1], track_jobs
        )
        await slurm.cancel(job)  # the job really ended, but this controller cannot know
        async with running_controller(cfg, kube, refused) as ctl:
            # Wait for evidence that polls have failed, not for time.
            await wait_for(lambda: _polls_failed(ctl), what="controller saw Slurm unreachable")
            await ctl.sweep_once()
            await ctl.poll_once()
            pod = await kube.get_pod(NS, "u-0")
            assert pod["status"].get("phase") != "Failed"
            assert FINALIZER in pod["metadata"]["finalizers"]
            assert pod["metadata"].get("deletionTimestamp") is None


async def _polls_failed(ctl: Controller) -> bool:
    return ctl.poller.slurm_failures >= 2


async def test_pod_stuck_terminating_on_a_dead_node_is_cleaned_after_its_job_ends(
    sandbox: SlurmSandbox, slurm: SlurmClient, track_jobs: Callable[[int], int]
) -> None:
    mcs = unique_mcs()
    cfg = controller_config(sandbox, mcs, controller={"stuckTerminatingGraceSeconds": 0})
    node = sandbox.external_nodes[2]
    async with sandbox_kube(sandbox) as (srv, kube), running_controller(cfg, kube):
        job = await place_group(kube, slurm, sandbox, mcs, ["t-0"], node, track_jobs)
        await wait_for(lambda: _is_running(kube, "t-0"), what="pod running")
        # The node dies: no kubelet will ever confirm the deletion.
        srv.kubelet.stop_node(node)
        srv.set_node_ready(node, False)
        await kube.delete_pod(NS, "t-0")

        async def pod_gone() -> bool:
            try:
                await kube.get_pod(NS, "t-0")
            except KubeNotFound:
                return True
            return False

        await wait_for(pod_gone, what="stuck pod force-deleted")
        assert not (await slurm.get_job(job)).state.active


async def test_a_deleted_pod_keeps_its_slurm_job_until_its_containers_have_stopped(
    sandbox: SlurmSandbox, slurm: SlurmClient, track_jobs: Callable[[int], int]
) -> None:
    """The allocation invariant: containers that ignore SIGTERM run out the pod's grace
    period; Slurm's job stays RUNNING all that time and ends only after the kubelet says
    they stopped."""
    mcs = unique_mcs()
    cfg = controller_config(sandbox, mcs)
    node = sandbox.external_nodes[2]
    async with sandbox_kube(sandbox) as (_srv, kube), running_controller(cfg, kube):
        job = await place_group(kube, slurm, sandbox, mcs, ["g-0"], node, track_jobs)
        await kube.patch_pod(
            NS,
            "g-0",
            {"metadata": {"annotations": {IGNORE_SIGTERM: "true"}}},
            patch_type="merge",
        )
        await wait_for(lambda: _is_running(kube, "g-0"), what="pod running")
        await kube.delete_pod(NS, "g-0", grace_period_seconds=3)
        seen: list[tuple[bool, bool]] = []  # (a container runs, the job is active)

        async def job_ended() -> bool:
            # Slurm first, then the containers: a stopped container never runs again, so
            # "running" read after "ended" means it ran when the job had ended (the other
            # order would count a container that stopped between the two reads)
            active = (await slurm.get_job(job)).state.active
            running = await _containers_run(kube, "g-0")
            seen.append((running, active))
            return not active

        await wait_for(job_ended, what="the job to end after the containers stopped")
        assert (True, False) not in seen  # never ended while a container ran
        assert (True, True) in seen  # it did hold the job while they ran


async def _containers_run(kube: KubeClient, name: str) -> bool:
    try:
        pod = await kube.get_pod(NS, name)
    except KubeNotFound:
        return False
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return any("terminated" not in (c.get("state") or {}) for c in statuses)


async def _is_running(kube: KubeClient, name: str) -> bool:
    return await _phase(kube, name) == "Running"


async def test_composition_root_leads_and_serves_readyz_and_metrics(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with sandbox_kube(sandbox) as (_, kube):
        kubeconfig = tmp_path / "controller.kubeconfig"
        cfg = controller_config(
            sandbox,
            unique_mcs(),
            leaderElection=True,
            leaderElectionNamespace=NS,
            kubeconfig=str(kubeconfig),
            healthPort=port,
        )
        await component_kubeconfig(kube, cfg, "controller", kubeconfig)
        stop = asyncio.Event()
        task = asyncio.create_task(serve(cfg, stop=stop))
        try:

            async def leading() -> bool:
                try:
                    lease = await kube.get(LEASES, "slurm-bridge-controller", NS)
                except KubeNotFound:
                    return False
                return bool(lease["spec"].get("holderIdentity"))

            await wait_for(leading, what="Lease slurm-bridge-controller held")

            async def ready() -> bool:
                async with (
                    aiohttp.ClientSession() as http,
                    http.get(f"http://127.0.0.1:{port}/readyz") as r,
                ):
                    return r.status == 200

            await wait_for(ready, what="/readyz 200")

            async def metrics() -> str:
                async with (
                    aiohttp.ClientSession() as http,
                    http.get(f"http://127.0.0.1:{port}/metrics") as r,
                ):
                    return await r.text()

            assert "slurm_bridge_controller_leader 1.0" in await metrics()
            # the leader's sweep feeds the Slurm-side metrics (controller/slurm_metrics.py)
            node_series = f'slurm_bridge_slurm_nodes{{partition="{sandbox.partition}"'

            async def slurm_side() -> bool:
                return node_series in await metrics()

            await wait_for(slurm_side, what="Slurm-side metrics after the first sweep")
        finally:
            stop.set()
            await task
