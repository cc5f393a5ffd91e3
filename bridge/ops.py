"""The operations endpoint every component serves: /healthz, /readyz and /metrics.

Each component owns its own prometheus ``CollectorRegistry`` (no global registry) and
passes a readiness check. Liveness is "the event loop answers"; readiness is the
component's own idea (caches synced; a standby replica is ready, it is a warm spare).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from bridge.config import BridgeConfig

# () -> (ready, why): ``why`` is the /readyz body
Readiness = Callable[[], tuple[bool, str]]


def add_health_routes(app: web.Application, ready: Readiness) -> None:
    """``GET /healthz`` (200 ``ok`` while the loop answers) and ``GET /readyz`` (200 or 503)."""

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        ok, why = ready()
        return web.Response(status=200 if ok else 503, text=why)

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)


def readiness(ok: Callable[[], bool], *, not_ready: str = "not ready") -> Readiness:
    """A Readiness from a plain predicate: body ``ok`` or ``not_ready``."""
    return lambda: (True, "ok") if ok() else (False, not_ready)


class OpsServer:
    """Serves health and metrics on ``port``, and on ``metrics_port`` too when it differs.

    Port 0 listens on a free port; :attr:`bound_ports` holds the real ports after
    :meth:`start` (one entry when both ports are the same or both 0).
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        ready: Readiness,
        host: str = "0.0.0.0",
        port: int = 8081,
        metrics_port: int | None = None,
    ) -> None:
        self._registry = registry
        self.ready = ready
        self._host = host
        self._port = port
        self._metrics_port = metrics_port
        self._runner: web.AppRunner | None = None
        self.bound_ports: list[int] = []

    def app(self) -> web.Application:
        app = web.Application()
        add_health_routes(app, self.ready)
        app.router.add_get("/metrics", self._metrics)
        return app

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
            site = web.TCPSite(self._runner, self._host, port)
            await site.start()
            server: Any = site._server  # aiohttp keeps the asyncio Server here
            sockets = getattr(server, "sockets", None) or []
            self.bound_ports.append(int(sockets[0].getsockname()[1]) if sockets else port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


class Leadership(Protocol):
    @property
    def is_leader(self) -> bool: ...


def component_ops(
    cfg: BridgeConfig,
    registry: CollectorRegistry,
    *,
    synced: Callable[[], bool],
    elector: Leadership | None,
) -> OpsServer:
    """The ops server of a leader-elected component on ``healthPort`` / ``metricsPort``.

    A standby replica is ready (a warm spare, so every replica passes its readiness probe);
    the leader, or the only replica, once ``synced()``.
    """

    def is_ready() -> bool:
        return (elector is not None and not elector.is_leader) or synced()

    return OpsServer(
        registry,
        ready=readiness(is_ready, not_ready="syncing"),
        port=cfg.health_port,
        metrics_port=cfg.metrics_port,
    )
