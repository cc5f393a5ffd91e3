"""The bridge end to end: real slurmrestd 26.05, the sandbox Kubernetes API server, the
scheduler's loops and (optionally) the workload controller, all in the test's event loop.

Waits poll the API with a deadline; nothing sleeps for a fixed time to "let it happen".
Every Slurm job a test causes is cancelled at teardown.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bridge.clock import SystemClock
from bridge.config import BridgeConfig, parse_config
from bridge.errors import SlurmError
from bridge.kube.client import KubeClient
from bridge.kube.resources import JOBS, JOBSETS, LEADERWORKERSETS, PODGROUPS, PODS, Resource
from bridge.slurm.client import SlurmClient
from bridge.wellknown import LABEL_JOB_ID, LABEL_POD_GROUP
from controller.runtime import Controller
from sandbox.cluster import SandboxCluster
from sandbox.kubeapi import SANDBOX_TOKEN
from scheduler.app import run_scheduler
from scheduler.cycle import Scheduler
from tests.clients import kube_for_host, list_jobs
from tests.integration.conftest import SlurmSandbox, make_client, sandbox_config_data
from tests.integration.controller_harness import running_controller, unique_mcs
from tests.integration.identities import component_kube
from tests.integration.sched_proc import jobs_by_group_uid
from tests.waiting import eventually
from tests.workloads import expand

NS = "slurm-bridge"
DEADLINE = 30.0


@dataclass
class Sandboxes:
    """The sandbox API server and real Slurm, with helpers; no scheduler of its own."""

    kube: KubeClient
    slurm: SlurmClient
    api: SandboxCluster

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
        for uid, jobs in jobs_by_group_uid((await list_jobs(self.slurm)).jobs).items():
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
        return await eventually(check, within=deadline, what=what)

    async def bound(self, name: str, deadline: float = DEADLINE) -> str:
        async def node() -> str:
            return str(((await self.get_pod(name)).get("spec") or {}).get("nodeName") or "")

        return str(await self.wait_for(f"pod {name} bound", node, deadline))

    async def scheduled_message(self, name: str) -> str:
        pod = await self.get_pod(name)
        for c in (pod.get("status") or {}).get("conditions") or []:
            if c.get("type") == "PodScheduled":
                return f"{c.get('status')} {c.get('reason')}: {c.get('message')}"
        return ""


@dataclass
class Bridge(Sandboxes):
    """:class:`Sandboxes` plus a scheduler (and optionally the controller) in the test's loop."""

    sched: Scheduler
    cfg: BridgeConfig
    ctl: Controller | None = None
    task: asyncio.Task[None] | None = None
    # the scheduler's own client (the chart's ServiceAccount, a TokenRequest token)
    sched_kube: KubeClient | None = None

    async def start_scheduler(self, prepare: Callable[[Scheduler], None] | None = None) -> None:
        """Start a fresh scheduler (nothing in memory but what it reads back); ``prepare``
        sees it before it runs."""
        kube = self.sched_kube or self.kube
        self.sched = Scheduler(self.cfg, kube, self.sched.slurm, SystemClock())
        if prepare is not None:
            prepare(self.sched)
        ready = asyncio.Event()
        self.task = asyncio.create_task(
            run_scheduler(self.cfg, kube, self.sched.slurm, ready=ready, scheduler=self.sched)
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
    gpus: int = 0,
) -> dict[str, Any]:
    """A pod of the bridge's scheduler; ``gpus``: its ``nvidia.com/gpu`` limit."""
    resources: dict[str, Any] = {"requests": {"cpu": cpu, "memory": memory}}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
        "spec": {
            "schedulerName": "slurm-bridge-scheduler",
            "containers": [
                {"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": resources}
            ],
        },
    }


def job_of(p: dict[str, Any]) -> int:
    return int(p["metadata"]["labels"][LABEL_JOB_ID])


def has_job(p: dict[str, Any]) -> bool:
    return LABEL_JOB_ID in (p["metadata"].get("labels") or {})


async def create_podgroup(
    sb: Sandboxes, name: str, size: int, *, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    """The coscheduling PodGroup ``name`` of minMember ``size`` (no pods): as created."""
    body = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"minMember": size},
    }
    return await sb.kube.create(PODGROUPS, body, NS)


async def podgroup(
    sb: Sandboxes,
    name: str,
    size: int,
    *,
    members: int | None = None,
    annotations: dict[str, str] | None = None,
    cpu: str = "1",
    memory: str = "100Mi",
) -> list[str]:
    """A PodGroup with minMember ``size`` and ``members`` (default ``size``) of its pods
    ``<name>-<i>``; returns their names."""
    await create_podgroup(sb, name, size, annotations=annotations)
    names = [f"{name}-{i}" for i in range(size if members is None else members)]
    for n in names:
        await sb.create_pod(n, labels={LABEL_POD_GROUP: name}, cpu=cpu, memory=memory)
    return names


