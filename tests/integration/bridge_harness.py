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

from bridge.clock import SystemClock
from bridge.config import BridgeConfig, parse_config
from bridge.errors import SlurmError
from bridge.kube.client import KubeClient
from bridge.kube.resources import PODS
from bridge.sandbox.kubeapi.server import SandboxApiServer
from bridge.sandbox.slurm import ENV_DIR, PORT_ENV
from bridge.slurm.client import SlurmClient
from bridge.wellknown import LABEL_JOB_ID
from controller.runtime import Controller
from scheduler.app import run_scheduler
from scheduler.core import Scheduler
from tests.integration.conftest import SlurmSandbox, make_client
from tests.integration.controller_harness import running_controller, unique_mcs

NS = "slurm-bridge"
DEADLINE = 30.0


@dataclass
class Bridge:
    kube: KubeClient
    slurm: SlurmClient
    api: SandboxApiServer
    sched: Scheduler
    cfg: BridgeConfig
    ctl: Controller | None = None

    async def create_pod(self, name: str, **kw: Any) -> dict[str, Any]:
        return await self.kube.create(PODS, pod(name, **kw), NS)

    async def get_pod(self, name: str) -> dict[str, Any]:
        return await self.kube.get_pod(NS, name)

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


def sandbox_cli(sb: SlurmSandbox, *args: str) -> subprocess.CompletedProcess[str]:
    """``slurm-bridge sandbox slurm ARGS`` on the sandbox the tests use (its dir from the
    env file, so CI's default sandbox and a helper's own both work)."""
    env = {k: v for k, v in os.environ.items() if k not in PORT_ENV}
    env[ENV_DIR] = str(sb.sandbox_dir)
    return subprocess.run(
        [sys.executable, "-m", "bridge", "sandbox", "slurm", *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


@contextlib.asynccontextmanager
async def running_bridge(
    sandbox: SlurmSandbox, tmp_path: Path, *, controller: bool = False, **over: Any
) -> AsyncIterator[Bridge]:
    """The scheduler (and with ``controller=True`` the workload controller too) against
    one sandbox API server and the real Slurm sandbox. ``over``: config keys to change."""
    async with SandboxApiServer(nodes=list(sandbox.external_nodes), kubelet=True) as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        data: dict[str, Any] = {
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
        if controller:
            # Its own mcs label: the dangling-job sweep never touches another test's jobs.
            data |= {"mcsLabel": unique_mcs(), "slurmResyncIntervalSeconds": 0.5}
        cfg = parse_config(data | over)
        kube = await KubeClient.from_config(cfg)
        async with (
            kube,
            make_client(sandbox) as slurm,
            SlurmClient.from_config(cfg) as sslurm,
            SlurmClient.from_config(cfg) as cslurm,
        ):
            sched = Scheduler(cfg, kube, sslurm, SystemClock())
            ready = asyncio.Event()
            task = asyncio.create_task(
                run_scheduler(cfg, kube, sslurm, ready=ready, scheduler=sched)
            )
            await asyncio.wait_for(ready.wait(), 20)
            try:
                async with contextlib.AsyncExitStack() as stack:
                    ctl = None
                    if controller:
                        ctl = await stack.enter_async_context(running_controller(cfg, kube, cslurm))
                    yield Bridge(kube, slurm, api, sched, cfg, ctl)
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
                pods = await kube.list_pods(NS)
                for p in pods.items:
                    with contextlib.suppress(KeyError, ValueError, SlurmError):
                        await slurm.cancel(job_of(p))
