"""The scheduler end to end: real slurmrestd 26.05, the sandbox Kubernetes API server,
and the scheduler's loops running in this test's event loop.

Waits poll the API with a deadline; nothing sleeps for a fixed time to "let it happen".
Every Slurm job a test causes is cancelled at teardown.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bridge.clock import SystemClock
from bridge.config import BridgeConfig, parse_config
from bridge.errors import SlurmError
from bridge.kube.client import KubeClient
from bridge.kube.resources import (
    EVENTS,
    JOBS,
    JOBSETS,
    LEADERWORKERSETS,
    PODGROUPS,
    PODS,
    Resource,
)
from bridge.sandbox.kubeapi.server import SANDBOX_TOKEN, SandboxApiServer
from bridge.slurm.client import SlurmClient
from bridge.wellknown import ANNOTATION_SLURM_NODE, FINALIZER, LABEL_JOB_ID
from scheduler.app import run_scheduler
from scheduler.core import Scheduler
from tests.integration.conftest import SlurmSandbox, make_client
from tests.integration.sched_proc import (
    SchedulerProcess,
    jobs_by_group_uid,
    successful_bindings,
    write_scheduler_config,
)
from tests.workloads import expand, load_example

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]
NS = "slurm-bridge"
DEADLINE = 30.0


@dataclass
class Sandboxes:
    """The sandbox API server and real Slurm, with helpers; no scheduler of its own."""

    kube: KubeClient
    slurm: SlurmClient
    api: SandboxApiServer

    async def create_pod(self, name: str, **kw: Any) -> dict[str, Any]:
        return await self.kube.create(PODS, pod(name, **kw), NS)

    async def get_pod(self, name: str) -> dict[str, Any]:
        return await self.kube.get_pod(NS, name)

    async def cancel_jobs(self) -> None:
        """Cancel every active Slurm job of this test: named by a pod's job-id label, or
        whose admin_comment names a group uid of this API server (pods, PodGroups, ...)."""
        kinds = [(r.group, r.plural) for r in (PODS, PODGROUPS, JOBS, JOBSETS, LEADERWORKERSETS)]
        uids = {o["metadata"]["uid"] for k in kinds for o in self.api.store.list(k)}
        ids = {job_of(p) for p in (await self.kube.list_pods(NS)).items if has_job(p)}
        for uid, jobs in jobs_by_group_uid((await self.slurm.list_jobs()).jobs).items():
            if uid in uids:
                ids |= {j.job_id for j in jobs if j.state.active}
        for job_id in ids:
            with contextlib.suppress(SlurmError):
                await self.slurm.cancel(job_id)

    async def create_workload(
        self, manifests: list[dict[str, Any]], *, pods_reversed: bool = False
    ) -> list[str]:
        """Create the workload objects the sandbox serves, then the pods their controllers
        would create (tests/workloads.py), owner references pointing at the server's uids.
        Owners the sandbox does not serve (StatefulSets) keep their generated uids, as the
        scheduler never reads them. Returns the pod names in creation order."""
        served: dict[str, Resource] = {
            "Job": JOBS,
            "JobSet": JOBSETS,
            "LeaderWorkerSet": LEADERWORKERSETS,
            "PodGroup": PODGROUPS,
        }
        ex = expand(manifests, NS)
        uids: dict[str, str] = {}
        for obj in ex.objects.values():
            res = served.get(obj["kind"])
            if res is None or obj["kind"] == "Pod":
                continue
            body = {**obj, "metadata": dict(obj["metadata"])}
            body["metadata"].pop("uid")
            created = await self.kube.create(res, body, NS)
            uids[obj["metadata"]["uid"]] = created["metadata"]["uid"]
        pods = list(reversed(ex.pods)) if pods_reversed else ex.pods
        for p in pods:
            meta = dict(p["metadata"])
            meta.pop("uid")
            meta["ownerReferences"] = [
                {**o, "uid": uids.get(o["uid"], o["uid"])} for o in meta["ownerReferences"]
            ]
            await self.kube.create(PODS, {**p, "metadata": meta}, NS)
        return [p["metadata"]["name"] for p in pods]

    async def wait_for(
        self, what: str, check: Callable[[], Awaitable[Any]], deadline: float = DEADLINE
    ) -> Any:
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline
        last: Any = None
        while loop.time() < end:
            last = await check()
            if last:
                return last
            await asyncio.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}; last: {last!r}")

    async def bound(self, name: str) -> str:
        async def node() -> str:
            return str(((await self.get_pod(name)).get("spec") or {}).get("nodeName") or "")

        return str(await self.wait_for(f"pod {name} bound", node))

    async def scheduled_message(self, name: str) -> str:
        pod = await self.get_pod(name)
        for c in (pod.get("status") or {}).get("conditions") or []:
            if c.get("type") == "PodScheduled":
                return f"{c.get('status')} {c.get('reason')}: {c.get('message')}"
        return ""


@dataclass
class Bridge(Sandboxes):
    """:class:`Sandboxes` plus a scheduler running in the test's event loop."""

    sched: Scheduler
    cfg: BridgeConfig
    task: asyncio.Task[None] | None = None

    async def start_scheduler(self) -> None:
        """Start a fresh scheduler (nothing in memory but what it reads back)."""
        self.sched = Scheduler(self.cfg, self.kube, self.sched.slurm, SystemClock())
        ready = asyncio.Event()
        self.task = asyncio.create_task(
            run_scheduler(self.cfg, self.kube, self.sched.slurm, ready=ready, scheduler=self.sched)
        )
        await asyncio.wait_for(ready.wait(), 20)

    async def stop_scheduler(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task
            self.task = None


def pod(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    cpu: str = "1",
    memory: str = "100Mi",
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
        "spec": {
            "schedulerName": "slurm-bridge-scheduler",
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}},
                }
            ],
        },
    }


