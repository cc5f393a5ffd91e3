"""Composition root of the workload controller: ``slurm-bridge controller --config FILE``.

The only place that builds real clients: config -> logging -> SlurmClient, KubeClient ->
(leader election on Lease ``slurm-bridge-controller`` when ``leaderElection``) ->
:class:`~controller.runtime.Controller`. An ops listener on ``healthPort`` serves
``/healthz`` (process alive), ``/readyz`` (a standby replica is ready, a warm spare; the
leader once both watches have listed) and ``/metrics`` (Prometheus, from this component's
own registry).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import signal
import socket
import sys

from prometheus_client import CollectorRegistry, Counter, Gauge

from bridge import loops
from bridge.clock import Clock, SystemClock
from bridge.config import BridgeConfig, load_config
from bridge.errors import ConfigError
from bridge.kube.client import KubeClient
from bridge.kube.events import EventRecorder
from bridge.kube.leader import LeaderElector
from bridge.logging import configure_logging, get_logger
from bridge.ops import component_ops
from bridge.slurm.client import SlurmClient
from controller.runtime import Controller
from controller.slurm_metrics import SlurmCollector

LEASE_NAME = "slurm-bridge-controller"
COMPONENT = "slurm-bridge-controller"
log = get_logger("controller.app")


class ControllerMetrics:
    """Per-component registry: no module-level metric state."""

    def __init__(self, clock: Clock | None = None, mcs_label: str = "") -> None:
        self.registry = CollectorRegistry()
        # Slurm-side metrics from what the sweep reads (controller/slurm_metrics.py)
        self.slurm = SlurmCollector(clock or SystemClock(), mcs_label)
        self.registry.register(self.slurm)
        self.drift = Counter(
            "slurm_bridge_controller_drift_corrections",
            "Corrections of drift between Slurm and Kubernetes, by kind",
            ["kind"],
            registry=self.registry,
        )
        self.loop_failures = Counter(
            "slurm_bridge_loop_failures",
            "Steps of a worker or forever-loop that raised (logged, then backed off), by loop",
            ["loop"],
            registry=self.registry,
        )
        self.leader = Gauge(
            "slurm_bridge_controller_leader",
            "1 while this replica leads",
            registry=self.registry,
        )

    def corrected(self, kind: str) -> None:
        self.drift.labels(kind=kind).inc()

    def loop_failed(self, loop: str) -> None:
        self.loop_failures.labels(loop=loop).inc()


async def serve(cfg: BridgeConfig, *, stop: asyncio.Event | None = None) -> None:
    metrics = ControllerMetrics(mcs_label=cfg.mcs_label)
    stop = stop or asyncio.Event()
    slurm = SlurmClient.from_config(cfg)
    kube = await KubeClient.from_config(cfg)
    identity = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
    ctl = Controller(
        cfg,
        slurm,
        kube,
        events=EventRecorder(kube, COMPONENT, instance=identity),
        on_applied=metrics.corrected,
        slurm_observer=metrics.slurm,
        on_loop_failure=metrics.loop_failed,
    )
    elector = (
        LeaderElector.from_config(kube, cfg, name=LEASE_NAME, identity=identity)
        if cfg.leader_election
        else None
    )

    ops = component_ops(cfg, metrics.registry, synced=ctl.synced.is_set, elector=elector)
    if cfg.health_port:
        await ops.start()

    async def work() -> None:
        metrics.leader.set(1)
        try:
            await ctl.run()
        finally:
            metrics.leader.set(0)
            metrics.slurm.clear()

    main = asyncio.create_task(elector.run(work) if elector is not None else work())
    stopper = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({main, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if main.done():
            main.result()
    finally:
        for t in (main, stopper):
            t.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await t
        await ops.stop()
        await slurm.close()
        await kube.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="slurm-bridge controller")
    parser.add_argument("--config", required=False, default=None, help="YAML config file")
    ns = parser.parse_args(argv)
    try:
        cfg = load_config(ns.config)
    except ConfigError as e:
        print(f"invalid configuration: {e}", file=sys.stderr)
        return 2
    configure_logging(cfg.log_level, cfg.log_format)

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        await serve(cfg, stop=stop)

    try:
        loops.run(run())
    except ConfigError as e:
        print(f"invalid configuration: {e}", file=sys.stderr)
        return 2
    return 0