async def mixed_podgroup(
    sb: Sandboxes, name: str, gpus: int, *, workers: int = 2
) -> tuple[dict[str, Any], list[str]]:
    """A PodGroup of two shapes: a CPU driver ``<name>-driver`` (1 CPU, no GPU) and
    ``workers`` GPU workers ``<name>-w<i>`` (2 CPUs, ``gpus`` GPUs each), all created
    (not waited for). Returns the PodGroup and the pod names, driver first."""
    pg = await create_podgroup(sb, name, 1 + workers)
    labels = {LABEL_POD_GROUP: name}
    names = [f"{name}-driver"] + [f"{name}-w{i}" for i in range(workers)]
    await sb.create_pod(names[0], labels=labels)
    for n in names[1:]:
        await sb.create_pod(n, labels=labels, cpu="2", gpus=gpus)
    return pg, names


@contextlib.asynccontextmanager
async def running_bridge(
    sandbox: SlurmSandbox,
    tmp_path: Path,
    *,
    controller: bool = False,
    resourceclaim_controller: bool = True,
    kube_version: str = "1.36",
    **over: Any,
) -> AsyncIterator[Bridge]:
    """The scheduler (and with ``controller=True`` the workload controller too) against
    one sandbox API server and the real Slurm sandbox. ``over``: config keys to change.
    Each component talks to the API server as the chart's ServiceAccount for it, with the
    chart's RBAC (a TokenRequest token); the test's own client (``Bridge.kube``) is the
    admin. ``resourceclaim_controller=False``: the sandbox does not stand in for
    kube-controller-manager's resourceclaim controller. ``kube_version``: the Kubernetes
    release the sandbox API server serves (docs/sandbox-kube-api.md)."""
    async with SandboxCluster(
        nodes=list(sandbox.external_nodes),
        kubelet=True,
        resourceclaim_controller=resourceclaim_controller,
        kube_version=kube_version,
    ) as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        data = sandbox_config_data(
            sandbox,
            kubeconfig=str(kubeconfig),
            slurmPollIntervalSeconds=0.2,
            scheduler={"rejectBackoffSeconds": 0.5, "workers": 4},
        )
        if controller:
            # Its own mcs label: the dangling-job sweep never touches another test's jobs.
            data |= {"mcsLabel": unique_mcs(), "slurmResyncIntervalSeconds": 0.5}
        cfg = parse_config(data | over)
        async with contextlib.AsyncExitStack() as clients:
            kube = await clients.enter_async_context(await KubeClient.from_config(cfg))
            skube = await clients.enter_async_context(await component_kube(kube, cfg, "scheduler"))
            slurm = await clients.enter_async_context(make_client(sandbox))
            sslurm = await clients.enter_async_context(SlurmClient.from_config(cfg))
            cslurm = await clients.enter_async_context(SlurmClient.from_config(cfg))
            b = Bridge(kube, slurm, api, Scheduler(cfg, skube, sslurm, SystemClock()), cfg)
            b.sched_kube = skube
            await b.start_scheduler()
            try:
                async with contextlib.AsyncExitStack() as stack:
                    if controller:
                        b.ctl = await stack.enter_async_context(
                            running_controller(cfg, kube, cslurm)
                        )
                    yield b
            finally:
                await b.stop_scheduler()
                await b.cancel_jobs()


@contextlib.asynccontextmanager
async def running_sandboxes(sandbox: SlurmSandbox) -> AsyncIterator[Sandboxes]:
    """The sandbox API server (nodes = Slurm's external nodes) and real Slurm, without a
    scheduler: for tests that run the scheduler as subprocesses."""
    async with (
        SandboxCluster(nodes=list(sandbox.external_nodes), kubelet=True) as api,
        kube_for_host(api.url, token=SANDBOX_TOKEN, request_timeout=10) as kube,
        make_client(sandbox) as slurm,
    ):
        sb = Sandboxes(kube, slurm, api)
        try:
            yield sb
        finally:
            await sb.cancel_jobs()


async def kubectl_plugin(b: Bridge, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``kubectl slurm-bridge ARGS`` (the plugin on PATH, kubectl finds it as kubectl
    would) with a config file of the components' keys."""
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "slurmRestApi": b.cfg.slurm_rest_api,
                "slurmTokenFile": str(b.cfg.slurm_token_file),
                "slurmUserName": b.cfg.slurm_user_name,
                "mcsLabel": b.cfg.mcs_label,
                "kubeconfig": str(b.cfg.kubeconfig),
            }
        )
    )
    bindir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}
    return await asyncio.to_thread(
        subprocess.run,
        [str(bindir / "kubectl"), "slurm-bridge", *args, "--config", str(config)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