def job_of(p: dict[str, Any]) -> int:
    return int(p["metadata"]["labels"][LABEL_JOB_ID])


def has_job(p: dict[str, Any]) -> bool:
    return LABEL_JOB_ID in (p["metadata"].get("labels") or {})


@pytest.fixture
async def sandboxes(sandbox: SlurmSandbox) -> AsyncIterator[Sandboxes]:
    """The sandbox API server (nodes = Slurm's external nodes) and real Slurm, without a
    scheduler: for tests that run the scheduler as subprocesses."""
    async with (
        SandboxApiServer(nodes=list(sandbox.external_nodes), kubelet=True) as api,
        KubeClient.for_host(api.url, token=SANDBOX_TOKEN, request_timeout=10) as kube,
        make_client(sandbox) as slurm,
    ):
        sb = Sandboxes(kube, slurm, api)
        try:
            yield sb
        finally:
            await sb.cancel_jobs()


@pytest.fixture
async def bridge(sandbox: SlurmSandbox, tmp_path: Path) -> AsyncIterator[Bridge]:
    async with SandboxApiServer(nodes=list(sandbox.external_nodes), kubelet=True) as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        cfg = parse_config(
            {
                "slurmRestApi": sandbox.rest_url,
                "slurmTokenFile": str(sandbox.jwt_file),
                "slurmUserName": sandbox.user,
                "partition": sandbox.partition,
                "managedNamespaces": [NS],
                "kubeconfig": str(kubeconfig),
                "leaderElection": False,
                "slurmPollIntervalSeconds": 0.2,
                "scheduler": {"rejectBackoffSeconds": 0.5, "workers": 4},
            }
        )
        kube = await KubeClient.from_config(cfg)
        async with kube, make_client(sandbox) as slurm, SlurmClient.from_config(cfg) as sslurm:
            b = Bridge(kube, slurm, api, Scheduler(cfg, kube, sslurm, SystemClock()), cfg)
            await b.start_scheduler()
            try:
                yield b
            finally:
                await b.stop_scheduler()
                await b.cancel_jobs()


async def test_single_pod_gets_a_running_placeholder_job_and_is_bound(bridge: Bridge) -> None:
    await bridge.create_pod("solo")
    node = await bridge.bound("solo")
    p = await bridge.get_pod("solo")
    job = await bridge.slurm.get_job(job_of(p))
    assert job.state.primary == "RUNNING"
    assert job.external
    assert list(job.nodes) == [node]
    assert p["metadata"]["annotations"][ANNOTATION_SLURM_NODE] == node
    assert FINALIZER in p["metadata"]["finalizers"]
    assert job.name == "solo"
    assert "slurm-bridge/solo" in job.admin_comment


