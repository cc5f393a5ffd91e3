"""An HTTP proxy in front of slurmrestd that can SIGKILL the scheduler between an
immediate allocation and its answer: the request reaches Slurm (the job is RUNNING), the
answer never reaches the scheduler. No server-side hook and no random kill lands there
reliably.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import aiohttp
from aiohttp import web

from bridge.slurm.transport import SlurmConnector

# hop-by-hop headers and what aiohttp sets itself
_SKIP = frozenset({"host", "content-length", "transfer-encoding", "connection", "keep-alive"})


class AllocateKillProxy:
    """Relays every request to ``upstream``; while :attr:`armed`, the next ``job/allocate``
    that Slurm answered with success calls ``on_answer`` (which kills the caller) instead
    of being relayed, and disarms."""

    def __init__(self, upstream: str, on_answer: Callable[[], None]) -> None:
        self.upstream = upstream.rstrip("/")
        self.on_answer = on_answer
        self.armed = False
        self.fired = 0
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._relay)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        # slurmrestd's doubled error answers need the bridge's own connector
        self._session = aiohttp.ClientSession(connector=SlurmConnector())

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _relay(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _SKIP}
        body = await request.read()
        async with self._session.request(
            request.method, self.upstream + request.path_qs, headers=headers, data=body or None
        ) as up:
            status, payload = up.status, await up.read()
            ctype = up.headers.get("Content-Type", "application/json")
        if self.armed and request.path.endswith("/job/allocate") and status == 200:
            self.armed = False
            self.fired += 1
            self.on_answer()  # the caller dies with its request unanswered
            if request.transport is not None:
                with contextlib.suppress(Exception):
                    request.transport.abort()
            raise web.HTTPServiceUnavailable()
        return web.Response(status=status, body=payload, headers={"Content-Type": ctype})
