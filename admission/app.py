"""Composition root of the admission webhook: ``slurm-bridge admission --config FILE``.

The only place that builds real clients (a KubeClient, when ``managedNamespaceSelector``
needs namespace labels or the Slurm-node guard the kind of a node a new pod names) and
opens sockets.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from typing import Any

from aiohttp import web

from admission.metrics import AdmissionMetrics
from admission.placement import slurm_node_reason
from admission.policy import AdmissionContext
from admission.server import NodeKindSource, WebhookDeps, build_webhook_app
from admission.tls import CertReloader
from bridge import loops
from bridge.clock import Clock, SystemClock
from bridge.config import BridgeConfig, load_config
from bridge.errors import ConfigError, KubeNotFound
from bridge.kube.cached import CachedLookup
from bridge.kube.client import KubeClient
from bridge.kube.namespaces import CachedNamespaceLabels, NamespaceLabelSource, kube_namespace_fetch
from bridge.kube.resources import NODES
from bridge.logging import configure_logging, get_logger
from bridge.ops import OpsServer, readiness

# Nodes whose kind the Slurm-node guard keeps (a review can name any node: bounded).
MAX_NODES = 10_000
# the longest request line and header line the webhook reads (aiohttp's default)
MAX_HEAD_LINE_BYTES = 8190
# After an answer sent before the whole body arrived (408, 413), the rest of the body is
# read and dropped for at most this long (so the client sees the answer), then the
# connection is closed. aiohttp's default, 10 s, would let a slow body hold it that long.
LINGER_SECONDS = 1.0


def _bound_port(site: web.TCPSite) -> int:
    server: Any = site._server  # aiohttp keeps the asyncio Server here
    return int(server.sockets[0].getsockname()[1])


class AdmissionServer:
    """The webhook's HTTPS listener, the ops listener(s) and the TLS reload loop.

    ``webhook_port`` / ``metrics_port`` / ``health_port`` override the config (0 = any free
    port); in the config, ``metricsPort``/``healthPort`` 0 means "off". After
    :meth:`start`, the ``*_bound`` attributes hold the real ports (None = not listening).
    """

    def __init__(
        self,
        cfg: BridgeConfig,
        *,
        clock: Clock | None = None,
        namespaces: NamespaceLabelSource | None = None,
        nodes: NodeKindSource | None = None,
        deps: WebhookDeps | None = None,
        webhook_port: int | None = None,
        metrics_port: int | None = None,
        health_port: int | None = None,
    ) -> None:
        self.cfg = cfg
        self.clock = clock or SystemClock()
        self._ready = False
        self.deps = deps or WebhookDeps(ctx=AdmissionContext(cfg), metrics=AdmissionMetrics())
        self.deps.namespaces = namespaces or self.deps.namespaces
        self.deps.nodes = nodes or self.deps.nodes
        self.deps.ready = lambda: self._ready
        self._ports = (
            cfg.admission.port if webhook_port is None else webhook_port,
            cfg.metrics_port if metrics_port is None else metrics_port,
            cfg.health_port if health_port is None else health_port,
        )
        self._explicit_ops = (metrics_port is not None, health_port is not None)
        self.reloader: CertReloader | None = None
        self._runners: list[web.AppRunner] = []
        self.ops: OpsServer | None = None
        self._reload_task: asyncio.Task[None] | None = None
        self.webhook_bound: int | None = None
        self.metrics_bound: int | None = None
        self.health_bound: int | None = None
        self.log = get_logger("admission")

    async def _listen(self, app: web.Application, port: int, ssl_ctx: Any = None) -> int:
        # aiohttp's keep-alive timer also runs from the moment a connection opens (since
        # aio-libs/aiohttp#13681, hence pyproject's floor): a client that has not sent a whole
        # request head by then (slowloris) is dropped, as is an idle keep-alive connection.
        # The TLS handshake has asyncio's own 60 s bound.
        runner = web.AppRunner(
            app,
            access_log=None,
            keepalive_timeout=self.cfg.admission.header_read_timeout_seconds,
            max_line_size=MAX_HEAD_LINE_BYTES,
            max_field_size=MAX_HEAD_LINE_BYTES,
            lingering_time=LINGER_SECONDS,
        )
        await runner.setup()
        self._runners.append(runner)
        site = web.TCPSite(runner, self.cfg.admission.bind_address, port, ssl_context=ssl_ctx)
        await site.start()
        return _bound_port(site)

    async def start(self) -> None:
        settings = self.cfg.admission
        self.reloader = CertReloader(settings.tls_cert_file, settings.tls_key_file)
        wport, mport, hport = self._ports
        metrics_on = mport != 0 or self._explicit_ops[0]
        health_on = hport != 0 or self._explicit_ops[1]
        self.webhook_bound = await self._listen(
            build_webhook_app(self.deps), wport, self.reloader.server_context()
        )
        # one listener when the ports are equal (or both "any free port"), else two
        ops_ports = [port for port, on in ((hport, health_on), (mport, metrics_on)) if on]
        if ops_ports:
            self.ops = OpsServer(
                self.deps.metrics.registry,
                ready=readiness(self.deps.ready),
                host=settings.bind_address,
                port=ops_ports[0],
                metrics_port=ops_ports[-1],
            )
            await self.ops.start()
            bound = self.ops.bound_ports
            self.health_bound = bound[0] if health_on else None
            self.metrics_bound = bound[-1] if metrics_on else None
        self._reload_task = asyncio.create_task(
            self.reloader.run(
                self.clock, settings.cert_reload_interval_seconds, self.deps.metrics.loop_failed
            )
        )
        self._ready = True
        self.log.info(
            "admission_started",
            port=self.webhook_bound,
            metrics_port=self.metrics_bound,
            health_port=self.health_bound,
            scheduler_name=self.cfg.scheduler_name,
            managed_namespaces=list(self.cfg.managed_namespaces),
            failure_policy=settings.failure_policy,
        )

    async def stop(self) -> None:
        self._ready = False
        if self._reload_task is not None:
            self._reload_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reload_task
        for runner in reversed(self._runners):
            await runner.cleanup()
        self._runners.clear()
        if self.ops is not None:
            await self.ops.stop()
            self.ops = None
        self.log.info("admission_stopped")


def _selector_in_use(cfg: BridgeConfig) -> bool:
    sel = cfg.managed_namespace_selector
    return sel is not None and bool(sel.match_labels or sel.match_expressions)


def kube_node_kinds(kube: KubeClient, clock: Clock, ttl_seconds: float) -> NodeKindSource:
    """Why each node a new pod names is a Slurm node (``""``: not one, or no such node):
    one ``GET /api/v1/nodes/{name}`` per node, cached ``ttl_seconds`` in the bounded cache
    ``admission-node-kinds`` (a review can name any node)."""

    async def fetch(name: str) -> str:
        try:
            return slurm_node_reason(await kube.get(NODES, name))
        except KubeNotFound:
            return ""

    return CachedLookup("admission-node-kinds", fetch, clock, ttl_seconds, MAX_NODES)


async def serve(cfg: BridgeConfig, stop: asyncio.Event) -> None:
    """Run until ``stop`` is set."""
    kube: KubeClient | None = None
    namespaces: NamespaceLabelSource | None = None
    nodes: NodeKindSource | None = None
    clock = SystemClock()
    if _selector_in_use(cfg) or cfg.admission.node_guard:
        kube = await KubeClient.from_config(cfg, clock=clock)
    if kube is not None and _selector_in_use(cfg):
        fetch = kube_namespace_fetch(kube)
        namespaces = CachedNamespaceLabels(fetch, clock, cfg.admission.namespace_cache_seconds)
    if kube is not None and cfg.admission.node_guard:
        nodes = kube_node_kinds(kube, clock, cfg.admission.node_cache_seconds)
    server = AdmissionServer(cfg, clock=clock, namespaces=namespaces, nodes=nodes)
    try:
        await server.start()
        await stop.wait()
    finally:
        await server.stop()
        if kube is not None:
            await kube.close()


async def _main_async(cfg: BridgeConfig) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await serve(cfg, stop)
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="slurm-bridge admission", description="Run the admission webhook (HTTPS)."
    )
    parser.add_argument("--config", help="the slurm-bridge YAML config file")
    args = parser.parse_args(argv)
    try:
        cfg = load_config(args.config)
        configure_logging(cfg.log_level, cfg.log_format)
        return loops.run(_main_async(cfg))
    except ConfigError as e:
        print(f"slurm-bridge admission: {e}", file=sys.stderr)
        return 1