async def podgroup(bridge: Bridge, name: str, size: int) -> list[str]:
    await bridge.kube.create(
        PODGROUPS,
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": {"minMember": size},
        },
        NS,
    )
    names = [f"{name}-{i}" for i in range(size)]
    for n in names:
        await bridge.create_pod(
            n, labels={"scheduling.x-k8s.io/pod-group": name}, cpu="3", memory="500Mi"
        )
    return names


async def test_podgroup_waits_for_slurm_resources_then_runs_when_the_first_finishes(
    bridge: Bridge, sandbox: SlurmSandbox
) -> None:
    assert len(sandbox.external_nodes) == 3, "the scenario needs the 3-node partition"
    first = await podgroup(bridge, "pg-1", 2)
    nodes = {await bridge.bound(n) for n in first}
    assert len(nodes) == 2  # exclusive: one pod per node
    job1 = job_of(await bridge.get_pod(first[0]))
    assert job_of(await bridge.get_pod(first[1])) == job1  # ONE Slurm job for the gang

    second = await podgroup(bridge, "pg-2", 2)

    async def waits_on_resources() -> str:
        msg = await bridge.scheduled_message(second[0])
        return msg if "Resources" in msg else ""

    msg = await bridge.wait_for("pg-2 to show Slurm's reason", waits_on_resources)
    assert msg.startswith("False Unschedulable: Slurm job ")
    assert not ((await bridge.get_pod(second[0])).get("spec") or {}).get("nodeName")

    await bridge.slurm.cancel(job1)  # the first group finishes
    for n in second:
        await bridge.bound(n)
    job2 = job_of(await bridge.get_pod(second[0]))
    assert job2 != job1


async def test_incomplete_podgroup_waits_with_a_clear_condition(bridge: Bridge) -> None:
    await bridge.kube.create(
        PODGROUPS,
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "pg-half"},
            "spec": {"minMember": 2},
        },
        NS,
    )
    await bridge.create_pod("pg-half-0", labels={"scheduling.x-k8s.io/pod-group": "pg-half"})

    async def waiting() -> str:
        msg = await bridge.scheduled_message("pg-half-0")
        return msg if "1 of 2" in msg else ""

    await bridge.wait_for("the incomplete-group condition", waiting)
    assert LABEL_JOB_ID not in (await bridge.get_pod("pg-half-0"))["metadata"]["labels"]


async def test_rejected_job_gives_a_warning_event_with_slurms_message(bridge: Bridge) -> None:
    await bridge.create_pod(
        "bad-part", annotations={"slurmjob.slinky.slurm.net/partition": "no-such-partition"}
    )

    async def rejected() -> str:
        msg = await bridge.scheduled_message("bad-part")
        return msg if "Invalid partition" in msg else ""

    await bridge.wait_for("Slurm's rejection on the pod", rejected)
    evs = (await bridge.kube.list(EVENTS, NS)).items
    assert any(
        e.get("type") == "Warning"
        and e.get("reason") == "FailedScheduling"
        and "Invalid partition" in e.get("message", "")
        and e["involvedObject"]["name"] == "bad-part"
        for e in evs
    )


async def test_shared_pods_pack_onto_one_node(bridge: Bridge) -> None:
    await bridge.kube.create(
        PODGROUPS,
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {
                "name": "packed",
                "annotations": {
                    "slurmjob.slinky.slurm.net/exclusive": "false",
                    "slurmjob.slinky.slurm.net/max-nodes": "1",
                },
            },
            "spec": {"minMember": 3},
        },
        NS,
    )
    names = [f"packed-{i}" for i in range(3)]
    for n in names:
        await bridge.create_pod(n, labels={"scheduling.x-k8s.io/pod-group": "packed"}, cpu="2")
    nodes = [await bridge.bound(n) for n in names]
    job = await bridge.slurm.get_job(job_of(await bridge.get_pod(names[0])))
    assert len(job.nodes) == 1  # Slurm packed the 3 tasks (2 CPUs each) onto one node
    assert set(nodes) == set(job.nodes)  # and the bridge bound all 3 pods there


