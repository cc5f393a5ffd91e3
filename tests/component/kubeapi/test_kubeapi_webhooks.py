"""The sandbox API server calls admission webhooks on CREATE, like kube-apiserver: a
loopback HTTPS webhook (trustme CA as caBundle) mutates with a JSONPatch and denies."""

from __future__ import annotations

import base64
import json
import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import trustme
from aiohttp import web

from bridge.sandbox.kubeapi.server import SandboxApiServer

NS = "slurm-bridge"


def _patch(ops: list[dict[str, Any]]) -> str:
    return base64.b64encode(json.dumps(ops).encode()).decode()


async def _review(request: web.Request) -> web.Response:
    req = (await request.json())["request"]
    name = req["object"]["metadata"]["name"]
    resp: dict[str, Any] = {"uid": req["uid"], "allowed": True}
    if request.path == "/mutate":
        resp |= {
            "patchType": "JSONPatch",
            "patch": _patch([{"op": "add", "path": "/metadata/labels", "value": {"seen": "yes"}}]),
        }
    elif name.startswith("bad"):
        resp = {"uid": req["uid"], "allowed": False, "status": {"code": 403, "message": "no"}}
    return web.json_response({"apiVersion": "admission.k8s.io/v1", "response": resp})


@pytest.fixture
async def hooked() -> AsyncIterator[tuple[SandboxApiServer, str, str]]:
    ca = trustme.CA()
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(ctx)
    app = web.Application()
    app.router.add_post("/mutate", _review)
    app.router.add_post("/validate", _review)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    bundle = base64.b64encode(ca.cert_pem.bytes()).decode()
    try:
        async with SandboxApiServer() as srv:
            yield srv, f"https://127.0.0.1:{port}", bundle
    finally:
        await runner.cleanup()


def _config(kind: str, url: str, bundle: str, namespace: str = NS) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": "t"},
        "webhooks": [
            {
                "name": "pods.t.test",
                "clientConfig": {"url": url, "caBundle": bundle},
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["pods"],
                        "operations": ["CREATE"],
                    }
                ],
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
            }
        ],
    }


async def _post(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> Any:
    async with session.post(url, json=body) as r:
        return r.status, await r.json()


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "pause:3.10"}]},
    }


async def test_mutating_webhook_patch_is_applied_and_validating_denial_is_returned(
    hooked: Any,
) -> None:
    srv, url, bundle = hooked
    base = f"{srv.url}/apis/admissionregistration.k8s.io/v1"
    pods = f"{srv.url}/api/v1/namespaces/{NS}/pods"
    async with aiohttp.ClientSession() as s:
        m = _config("MutatingWebhookConfiguration", f"{url}/mutate", bundle)
        v = _config("ValidatingWebhookConfiguration", f"{url}/validate", bundle)
        assert (await _post(s, f"{base}/mutatingwebhookconfigurations", m))[0] == 201
        assert (await _post(s, f"{base}/validatingwebhookconfigurations", v))[0] == 201
        status, pod = await _post(s, pods, _pod("good"))
        assert status == 201
        assert pod["metadata"]["labels"] == {"seen": "yes"}
        assert pod["spec"]["schedulerName"] == "default-scheduler"  # still defaulted
        status, body = await _post(s, pods, _pod("bad-1"))
        assert status == 403
        assert body["message"] == 'admission webhook "pods.t.test" denied the request: no'


async def test_webhook_outside_its_namespace_selector_is_not_called(hooked: Any) -> None:
    srv, url, bundle = hooked
    base = f"{srv.url}/apis/admissionregistration.k8s.io/v1"
    async with aiohttp.ClientSession() as s:
        v = _config("ValidatingWebhookConfiguration", f"{url}/validate", bundle, "other")
        await _post(s, f"{base}/validatingwebhookconfigurations", v)
        status, _ = await _post(s, f"{srv.url}/api/v1/namespaces/{NS}/pods", _pod("bad-2"))
        assert status == 201


async def test_unreachable_webhook_fails_the_create_with_failure_policy_fail(
    hooked: Any,
) -> None:
    srv, _, bundle = hooked
    base = f"{srv.url}/apis/admissionregistration.k8s.io/v1"
    async with aiohttp.ClientSession() as s:
        v = _config("ValidatingWebhookConfiguration", "https://127.0.0.1:1/validate", bundle)
        await _post(s, f"{base}/validatingwebhookconfigurations", v)
        status, body = await _post(s, f"{srv.url}/api/v1/namespaces/{NS}/pods", _pod("x"))
        assert status == 500
        assert 'failed calling webhook "pods.t.test"' in body["message"]
