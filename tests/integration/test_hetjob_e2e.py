"""Gangs of several shapes end to end (docs/hetjob.md): real slurmrestd 26.05 with its GPU
external nodes plus a CPU-only external node made for the test, the sandbox Kubernetes
API server, and the scheduler (with ``scheduler.gangSizing: hetjob``) in this loop.

Each gang becomes ONE Slurm hetjob: its pods carry the hetjob's id, the pods of
component k run on component k's nodes, and Slurm holds exactly the GPUs the pods ask.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from bridge.clock import SystemClock
from bridge.kube.resources import PODS, Resource
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import SlurmJob
from bridge.wellknown import CONDITION_DISRUPTION_TARGET
from scheduler.cycle import Scheduler
from tests.clients import list_jobs
from tests.integration.bridge_harness import (
    NS,
    Bridge,
    has_job,
    job_of,
    mixed_podgroup,
    pod,
    running_bridge,
    running_sandboxes,
)
from tests.integration.conftest import SlurmSandbox, blocker_spec
from tests.integration.sched_proc import electing_replicas, jobs_by_group_uid, successful_bindings
from tests.scheduler_caches import list_into
from tests.workloads import load_example

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]
HET = {"rejectBackoffSeconds": 0.5, "workers": 4, "gangSizing": "hetjob"}


@contextlib.asynccontextmanager
async def cpu_only_node(slurm: SlurmClient, sandbox: SlurmSandbox) -> AsyncIterator[str]:
    """A CPU-only external node in the bridge's partition for the test's length."""
    name = "kube-cpu-" + secrets.token_hex(3)
    await slurm.create_external_node(name, cpus=sandbox.node_cpus, memory_mib=sandbox.node_mem_mb)
    try:
        assert await slurm.add_node_to_partition(sandbox.partition, name)
        yield name
    finally:
        with contextlib.suppress(Exception):
            await slurm.delete_node(name)


@pytest.fixture
async def bridge(sandbox: SlurmSandbox, tmp_path: Path) -> AsyncIterator[Bridge]:
    async with running_bridge(sandbox, tmp_path, scheduler=HET) as b:
        yield b


async def hetjob_of(b: Bridge, names: list[str]) -> SlurmJob:
    """The one Slurm job every pod names, read by its id (a hetjob: with its components)."""
    ids = {job_of(await b.get_pod(n)) for n in names}
    assert len(ids) == 1, f"the gang's pods name {len(ids)} Slurm jobs: {ids}"
    return await b.slurm.get_job(ids.pop())


async def bound_hetjob(b: Bridge, parts: list[list[str]]) -> SlurmJob:
    """Every pod of ``parts`` (component k's pods, in order) bound: their ONE hetjob,
    each pod on its own component's nodes."""
    names = [n for part in parts for n in part]
    for n in names:
        await b.bound(n)
    job = await hetjob_of(b, names)
    await assert_each_pod_on_its_components_nodes(b, job, parts)
    return job


async def component_nodes(b: Bridge, job: SlurmJob) -> list[tuple[str, ...]]:
    return [c.nodes for c in job.components]


async def assert_each_pod_on_its_components_nodes(
    b: Bridge, job: SlurmJob, parts: list[list[str]]
) -> None:
    assert len(job.components) == len(parts)
    for comp, names in zip(job.components, parts, strict=True):
        assert (comp.het_job_id, comp.het_job_offset) == (
            job.job_id,
            job.components.index(comp),
        )
        for n in names:
            assert await b.bound(n) in comp.nodes, (n, comp.nodes)
        assert f"{NS}/{names[0]}" in comp.admin_comment  # each component back-links its pods


async def test_podgroup_of_a_cpu_driver_and_gpu_workers_is_one_hetjob_holding_only_asked_gpus(
    bridge: Bridge, sandbox: SlurmSandbox
) -> None:
    async with cpu_only_node(bridge.slurm, sandbox) as cpu_node:
        bridge.api.set_node_ready(cpu_node)
        gpus = sandbox.node_gpus
        _, names = await mixed_podgroup(bridge, "mixed", gpus)
        job = await bound_hetjob(bridge, [names[:1], names[1:]])
        driver, gpu_workers = job.components
        # exactly the GPUs the pods asked: none for the driver, every one for each worker
        assert driver.gres_detail == ()
        assert gpu_workers.gres_detail == (f"gpu(CNT:{gpus})",) * 2
        assert not driver.tres_per_node
        # the job's pods are one unit in Slurm: cancelling the hetjob ends every component
        await bridge.slurm.cancel(job.job_id)
        ended = await bridge.slurm.get_job(job.job_id)
        assert {c.state.primary for c in ended.components} <= {"CANCELLED", "COMPLETED"}


async def test_jobset_driver_and_gpu_workers_are_the_hetjobs_components(
    bridge: Bridge, sandbox: SlurmSandbox
) -> None:
    [js] = copy.deepcopy(load_example("jobset"))
    js["metadata"]["name"] = "het-js"
    workers = js["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
    workers["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": str(sandbox.node_gpus)}
    names = await bridge.create_workload([js])
    driver = [n for n in names if "-driver-" in n]
    job = await bound_hetjob(bridge, [driver, [n for n in names if n not in driver]])
    assert job.het_components[0].gres_detail == (f"gpu(CNT:{sandbox.node_gpus})",) * 2


async def test_lws_with_a_cpu_leader_and_gpu_workers_is_one_hetjob_leader_first(
    bridge: Bridge, sandbox: SlurmSandbox
) -> None:
    [lws] = copy.deepcopy(load_example("lws"))
    lws["metadata"]["name"] = "het-lws"
    lwt = lws["spec"]["leaderWorkerTemplate"]
    lwt["leaderTemplate"] = copy.deepcopy(lwt["workerTemplate"])
    worker = lwt["workerTemplate"]["spec"]["containers"][0]
    worker["resources"]["limits"] = {"nvidia.com/gpu": "1"}
    names = await bridge.create_workload([lws])
    leader = [n for n in names if n == "het-lws-0"]
    job = await bound_hetjob(bridge, [leader, [n for n in names if n not in leader]])
    assert job.components[0].gres_detail == ()


@contextlib.asynccontextmanager
async def bridge_with_controller(sandbox: SlurmSandbox, tmp_path: Path) -> AsyncIterator[Bridge]:
    async with running_bridge(sandbox, tmp_path, controller=True, scheduler=HET) as b:
        yield b


async def mixed_gang(b: Bridge, name: str, gpus: int) -> tuple[list[str], SlurmJob]:
    """A PodGroup of a CPU driver and two GPU workers, bound: its pods and its hetjob."""
    _, names = await mixed_podgroup(b, name, gpus)
    for n in names:
        await b.bound(n)
    job = await hetjob_of(b, names)
    assert len(job.components) == 2
    return names, job


async def phase(b: Bridge, name: str) -> str:
    return str(((await b.get_pod(name)).get("status") or {}).get("phase") or "")


async def test_one_component_cancelled_fails_every_pod_of_the_gang_as_a_disruption(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    async with bridge_with_controller(sandbox, tmp_path) as b:
        names, job = await mixed_gang(b, "cut", sandbox.node_gpus)
        workers = job.het_components[0]
        await b.slurm.cancel(workers.job_id)  # only component 1, as `scancel 33` would

        async def all_failed() -> bool:
            return all([await phase(b, n) == "Failed" for n in names])

        await b.wait_for("every pod of the gang Failed", all_failed)
        driver = await b.get_pod(names[0])  # the driver's own component still ran
        assert driver["status"]["reason"] == "SlurmJobCancelled"
        assert f"hetjob component {job.job_id}+1" in driver["status"]["message"]
        conds = {c["type"]: c for c in driver["status"]["conditions"]}
        assert conds[CONDITION_DISRUPTION_TARGET]["status"] == "True"

        async def whole_job_ended() -> bool:
            j = await b.slurm.get_job(job.job_id)
            return not any(c.state.active for c in j.components)

        # every pod stopped: the controller ends what is left of the hetjob
        await b.wait_for("the leader ended too", whole_job_ended)


async def test_the_hetjob_ends_only_when_every_pod_of_every_component_has_stopped(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    async with bridge_with_controller(sandbox, tmp_path) as b:
        names, job = await mixed_gang(b, "fin", sandbox.node_gpus)
        assert b.ctl is not None
        # the dangling sweep takes a component for the hetjob's, never for a stray job
        await b.ctl.sweep_once()
        await b.ctl.sweep_once()
        b.api.finish_pod(NS, names[0], exit_code=0)  # the driver (component 0) finishes

        async def driver_done() -> bool:
            return await phase(b, names[0]) == "Succeeded"

        await b.wait_for("the driver Succeeded", driver_done)
        await b.ctl.sweep_once()
        still = await b.slurm.get_job(job.job_id)
        assert [c.state.primary for c in still.components] == ["RUNNING", "RUNNING"]
        for n in names[1:]:
            b.api.finish_pod(NS, n, exit_code=0)

        async def ended() -> list[str]:
            j = await b.slurm.get_job(job.job_id)
            states = [c.state.primary for c in j.components]
            return states if not any(c.state.active for c in j.components) else []

        assert set(await b.wait_for("every component ended", ended)) <= {"CANCELLED", "COMPLETED"}


BUILTIN_PODGROUPS = Resource("scheduling.k8s.io", "v1alpha2", "podgroups", "PodGroup", True)


def member(name: str, podgroup: str, cpu: str = "1", gpus: int = 0) -> dict[str, Any]:
    """A pod naming the built-in PodGroup ``podgroup`` (spec.schedulingGroup)."""
    body = pod(name, cpu=cpu, gpus=gpus)
    body["spec"]["schedulingGroup"] = {"podGroupName": podgroup}
    return body


async def test_builtin_podgroup_of_mixed_shapes_read_at_the_served_version_is_one_hetjob(
    bridge: Bridge, sandbox: SlurmSandbox
) -> None:
    """The scheduler finds the built-in PodGroup's version by discovery (1.36 serves
    scheduling.k8s.io/v1alpha2; no version is pinned)."""
    served = await bridge.kube.served_versions("scheduling.k8s.io")
    assert "v1alpha2" in served
    await bridge.kube.create(
        BUILTIN_PODGROUPS,
        {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "PodGroup",
            "metadata": {"name": "wl"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}},
        },
        NS,
    )
    names = ["wl-driver", "wl-w0", "wl-w1"]
    for n, (cpu, gpus) in zip(names, [("1", 0), ("2", 1), ("2", 1)], strict=True):
        await bridge.kube.create(PODS, member(n, "wl", cpu, gpus), NS)
    await bound_hetjob(bridge, [names[:1], names[1:]])


async def test_a_restarted_scheduler_adopts_the_pending_hetjob_and_never_submits_another(
    bridge: Bridge, sandbox: SlurmSandbox
) -> None:
    blocker = await bridge.slurm.submit(blocker_spec(sandbox))  # holds every external node
    try:
        _, names = await mixed_podgroup(bridge, "adopt", 1)

        async def pending_hetjob() -> int:
            msg = await bridge.scheduled_message(names[1])
            pod = await bridge.get_pod(names[1])
            return job_of(pod) if "(hetjob component " in msg and has_job(pod) else 0

        job_id = await bridge.wait_for("the pending hetjob shown on the pods", pending_hetjob)
        # a second scheduler starts from nothing but what Kubernetes and Slurm hold
        fresh = Scheduler(bridge.cfg, bridge.kube, bridge.sched.slurm, SystemClock())
        await list_into(fresh, bridge.kube)
        await fresh.sweep()
        for n in names:
            await fresh.on_pod_event("ADDED", await bridge.get_pod(n))
        key = fresh.state.pod_group[f"{NS}/{names[0]}"]
        await fresh.process(key)
        await fresh.process(key)  # a restored pending job is read when it must act on it
        assert fresh.groups[key].job is not None
        assert fresh.groups[key].job.job_id == job_id
        listed = (await list_jobs(bridge.slurm)).jobs
        mine = [j for j in listed if f"{NS}/adopt-" in j.admin_comment and j.state.active]
        assert {j.het_job_id for j in mine} == {job_id}  # one hetjob: its two components
        assert len(mine) == 2
    finally:
        await bridge.slurm.cancel(blocker)
    for n in names:
        await bridge.bound(n)
    assert (await hetjob_of(bridge, names)).job_id == job_id


async def test_the_startup_sweep_finds_a_hetjob_no_pod_names_yet_by_its_leader(
    bridge: Bridge, sandbox: SlurmSandbox
) -> None:
    """A component read alone (its pods carry no label yet) leads to its leader: the
    sweep indexes the whole hetjob, never a component, by the group's uid."""
    blocker = await bridge.slurm.submit(blocker_spec(sandbox))
    try:
        pg, _ = await mixed_podgroup(bridge, "swept", 1, workers=1)

        async def submitted() -> list[SlurmJob]:
            jobs = (await list_jobs(bridge.slurm)).jobs
            return [j for j in jobs if f"{NS}/swept-" in j.admin_comment and j.state.active]

        comps = await bridge.wait_for("the hetjob submitted", submitted)
        fresh = Scheduler(bridge.cfg, bridge.kube, bridge.sched.slurm, SystemClock())
        await list_into(fresh, bridge.kube)
        await fresh.sweep()
        found = fresh.jobs_by_group_uid.get((NS, pg["metadata"]["uid"]))
        assert found is not None
        assert found.job_id == comps[0].het_job_id
        assert len(found.components) == 2
    finally:
        await bridge.slurm.cancel(blocker)


BUILTIN_WORKLOADS = Resource("scheduling.k8s.io", "v1alpha2", "workloads", "Workload", True)


async def builtin_workload(
    b: Bridge, name: str, parts: dict[str, int], *, podgroups: bool = True
) -> None:
    """A 1.36 Workload of one podGroupTemplate per ``parts`` entry (name -> minCount),
    and (``podgroups``) the PodGroup ``<name>-<part>`` made from each, as a workload
    controller would."""
    await b.kube.create(
        BUILTIN_WORKLOADS,
        {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "Workload",
            "metadata": {"name": name},
            "spec": {
                "podGroupTemplates": [
                    {"name": part, "schedulingPolicy": {"gang": {"minCount": n}}}
                    for part, n in parts.items()
                ]
            },
        },
        NS,
    )
    if podgroups:
        await builtin_podgroups(b, name, parts)


async def builtin_podgroups(b: Bridge, name: str, parts: dict[str, int]) -> None:
    """The PodGroup ``<name>-<part>`` made from each template of Workload ``name``."""
    for part, n in parts.items():
        ref = {"workload": {"workloadName": name, "podGroupTemplateName": part}}
        await b.kube.create(
            BUILTIN_PODGROUPS,
            {
                "apiVersion": "scheduling.k8s.io/v1alpha2",
                "kind": "PodGroup",
                "metadata": {"name": f"{name}-{part}"},
                "spec": {
                    "podGroupTemplateRef": ref,
                    "schedulingPolicy": {"gang": {"minCount": n}},
                },
            },
            NS,
        )


async def test_a_workload_with_a_cpu_podgroup_and_a_gpu_podgroup_is_one_hetjob(
    bridge: Bridge, sandbox: SlurmSandbox
) -> None:
    """The built-in Workload's PodGroups are the components of ONE gang: nothing starts
    before every PodGroup has its pods; Slurm starts both components together; each
    PodGroup's pods run on its component's nodes; squeue shows <id>+0 and <id>+1."""
    await builtin_workload(bridge, "train", {"driver": 1, "workers": 2})
    workers = ["train-w0", "train-w1"]
    for n in workers:
        await bridge.kube.create(PODS, member(n, "train-workers", "2", sandbox.node_gpus), NS)

    async def waiting_for_the_driver() -> str:
        msg = await bridge.scheduled_message(workers[0])
        return msg if "2 of 3" in msg else ""

    # the workers' PodGroup is complete, but the Workload's gang is not: no job yet
    await bridge.wait_for("the workers waiting for the driver's PodGroup", waiting_for_the_driver)
    assert not any([has_job(await bridge.get_pod(n)) for n in workers])
    await bridge.kube.create(PODS, member("train-d0", "train-driver"), NS)
    job = await bound_hetjob(bridge, [["train-d0"], workers])
    assert "slurm-bridge: Workload slurm-bridge/train" in job.comment
    assert job.components[1].gres_detail == (f"gpu(CNT:{sandbox.node_gpus})",) * 2
    squeue = sandbox.cli("exec", "--", "squeue", "-h", "-j", str(job.job_id), "-o", "%i")
    assert squeue.returncode == 0, squeue.stderr
    assert sorted(squeue.stdout.split()) == [f"{job.job_id}+0", f"{job.job_id}+1"]


async def test_pods_made_before_their_podgroups_and_workload_wait_for_them_and_start_together(
    bridge: Bridge, sandbox: SlurmSandbox
) -> None:
    """A PodGroup of the gang is complete on its own before its Workload exists: it waits
    for the Workload (never a job of its own), then joins the Workload's gang."""
    names = ["late-d0", "late-w0", "late-w1"]
    await bridge.kube.create(PODS, member(names[0], "late-driver"), NS)
    for n in names[1:]:
        await bridge.kube.create(PODS, member(n, "late-workers", "2", sandbox.node_gpus), NS)

    def says(n: str, text: str) -> Callable[[], Awaitable[str]]:
        async def check() -> str:
            msg = await bridge.scheduled_message(n)
            return msg if text in msg else ""

        return check

    await bridge.wait_for("no PodGroup yet", says(names[1], "it does not exist"))
    await builtin_podgroups(bridge, "late", {"driver": 1, "workers": 2})
    await bridge.wait_for(
        "the PodGroups waiting for their Workload",
        says(names[1], "waiting for Workload slurm-bridge/late"),
    )
    assert not any([has_job(await bridge.get_pod(n)) for n in names])
    await builtin_workload(bridge, "late", {"driver": 1, "workers": 2}, podgroups=False)
    await bound_hetjob(bridge, [names[:1], names[1:]])


async def test_a_new_leader_adopts_the_hetjobs_started_and_in_flight_never_submitting_another(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    """Two scheduler processes with leader election: the leader is SIGKILLed while one
    gang's hetjob RUNS with a pod still unbound (its Binding failing) and another gang's
    hetjob is PENDING. The new leader binds the rest of the first to its components'
    nodes and the second when Slurm starts it: one hetjob per gang, one Binding per pod."""
    lease = 3.0
    hold_binds = {"gangSizing": "hetjob", "bindGiveUpAttempts": 1000, "bindGiveUpSeconds": 600}
    async with running_sandboxes(sandbox) as sb:
        a, b = await electing_replicas(sb.kube, sandbox, tmp_path, lease, scheduler=hold_binds)
        try:
            a.start()
            await a.wait_ready()  # a leads
            b.start()  # b stands by
            gpus = sandbox.node_gpus
            fault = sb.api.inject_fault(r"/pods/started-w1/binding$", method="POST", count=None)
            started_pg, started = await mixed_podgroup(sb, "started", gpus)
            for n in started[:2]:
                await sb.bound(n)
            await sb.wait_for(
                "a failed binding of started-w1", lambda: asyncio.sleep(0, fault.hits)
            )
            # every GPU node is held by the started hetjob: the next one waits in Slurm
            pending_pg, pending = await mixed_podgroup(sb, "inflight", gpus)

            async def pending_hetjob() -> int:
                msg = await sb.scheduled_message(pending[1])
                p = await sb.get_pod(pending[1])
                return job_of(p) if "(hetjob component " in msg and has_job(p) else 0

            pending_id = await sb.wait_for("the pending hetjob on the pods", pending_hetjob)
            assert not b.ready(), "the standby replica must not run the scheduler"

            a.kill()  # SIGKILL: no lease release
            sb.api.clear_faults()
            await b.wait_ready(deadline=lease * 10)
            await sb.bound(started[2])
            started_id = job_of(await sb.get_pod(started[0]))
            assert {job_of(await sb.get_pod(n)) for n in started} == {started_id}
            job = await sb.slurm.get_job(started_id)
            assert await sb.bound(started[2]) in job.components[1].nodes
            await sb.slurm.cancel(started_id)  # its nodes free: the pending hetjob starts
            for n in pending:
                await sb.bound(n)
            assert {job_of(await sb.get_pod(n)) for n in pending} == {pending_id}

            by_uid = jobs_by_group_uid((await list_jobs(sb.slurm)).jobs)
            for pg, job_id in ((started_pg, started_id), (pending_pg, pending_id)):
                [only] = by_uid[pg["metadata"]["uid"]]  # never a second hetjob
                assert (only.job_id, len(only.components)) == (job_id, 2)
            assert successful_bindings(sb.api.request_log) == dict.fromkeys(started + pending, 1)
        finally:
            a.kill()
            await b.stop()