async def test_restarted_scheduler_makes_no_duplicate_job_and_binds_once(
    bridge: Bridge, sandbox: SlurmSandbox, track_jobs: Callable[[int], int]
) -> None:
    # Fill the partition so the group's job stays pending across the restart.
    from bridge.models import JobSpec

    blocker = track_jobs(
        await bridge.slurm.submit(
            JobSpec(
                name="blocker",
                partition=sandbox.partition,
                min_nodes=len(sandbox.external_nodes),
                tasks=len(sandbox.external_nodes),
                tasks_per_node=1,
                memory_per_node_mib=100,
            )
        )
    )
    await bridge.create_pod("restart-me")

    async def pending_job() -> int:
        labels = (await bridge.get_pod("restart-me"))["metadata"].get("labels") or {}
        return int(labels.get(LABEL_JOB_ID) or 0)

    job_id = await bridge.wait_for("the pending job's label", pending_job)

    # A second scheduler starts from nothing but what Kubernetes and Slurm hold.
    fresh = Scheduler(bridge.cfg, bridge.kube, bridge.sched.slurm, SystemClock())
    await fresh.sweep()
    pod = await bridge.get_pod("restart-me")
    await fresh.on_pod_event("ADDED", pod)
    key = fresh.pod_group["slurm-bridge/restart-me"]
    await fresh.process(key)
    assert fresh.groups[key].job is not None
    assert fresh.groups[key].job.job_id == job_id  # found, not resubmitted

    jobs = await bridge.slurm.list_jobs()
    mine = [j for j in jobs.jobs if "slurm-bridge/restart-me" in j.admin_comment]
    assert [j.job_id for j in mine if j.state.active] == [job_id]

    await bridge.slurm.cancel(blocker)
    node = await bridge.bound("restart-me")
    assert node in sandbox.external_nodes


async def test_lws_leader_goes_to_the_first_node_of_slurms_allocation_workers_in_order(
    bridge: Bridge, sandbox: SlurmSandbox
) -> None:
    assert len(sandbox.external_nodes) >= 3, "a LWS group of 3 needs 3 nodes"
    # Workers first, leader last: the order comes from the worker index, not from arrival.
    await bridge.create_workload(load_example("lws"), pods_reversed=True)
    in_order = ["lws-1-0", "lws-1-0-1", "lws-1-0-2"]  # worker index 0 (leader), 1, 2
    placed = [await bridge.bound(n) for n in in_order]
    jobs = {job_of(await bridge.get_pod(n)) for n in in_order}
    assert len(jobs) == 1, "one Slurm job for the LWS group"
    job = await bridge.slurm.get_job(jobs.pop())
    assert job.name == "lws-1-0"
    assert len(job.nodes) == 3
    assert placed == list(job.nodes)  # leader on Slurm's first node, workers in order


