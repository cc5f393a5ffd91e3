"""The operations endpoint every component serves: /healthz, /readyz and /metrics.

Each component owns its own prometheus ``CollectorRegistry`` (no global registry) and
passes a readiness check. Liveness is "the event loop answers"; readiness is the
component's own idea (informers synced, leader or standby, Slurm reachable).
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest


class OpsServer:
    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        ready: Callable[[], tuple[bool, str]],
        host: str = "0.0.0.0",
        port: int = 8081,
        metrics_port: int | None = None,
    ) -> None:
        self._registry = registry
        self._ready = ready
        self._host = host
        self._port = port
        self._metrics_port = metrics_port
        self._runner: web.AppRunner | None = None
        self.bound_ports: list[int] = []

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        return app

    async def _healthz(self, _: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, _: web.Request) -> web.Response:
        ok, why = self._ready()
        return web.Response(status=200 if ok else 503, text=f"{why}\n")

    async def _metrics(self, _: web.Request) -> web.Response:
        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def start(self) -> None:
        """Listen on the health port, and on the metrics port when it differs."""
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        ports = [self._port]
        if self._metrics_port not in (None, 0, self._port):
            ports.append(self._metrics_port)
        for port in ports:
            if port == 0 and self.bound_ports:
                continue
            site = web.TCPSite(self._runner, self._host, port)
            await site.start()
            server = site._server
            sockets = getattr(server, "sockets", None) or []
            self.bound_ports.append(sockets[0].getsockname()[1] if sockets else port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
