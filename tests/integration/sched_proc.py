"""The real scheduler as a subprocess (``slurm-bridge scheduler --config FILE``), for the
tests and fault suites that SIGKILL it: leader failover, tests/bench/sched_kill.py.

A process is "ready" when its JSON log says ``scheduler_running`` (leading, caches synced,
workers started). Waiting polls the log with a deadline; nothing sleeps a fixed time.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from bridge.config import parse_config
from bridge.kube.client import KubeClient
from bridge.slurm.models import SlurmJob, fold_hetjobs
from bridge.translate import parse_admin_comment
from sandbox.kubeapi.faults import RequestLog
from tests.integration.conftest import SlurmSandbox, sandbox_config_data
from tests.integration.identities import component_kubeconfig

NS = "slurm-bridge"
READY_EVENT = "scheduler_running"


def write_scheduler_config(
    path: Path, sb: SlurmSandbox, kubeconfig: Path, **overrides: Any
) -> Path:
    """A scheduler config file for the sandboxes; ``overrides`` are top-level keys (the
    ``scheduler`` section's keys are added to the file's)."""
    scheduler = {"rejectBackoffSeconds": 0.5, "workers": 8} | overrides.pop("scheduler", {})
    cfg = sandbox_config_data(
        sb,
        kubeconfig=str(kubeconfig),
        healthPort=0,
        metricsPort=0,
        slurmPollIntervalSeconds=0.2,
        logFormat="json",
        scheduler=scheduler,
        **overrides,
    )
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


async def electing_replicas(
    admin: KubeClient, sb: SlurmSandbox, work: Path, lease: float, **overrides: Any
) -> tuple[SchedulerProcess, SchedulerProcess]:
    """Two scheduler processes of one config with leader election (a ``lease`` of that
    many seconds), ``replica-a`` and ``replica-b``, each the chart's scheduler
    ServiceAccount (``admin`` makes its token); not started. Logs in ``work``."""
    kubeconfig = work / "scheduler.kubeconfig"
    config = write_scheduler_config(
        work / "scheduler.yaml",
        sb,
        kubeconfig,
        leaderElection=True,
        leaseDurationSeconds=lease,
        renewDeadlineSeconds=2.0,
        retryPeriodSeconds=0.25,
        **overrides,
    )
    cfg = parse_config(yaml.safe_load(config.read_text()), env={})
    await component_kubeconfig(admin, cfg, "scheduler", kubeconfig)
    a = SchedulerProcess(config, work / "a.log", "replica-a")
    return a, SchedulerProcess(config, work / "b.log", "replica-b")


def _child_env() -> dict[str, str]:
    # SLURM_BRIDGE_* variables are config overrides for the bridge's processes; the
    # sandbox's own SLURM_BRIDGE_SANDBOX_DIR is not one (the config loader refuses it).
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_BRIDGE_")}
    env["PYTHONUNBUFFERED"] = "1"  # the log is read while it runs (readiness)
    return env


class SchedulerProcess:
    """One ``slurm-bridge scheduler`` process; its log goes to ``log_path``."""

    def __init__(self, config: Path, log_path: Path, identity: str) -> None:
        self.config = config
        self.log_path = log_path
        self.identity = identity
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_offset = 0

    def start(self) -> None:
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "bridge",
                    "scheduler",
                    "--config",
                    str(self.config),
                    "--identity",
                    self.identity,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=_child_env(),
            )

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_events(self) -> list[dict[str, Any]]:
        """The JSON log lines this run (since the last start) wrote."""
        if not self.log_path.exists():
            return []
        with open(self.log_path, "rb") as f:
            f.seek(self._log_offset)
            lines = f.read().decode(errors="replace").splitlines()
        out: list[dict[str, Any]] = []
        for line in lines:
            try:
                item = json.loads(line)
            except ValueError:
                continue
            if isinstance(item, dict):
                out.append(item)
        return out

    def ready(self) -> bool:
        return any(e.get("event") == READY_EVENT for e in self.log_events())

    async def wait_ready(self, deadline: float = 60.0) -> None:
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline
        while loop.time() < end:
            if not self.alive():
                raise AssertionError(f"scheduler {self.identity} exited; log: {self.log_path}")
            if self.ready():
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"scheduler {self.identity} not ready; log: {self.log_path}")

    def kill(self) -> None:
        """SIGKILL: no cleanup, no lease release, requests cut mid-flight."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    async def stop(self, deadline: float = 15.0) -> None:
        """SIGTERM, and wait without blocking the event loop (an in-process sandbox API
        server must keep answering the lease release); SIGKILL if it does not exit."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline
        while loop.time() < end:
            if self.proc.poll() is not None:
                return
            await asyncio.sleep(0.05)
        self.kill()


def jobs_by_group_uid(jobs: list[SlurmJob] | tuple[SlurmJob, ...]) -> dict[str, list[SlurmJob]]:
    """The bridge's Slurm jobs (any state) by the group uid in their admin_comment. The
    FAILED record a refused immediate allocation leaves is no job of the group: left out;
    a hetjob is one job (its leader: its components name the same group)."""
    out: dict[str, list[SlurmJob]] = {}
    for job in fold_hetjobs(jobs):
        parsed = parse_admin_comment(job.admin_comment)
        if parsed is None or parsed[0] is None or job.refused_allocation:
            continue
        out.setdefault(parsed[0].uid, []).append(job)
    return out


def successful_bindings(log: RequestLog, namespace: str = NS) -> dict[str, int]:
    """Pod name -> Binding POSTs the API server accepted (201) for it."""
    return binding_requests(log, namespace, status=201)


def binding_requests(
    log: RequestLog, namespace: str = NS, *, status: int | None = None
) -> dict[str, int]:
    """Pod name -> Binding POSTs for it (with ``status`` only: those answered so)."""
    out: dict[str, int] = {}
    for e in log.entries(method="POST", path=rf"/namespaces/{namespace}/pods/[^/]+/binding$"):
        if status is None or e.status == status:
            name = e.path.rsplit("/", 2)[-2]
            out[name] = out.get(name, 0) + 1
    return out