async def test_indexed_job_packs_completion_indexes_in_slurms_node_order(
    bridge: Bridge,
) -> None:
    # 4 completions on a 3-node partition: shared, 3 CPUs per pod on 8-CPU nodes, so
    # Slurm places 2 tasks on each of 2 nodes (or as it likes: the test reads Slurm's own
    # allocation and expects index order over it).
    manifests = load_example("indexed-job")
    tmpl = manifests[0]["spec"]["template"]
    tmpl.setdefault("metadata", {})["annotations"] = {
        "slurmjob.slinky.slurm.net/exclusive": "false"
    }
    tmpl["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3"
    await bridge.create_workload(manifests, pods_reversed=True)
    by_index = [f"indexed-1-{i}-x{i}" for i in range(4)]
    placed = [await bridge.bound(n) for n in by_index]
    jobs = {job_of(await bridge.get_pod(n)) for n in by_index}
    assert len(jobs) == 1, "one Slurm job for the Indexed Job"
    job = await bridge.slurm.get_job(jobs.pop())
    assert job.cpus_per_task == 3
    per_node = {a.name: (a.cpus or 0) // 3 for a in job.allocation}
    assert sum(per_node.values()) == 4, f"Slurm placed 4 tasks: {job.allocation}"
    # Completion index i takes the i-th task slot, walking Slurm's nodes in Slurm's order.
    slots = [n for n in job.nodes for _ in range(per_node[n])]
    assert placed == slots


async def test_leader_failover_after_sigkill_binds_new_pods_once_without_double_submission(
    sandboxes: Sandboxes, sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    sb = sandboxes
    kubeconfig = sb.api.write_kubeconfig(tmp_path / "kubeconfig")
    lease = 3.0
    config = write_scheduler_config(
        tmp_path / "scheduler.yaml",
        sandbox,
        kubeconfig,
        leaderElection=True,
        leaseDurationSeconds=lease,
        renewDeadlineSeconds=2.0,
        retryPeriodSeconds=0.25,
    )
    a = SchedulerProcess(config, tmp_path / "a.log", "replica-a")
    b = SchedulerProcess(config, tmp_path / "b.log", "replica-b")
    try:
        a.start()
        await a.wait_ready()  # a leads
        b.start()  # b stands by: it must not schedule while a leads
        await sb.create_pod("before-0")
        await sb.bound("before-0")
        await sb.kube.create(
            PODGROUPS,
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": "fo-pg"},
                "spec": {"minMember": 2},
            },
            NS,
        )
        await sb.slurm.cancel(job_of(await sb.get_pod("before-0")))  # free its node
        assert not b.ready(), "the standby replica must not run the scheduler"

        loop = asyncio.get_running_loop()
        a.kill()  # SIGKILL: no lease release
        killed_at = loop.time()
        after = ["after-0", "fo-pg-0", "fo-pg-1"]
        await sb.create_pod("after-0")
        for n in after[1:]:
            await sb.create_pod(n, labels={"scheduling.x-k8s.io/pod-group": "fo-pg"})
        await b.wait_ready(deadline=lease * 10)
        takeover = loop.time() - killed_at
        print(f"takeover after SIGKILL: {takeover:.2f} s (lease {lease} s)")
        for n in after:
            await sb.bound(n)
        assert len({job_of(await sb.get_pod(n)) for n in after[1:]}) == 1  # one gang job

        pods = {p["metadata"]["name"]: p for p in (await sb.kube.list_pods(NS)).items}
        groups = [pods[n]["metadata"]["uid"] for n in ("before-0", "after-0")]
        groups.append((await sb.kube.get(PODGROUPS, "fo-pg", NS))["metadata"]["uid"])
        by_uid = jobs_by_group_uid((await sb.slurm.list_jobs()).jobs)
        assert {uid: len(by_uid.get(uid, [])) for uid in groups} == dict.fromkeys(groups, 1)
        assert successful_bindings(sb.api.request_log) == dict.fromkeys(pods, 1)
    finally:
        a.kill()
        await b.stop()


async def test_scheduler_restarted_mid_bind_binds_the_rest_of_the_gang(bridge: Bridge) -> None:
    await bridge.kube.create(
        PODGROUPS,
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "mid"},
            "spec": {"minMember": 2},
        },
        NS,
    )
    # The binding of mid-1 fails until the scheduler is gone: it stops between the two.
    fault = bridge.api.inject_fault(r"/pods/mid-1/binding$", method="POST", count=None)
    for n in ("mid-0", "mid-1"):
        await bridge.create_pod(n, labels={"scheduling.x-k8s.io/pod-group": "mid"})
    first = await bridge.bound("mid-0")
    await bridge.wait_for("a failed binding of mid-1", lambda: asyncio.sleep(0, fault.hits))
    await bridge.stop_scheduler()
    bridge.api.clear_faults()

    await bridge.start_scheduler()  # sees mid-1 only: the group looks incomplete
    second = await bridge.bound("mid-1")
    job = await bridge.slurm.get_job(job_of(await bridge.get_pod("mid-0")))
    assert job_of(await bridge.get_pod("mid-1")) == job.job_id
    assert [first, second] == list(job.nodes)
    assert successful_bindings(bridge.api.request_log) == {"mid-0": 1, "mid-1": 1}
