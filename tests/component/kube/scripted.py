"""A loopback HTTP server that answers with scripted, real-apiserver-shaped responses.

Each test registers handlers for (method, path); every request is logged with its query,
headers and JSON body so tests can check exactly what the adapter sent. The response
bodies follow what a real kube-apiserver v1.36 sends (``Status`` objects with
``code``/``reason``/``message``; watch streams of newline-delimited JSON events).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.waiting import eventually

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def status_body(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure" if code >= 300 else "Success",
        "message": message,
        "reason": reason,
        "code": code,
    }


def status_response(code: int, reason: str = "", message: str = "") -> web.Response:
    return web.json_response(status_body(code, reason, message), status=code)


def pod(
    name: str,
    *,
    namespace: str = "default",
    uid: str | None = None,
    rv: str = "1",
    node: str = "",
    deleting: bool = False,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid or f"uid-{name}",
        "resourceVersion": rv,
        "labels": labels or {},
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {}}


def event_line(etype: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": etype, "object": obj}).encode() + b"\n"


@dataclass
class Logged:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


@dataclass
class ScriptedServer:
    handlers: dict[tuple[str, str], Handler] = field(default_factory=dict)
    requests: list[Logged] = field(default_factory=list)
    url: str = ""
    # Set on shutdown: handlers that hang wait on it so the server can stop.
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    _runner: web.AppRunner | None = None

    def on(self, method: str, path: str, handler: Handler) -> None:
        self.handlers[(method, path)] = handler

    def on_json(self, method: str, path: str, body: dict[str, Any], status: int = 200) -> None:
        async def h(_: web.Request) -> web.StreamResponse:
            return web.json_response(body, status=status)

        self.on(method, path, h)

    def sent(self, method: str, path: str) -> list[Logged]:
        return [r for r in self.requests if r.method == method and r.path == path]

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        self.requests.append(
            Logged(
                request.method,
                request.path,
                dict(request.query),
                {k.lower(): v for k, v in request.headers.items()},
                body,
            )
        )
        handler = self.handlers.get((request.method, request.path))
        if handler is None:
            return status_response(404, "NotFound", f"no script for {request.path}")
        return await handler(request)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        self.closing.set()
        if self._runner is not None:
            await self._runner.cleanup()


def watch_script(
    streams: list[list[bytes] | Callable[[web.Request], Awaitable[web.StreamResponse]]],
    *,
    list_bodies: list[dict[str, Any]],
    server: ScriptedServer,
    path: str,
) -> None:
    """GET ``path`` answers lists (plain GET) and watch streams (``?watch=true``) in order.

    A stream given as bytes is written and then closed cleanly (as a server does at
    ``timeoutSeconds``); the last stream is repeated but hangs until shutdown, so the
    watcher does not spin. A callable stream is a custom handler (drops, errors).
    """
    lists = iter(list_bodies)
    calls = {"watch": 0}

    async def handler(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") not in ("true", "True", "1"):
            return web.json_response(next(lists))
        i = calls["watch"]
        calls["watch"] += 1
        if i >= len(streams):
            resp = web.StreamResponse()
            await resp.prepare(request)
            await server.closing.wait()
            return resp
        script = streams[i]
        if callable(script):
            return await script(request)
        resp = web.StreamResponse()
        resp.content_type = "application/json"
        await resp.prepare(request)
        for line in script:
            await resp.write(line)
        await resp.write_eof()
        return resp

    server.on("GET", path, handler)


async def wait_until(pred: Callable[[], object], *, within: float = 10.0, what: str = "") -> None:
    """Poll ``pred`` until true; fail (never hang) after ``within`` seconds."""
    await eventually(pred, within=within, what=what or str(pred), every=0.005)
