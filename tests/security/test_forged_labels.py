"""Forged job-id labels never end a job that is not the bridge's: REAL Slurm sandbox, the
project's sandbox API server, the controller as a task.

A native Slurm job (no admin_comment: submitted straight to slurmrestd, held; and one
running) is named by forged pods with the bridge's schedulerName, its finalizer and the
job's id as their label: one pod in a managed namespace (the webhook bypassed), one in a
namespace the bridge does not manage. The native jobs survive every path the controller
has: the pods finished, the pods deleted, a controller restart, the dangling sweep. The
managed namespace's forged pod gets a Warning; the bridge's own job in a namespace taken
out of the managed set is still ended.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bridge.errors import KubeForbidden, KubeNotFound
from bridge.kube.client import KubeClient
from bridge.kube.resources import EVENTS, NAMESPACES, PODS
from bridge.models import JobSpec
from bridge.slurm.client import SlurmClient
from bridge.wellknown import FINALIZER, LABEL_JOB_ID, REASON_FOREIGN_JOB_LABEL
from controller.runtime import Controller
from tests.integration.bridge_harness import job_of, running_bridge
from tests.integration.conftest import SlurmSandbox, native_held_spec
from tests.integration.controller_harness import (
    NS,
    controller_config,
    place_group,
    running_controller,
    sandbox_kube,
    unique_mcs,
    wait_for,
)

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]

OTHER = "tenant-x"  # not managed by the bridge


def _forged(ns: str, name: str, job_id: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {LABEL_JOB_ID: str(job_id)},
            "finalizers": [FINALIZER],
        },
        "spec": {
            "schedulerName": "slurm-bridge-scheduler",
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": "busybox"}],
        },
    }


async def _create(kube: KubeClient, pod: dict[str, Any]) -> None:
    """Create ``pod`` once its namespace has the default ServiceAccount (403 before, as
    on a real API server)."""
    ns = pod["metadata"]["namespace"]

    async def created() -> bool:
        try:
            await kube.create(PODS, pod, ns)
        except KubeForbidden:
            return False
        return True

    await wait_for(created, what=f"pod created in {ns}")


async def _native_jobs(
    slurm: SlurmClient, sb: SlurmSandbox, track: Callable[[int], int]
) -> list[int]:
    """A held batch job and a running external job, neither made by the bridge."""
    held = native_held_spec(sb)
    running = JobSpec(name="native-running", partition=sb.partition, min_nodes=1, tasks=1)
    ids = [track(await slurm.submit(held)), track(await slurm.submit(running))]

    async def started() -> bool:
        return (await slurm.get_job(ids[1])).state.primary == "RUNNING"

    await wait_for(started, what="the native external job running")
    return ids


async def _alive(slurm: SlurmClient, job_ids: list[int]) -> None:
    for j in job_ids:
        job = await slurm.get_job(j)
        assert job.state.active, f"native job {j} was ended: {job.state.primary}"


def _seen(ctl: Controller, key: str, check: Callable[[dict[str, Any]], bool]) -> Callable[..., Any]:
    async def seen() -> bool:
        pod = ctl.caches.pods.get(key)
        return pod is not None and check(pod)

    return seen


async def _warnings(kube: KubeClient, ns: str, pod: str) -> list[dict[str, Any]]:
    return [
        e
        for e in (await kube.list(EVENTS, ns)).items
        if e.get("reason") == REASON_FOREIGN_JOB_LABEL
        and (e.get("involvedObject") or {}).get("name") == pod
    ]


async def _settle(ctl: Controller, job_ids: list[int]) -> None:
    """Every decision the controller would take for these jobs, taken now."""
    await ctl.poll_once()
    for j in job_ids:
        await ctl.reconcile(("job", str(j)))


async def test_native_slurm_jobs_survive_forged_labels_on_every_path(
    sandbox: SlurmSandbox, slurm: SlurmClient, track_jobs: Callable[[int], int]
) -> None:
    cfg = controller_config(sandbox, unique_mcs())
    native = await _native_jobs(slurm, sandbox, track_jobs)
    async with sandbox_kube(sandbox) as (_, kube):
        await kube.create(NAMESPACES, {"metadata": {"name": OTHER}})
        pods = [(ns, f"forged-{ns}-{j}", j) for j in native for ns in (NS, OTHER)]
        for ns, name, j in pods:
            await _create(kube, _forged(ns, name, j))

        async with running_controller(cfg, kube) as ctl:
            # 1. the forged pods finished
            for ns, name, _ in pods:
                await kube.patch(
                    PODS,
                    name,
                    {"status": {"phase": "Succeeded"}},
                    namespace=ns,
                    subresource="status",
                )
            for ns, name, _ in pods:
                done = _seen(ctl, f"{ns}/{name}", lambda p: p["status"]["phase"] == "Succeeded")
                await wait_for(done, what=f"the controller saw {name} finish")
            await _settle(ctl, native)
            await _alive(slurm, native)
            for ns, name, j in pods:
                warned = await _warnings(kube, ns, name)
                if ns == NS:
                    assert warned, f"a Warning on {name}"
                    assert str(j) in warned[0]["message"]
                else:
                    assert not warned, "no Event in a namespace the bridge does not manage"

            # 2. the forged pods deleted (they keep the finalizer: nobody may take it)
            for ns, name, _ in pods:
                await kube.delete(PODS, name, ns)
            for ns, name, _ in pods:
                deleting = _seen(
                    ctl, f"{ns}/{name}", lambda p: "deletionTimestamp" in p["metadata"]
                )
                await wait_for(deleting, what=f"the controller saw {name} deleted")
            await _settle(ctl, native)
            await _alive(slurm, native)
            for ns, name, _ in pods:
                pod = await kube.get(PODS, name, ns)
                assert FINALIZER in pod["metadata"]["finalizers"], "never finalized by label"

        # 3. a controller restart: it lists the pods anew and decides from scratch
        async with running_controller(cfg, kube) as ctl:
            await _settle(ctl, native)
            await ctl.sweep_once()
            await _alive(slurm, native)

            # 4. the dangling sweep once the pods are gone for good
            for ns, name, _ in pods:
                await kube.patch(PODS, name, {"metadata": {"finalizers": None}}, namespace=ns)

            async def all_gone() -> bool:
                for ns, name, _ in pods:
                    try:
                        await kube.get(PODS, name, ns)
                    except KubeNotFound:
                        continue
                    return False
                return not ctl.caches.pods

            await wait_for(all_gone, what="the forged pods gone")
            await ctl.sweep_once()
            await _settle(ctl, native)
            await _alive(slurm, native)


async def test_a_namespace_taken_out_of_the_managed_set_still_gets_its_jobs_ended(
    sandbox: SlurmSandbox, slurm: SlurmClient, track_jobs: Callable[[int], int]
) -> None:
    mcs = unique_mcs()
    # NS is no longer managed: its pods' jobs are still provably the bridge's.
    cfg = controller_config(sandbox, mcs, managedNamespaces=["elsewhere"])
    async with sandbox_kube(sandbox) as (_, kube), running_controller(cfg, kube):
        names = ["left-0", "left-1"]
        job = await place_group(
            kube, slurm, sandbox, mcs, names, sandbox.external_nodes[0], track_jobs
        )
        for name in names:
            await kube.patch(
                PODS, name, {"status": {"phase": "Succeeded"}}, namespace=NS, subresource="status"
            )

        async def ended() -> bool:
            return not (await slurm.get_job(job)).state.active

        await wait_for(ended, what="the bridge's job ended after its pods finished")


async def test_a_job_of_another_cluster_is_not_ended_by_its_pods(
    sandbox: SlurmSandbox, slurm: SlurmClient, track_jobs: Callable[[int], int]
) -> None:
    """The same back-link written by a bridge of another mcs label: not ours to end."""
    async with sandbox_kube(sandbox) as (_, kube):
        job = await place_group(
            kube, slurm, sandbox, unique_mcs(), ["o-0"], sandbox.external_nodes[1], track_jobs
        )
        cfg = controller_config(sandbox, unique_mcs())
        async with running_controller(cfg, kube) as ctl:
            await kube.patch(
                PODS, "o-0", {"status": {"phase": "Succeeded"}}, namespace=NS, subresource="status"
            )
            done = _seen(ctl, f"{NS}/o-0", lambda p: p["status"]["phase"] == "Succeeded")
            await wait_for(done, what="the controller saw o-0 finish")
            await _settle(ctl, [job])
            await _alive(slurm, [job])


async def test_the_scheduler_never_adopts_a_job_a_forged_label_names(
    sandbox: SlurmSandbox, slurm: SlurmClient, track_jobs: Callable[[int], int], tmp_path: Path
) -> None:
    """A managed pod created with a native job's id as its label (the webhook bypassed):
    the scheduler reads that job, sees it is not the pod's, says so, and gives the pod a
    job of its own; the native job is never updated, cancelled or bound to."""
    held = native_held_spec(sandbox)
    native = track_jobs(await slurm.submit(held))
    async with running_bridge(sandbox, tmp_path) as b:
        try:
            await b.create_pod("forger", labels={LABEL_JOB_ID: str(native)})
            await b.bound("forger")
            own = job_of(await b.get_pod("forger"))
            assert own != native
            await _alive(slurm, [native])
            assert await _warnings(b.kube, NS, "forger")
        finally:
            await b.cancel_jobs()


async def test_a_forged_running_pod_does_not_keep_the_bridges_job_alive(
    sandbox: SlurmSandbox, slurm: SlurmClient, track_jobs: Callable[[int], int]
) -> None:
    mcs = unique_mcs()
    cfg = controller_config(sandbox, mcs)
    async with sandbox_kube(sandbox) as (_, kube), running_controller(cfg, kube):
        await kube.create(NAMESPACES, {"metadata": {"name": OTHER}})
        job = await place_group(
            kube, slurm, sandbox, mcs, ["real-0"], sandbox.external_nodes[2], track_jobs
        )
        squatter = _forged(OTHER, "squatter", job)
        await _create(kube, squatter)
        await kube.patch(
            PODS,
            "squatter",
            {"status": {"phase": "Running"}},
            namespace=OTHER,
            subresource="status",
        )
        await kube.patch(
            PODS, "real-0", {"status": {"phase": "Succeeded"}}, namespace=NS, subresource="status"
        )

        async def ended() -> bool:
            return not (await slurm.get_job(job)).state.active

        await wait_for(ended, what="the bridge's job ended although a forged pod 'runs'")
        pod = await kube.get(PODS, "squatter", OTHER)
        assert pod["status"]["phase"] == "Running", "the forged pod is left alone"
