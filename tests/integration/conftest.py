"""Fixtures for tests against the REAL Slurm sandbox (see the sandbox contract).

The env file is ``$SLURM_SANDBOX_ENV``, else ``cluster.env`` of ``$SLURM_BRIDGE_SANDBOX_DIR``,
else of the TESTS' own sandbox (``~/.cache/slurm-bridge/test-slurm``, never the demo's: see
``slurm-bridge sandbox slurm test-env``). A missing or incomplete env file FAILS the test
with a clear message: nothing is skipped silently.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bridge.errors import SlurmError, SlurmNotFound
from bridge.models import JobSpec
from bridge.slurm.client import SlurmClient
from bridge.slurm.hostlist import expand
from bridge.slurm.token import TokenProvider
from sandbox.slurm.launcher import ENV_DIR, PORT_ENV, env_file_for_tests
from tests.clients import list_jobs
from tests.waiting import eventually

REQUIRED = (
    "SLURM_REST_URL",
    "SLURM_JWT_FILE",
    "SLURM_PARTITION",
    "SLURM_EXTERNAL_NODES",
    "SLURM_BATCH_PARTITION",
    "SLURM_SLURMD_NODES",
)


@dataclass(frozen=True)
class SlurmSandbox:
    rest_url: str
    jwt_file: Path
    user: str
    partition: str
    external_nodes: tuple[str, ...]
    batch_partition: str
    slurmd_nodes: tuple[str, ...]
    node_cpus: int
    node_mem_mb: int
    node_gpus: int
    sandbox_dir: Path  # for `slurm-bridge sandbox slurm ...` (SLURM_BRIDGE_SANDBOX_DIR)

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return sandbox_cli(self.sandbox_dir, *args)


def sandbox_cli(sandbox_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``slurm-bridge sandbox slurm ARGS`` on the sandbox in ``sandbox_dir``, with its saved
    settings (so CI's default sandbox and a developer's own both work)."""
    env = {k: v for k, v in os.environ.items() if k not in PORT_ENV}
    env[ENV_DIR] = str(sandbox_dir)
    return subprocess.run(
        [sys.executable, "-m", "bridge", "sandbox", "slurm", *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def env_path() -> Path:
    return env_file_for_tests(os.environ)


@pytest.fixture(scope="session")
def sandbox() -> SlurmSandbox:
    return load_sandbox()


def load_sandbox(path: Path | None = None) -> SlurmSandbox:
    """The sandbox contract from the env file ``path`` (default: the tests' sandbox's);
    fails the test when it is missing or incomplete."""
    path = path or env_path()
    if not path.is_file():
        pytest.fail(
            f"Slurm sandbox env file {path} not found: run `slurm-bridge sandbox slurm up` "
            "or point SLURM_SANDBOX_ENV at a contract-format env file",
            pytrace=False,
        )
    env: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            k, v = line.split("=", 1)
            env[k.strip()] = v.strip()
    missing = [k for k in REQUIRED if not env.get(k)]
    if missing:
        pytest.fail(f"{path} lacks {', '.join(missing)} (see the sandbox contract)", pytrace=False)
    return SlurmSandbox(
        rest_url=env["SLURM_REST_URL"],
        jwt_file=Path(env["SLURM_JWT_FILE"]),
        user=env.get("SLURM_USER", "slurm"),
        partition=env["SLURM_PARTITION"],
        external_nodes=tuple(expand(env["SLURM_EXTERNAL_NODES"])),
        batch_partition=env["SLURM_BATCH_PARTITION"],
        slurmd_nodes=tuple(expand(env["SLURM_SLURMD_NODES"])),
        node_cpus=int(env.get("SLURM_NODE_CPUS", "8")),
        node_mem_mb=int(env.get("SLURM_NODE_MEM_MB", "16000")),
        node_gpus=int(env.get("SLURM_NODE_GPUS", "2")),
        sandbox_dir=Path(env.get("SLURM_SANDBOX_DIR") or path.parent),
    )


def sandbox_config_data(sb: SlurmSandbox, **over: Any) -> dict[str, Any]:
    """Config keys every test against the sandboxes shares: the sandbox's slurmrestd and
    token, its partition, namespace ``slurm-bridge``, no leader election. ``over``
    replaces top-level keys (e.g. ``kubeconfig``)."""
    return {
        "slurmRestApi": sb.rest_url,
        "slurmTokenFile": str(sb.jwt_file),
        "slurmUserName": sb.user,
        "partition": sb.partition,
        "managedNamespaces": ["slurm-bridge"],
        "leaderElection": False,
        **over,
    }


def blocker_spec(sb: SlurmSandbox, name: str = "blocker") -> JobSpec:
    """An external job holding every external node of the sandbox (one task each)."""
    n = len(sb.external_nodes)
    return JobSpec(
        name=name,
        partition=sb.partition,
        min_nodes=n,
        tasks=n,
        tasks_per_node=1,
        memory_per_node_mib=100,
    )


def native_held_spec(sb: SlurmSandbox) -> JobSpec:
    """A batch job held at priority 0, made straight in Slurm (no admin_comment): a job
    the bridge must never touch (forged-label and takeover tests)."""
    return JobSpec(
        name="native-held",
        partition=sb.batch_partition,
        min_nodes=1,
        tasks=1,
        priority=0,
        external=False,
        script="#!/bin/sh\nsleep 600\n",
    )


def make_client(
    sb: SlurmSandbox,
    version: str = "auto",
    jwt_file: Path | None = None,
    *,
    request_timeout_seconds: float = 10,
) -> SlurmClient:
    return SlurmClient(
        sb.rest_url,
        TokenProvider(jwt_file or sb.jwt_file, sb.user),
        api_version=version,
        request_timeout_seconds=request_timeout_seconds,
    )


@pytest.fixture
async def slurm(sandbox: SlurmSandbox) -> AsyncIterator[SlurmClient]:
    async with make_client(sandbox) as client:
        yield client


@pytest.fixture
async def track_jobs(slurm: SlurmClient) -> AsyncIterator[Callable[[int], int]]:
    """Register job ids to cancel at teardown (whatever the test's outcome)."""
    ids: list[int] = []

    def track(job_id: int) -> int:
        ids.append(job_id)
        return job_id

    yield track
    for job_id in ids:
        with contextlib.suppress(SlurmError):
            await slurm.cancel(job_id)


async def remove_dynamic_node(slurm: SlurmClient, name: str) -> None:
    """Delete a dynamic node a test registered, whatever the test left on it: its jobs are
    cancelled first (Slurm refuses to delete a node with a job). A stale dynamic node would
    slow every later slurmctld start (it resolves each saved node's name)."""
    for job in (await list_jobs(slurm)).jobs:
        if name in job.nodes and job.state.active:
            with contextlib.suppress(SlurmError):
                await slurm.cancel(job.job_id)

    async def gone() -> bool:
        try:
            await slurm.delete_node(name)
        except SlurmNotFound:
            return True
        except SlurmError:
            return False
        with contextlib.suppress(SlurmError):
            await slurm.get_node(name)
            return False
        return True

    await eventually(gone, within=30, what=f"dynamic node {name} deleted", every=0.5)
