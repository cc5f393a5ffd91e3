"""A real HTTPS admission webhook for the sandbox API server's admission tests.

It records every AdmissionReview request it gets and answers with ``respond`` (default:
allowed). ``config()`` builds a Mutating/ValidatingWebhookConfiguration pointing at it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import trustme
from aiohttp import web

from sandbox.cluster import SandboxCluster
from sandbox.kubeapi import SANDBOX_TOKEN

Respond = Callable[[str, dict[str, Any]], dict[str, Any]]
REG = "/apis/admissionregistration.k8s.io/v1"


def allow(_path: str, _req: dict[str, Any]) -> dict[str, Any]:
    return {}


def patch_response(ops: list[dict[str, Any]]) -> dict[str, Any]:
    """A response field set applying the JSONPatch ``ops``."""
    return {"patchType": "JSONPatch", "patch": base64.b64encode(json.dumps(ops).encode()).decode()}


def deny(message: str, code: int = 403) -> dict[str, Any]:
    return {"allowed": False, "status": {"code": code, "message": message}}


@dataclass
class Webhook:
    """Start with ``await hook.start()``; ``url`` is its base, ``bundle`` the caBundle."""

    respond: Respond = allow
    hostnames: tuple[str, ...] = ("127.0.0.1",)
    delay: float = 0.0
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    ca: trustme.CA = field(default_factory=trustme.CA)
    port: int = 0
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def bundle(self) -> str:
        return base64.b64encode(self.ca.cert_pem.bytes()).decode()

    def requests(self, path: str | None = None) -> list[dict[str, Any]]:
        """The AdmissionReview ``request``s received (on ``path`` when given)."""
        return [r for p, r in self.calls if path is None or p == path]

    async def _review(self, request: web.Request) -> web.Response:
        req = (await request.json())["request"]
        self.calls.append((request.path, req))
        if self.delay:
            await asyncio.sleep(self.delay)
        resp = {"uid": req["uid"], "allowed": True, **self.respond(request.path, req)}
        return web.json_response(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": resp}
        )

    async def start(self) -> None:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.ca.issue_cert(*self.hostnames).configure_cert(ctx)
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._review)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, ssl_context=ctx)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def hook(
        self,
        name: str,
        path: str = "/",
        *,
        resources: tuple[str, ...] = ("pods",),
        operations: tuple[str, ...] = ("*",),
        groups: tuple[str, ...] = ("",),
        versions: tuple[str, ...] = ("v1",),
        **extra: Any,
    ) -> dict[str, Any]:
        """One ``webhooks[]`` entry calling ``path`` by URL."""
        out: dict[str, Any] = {
            "name": name,
            "clientConfig": {"url": f"{self.url}{path}", "caBundle": self.bundle},
            "rules": [
                {
                    "apiGroups": list(groups),
                    "apiVersions": list(versions),
                    "resources": list(resources),
                    "operations": list(operations),
                }
            ],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        }
        out.update(extra)
        return out


async def unreachable() -> Webhook:
    """A webhook whose port nothing listens on any more: calls are refused."""
    hook = Webhook()
    await hook.start()
    await hook.stop()
    return hook


def config(kind: str, name: str, *hooks: dict[str, Any]) -> dict[str, Any]:
    """A Mutating/ValidatingWebhookConfiguration named ``name``."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": list(hooks),
    }


def validating(*hooks: dict[str, Any], name: str = "v") -> dict[str, Any]:
    return config("ValidatingWebhookConfiguration", name, *hooks)


def mutating(*hooks: dict[str, Any], name: str = "m") -> dict[str, Any]:
    return config("MutatingWebhookConfiguration", name, *hooks)


async def call(
    srv: SandboxCluster,
    method: str,
    path: str,
    body: Any = None,
    *,
    token: str | None = None,
    content_type: str = "application/json",
) -> tuple[int, Any]:
    """One HTTP request to the sandbox: (status, decoded JSON body)."""
    headers = {"Content-Type": content_type, "Authorization": f"Bearer {token or SANDBOX_TOKEN}"}
    async with (
        aiohttp.ClientSession() as s,
        s.request(
            method,
            f"{srv.url}{path}",
            data=None if body is None else json.dumps(body),
            headers=headers,
        ) as r,
    ):
        return r.status, await r.json(content_type=None)


async def install(srv: SandboxCluster, configuration: dict[str, Any]) -> None:
    """Create a webhook configuration (asserting 201)."""
    plural = configuration["kind"].lower() + "s"
    status, body = await call(srv, "POST", f"{REG}/{plural}", configuration)
    assert status == 201, body
