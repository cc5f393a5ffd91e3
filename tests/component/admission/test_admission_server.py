"""The webhook over real HTTPS, in-process: AdmissionReview in, AdmissionReview out.

Certificates come from trustme; every request is a real TLS handshake with aiohttp's client.
"""

from __future__ import annotations

import asyncio
import os
import random
import ssl
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import trustme
from aiohttp import web

from admission.app import AdmissionServer
from admission.policy import AdmissionContext
from admission.review import AdmissionRequest, AdmissionResponse
from admission.server import WebhookDeps
from bridge import wellknown
from bridge.config import BridgeConfig, parse_config
from bridge.kube.namespaces import CachedNamespaceLabels, kube_namespace_fetch
from tests.admission_helpers import apply_json_patch, decode_patch, make_pod, make_review
from tests.clients import kube_for_host
from tests.fake_clock import FakeClock
from tests.prom import parse, total
from tests.waiting import eventually

OURS = "slurm-bridge-scheduler"
TL = wellknown.slurmjob_annotation("timelimit")


def write_pair(ca: trustme.CA, directory: Path) -> tuple[Path, Path]:
    """Issue a localhost cert from ``ca``; replace the files atomically (like a Secret volume)."""
    cert = ca.issue_cert("localhost", "127.0.0.1")
    crt, key = directory / "tls.crt", directory / "tls.key"
    for path, data in (
        (crt, b"".join(p.bytes() for p in cert.cert_chain_pems)),
        (key, cert.private_key_pem.bytes()),
    ):
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    return crt, key


def client_ctx(ca: trustme.CA) -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    return ctx


def make_config(tmp_path: Path, **admission: Any) -> BridgeConfig:
    return parse_config(
        {
            "managedNamespaces": ["slurm-bridge"],
            "admission": {
                "tlsCertFile": str(tmp_path / "tls.crt"),
                "tlsKeyFile": str(tmp_path / "tls.key"),
                "maxRequestBytes": 64 * 1024,
                **admission,
            },
        },
        env={},
    )


class Running:
    def __init__(self, server: AdmissionServer, ca: trustme.CA) -> None:
        self.server = server
        self.ca = ca
        self.url = f"https://localhost:{server.webhook_bound}"
        self.ops = f"http://127.0.0.1:{server.metrics_bound}"

    async def post(self, path: str, body: Any, **kw: Any) -> tuple[int, Any]:
        async with (
            aiohttp.ClientSession() as s,
            s.post(self.url + path, json=body, ssl=client_ctx(self.ca), **kw) as r,
        ):
            ctype = r.headers.get("Content-Type", "")
            data = await r.json() if "json" in ctype else await r.text()
            return r.status, data


async def start(
    tmp_path: Path, ca: trustme.CA, deps: WebhookDeps | None = None, **kw: Any
) -> AdmissionServer:
    server = AdmissionServer(
        deps.ctx.config if deps else make_config(tmp_path),
        deps=deps,
        webhook_port=0,
        metrics_port=0,
        health_port=0,
        **kw,
    )
    await server.start()
    return server


@pytest.fixture
def ca(tmp_path: Path) -> trustme.CA:
    authority = trustme.CA()
    write_pair(authority, tmp_path)
    return authority


@pytest.fixture
async def running(tmp_path: Path, ca: trustme.CA) -> AsyncIterator[Running]:
    server = await start(tmp_path, ca)
    try:
        yield Running(server, ca)
    finally:
        await server.stop()


async def test_managed_pod_over_https_gets_patch_setting_scheduler_and_toleration(
    running: Running,
) -> None:
    pod = make_pod(namespace="slurm-bridge", node="n9")
    body = make_review(pod, uid="https-1")
    status, out = await running.post("/mutate", body)
    assert status == 200
    assert out["apiVersion"] == "admission.k8s.io/v1"
    assert out["kind"] == "AdmissionReview"
    assert out["response"]["uid"] == "https-1"
    assert out["response"]["allowed"] is True
    patched = apply_json_patch(pod, decode_patch(out))
    assert patched["spec"]["schedulerName"] == OURS
    assert {
        "key": wellknown.MANAGED_NODE_TAINT,
        "operator": "Equal",
        "value": OURS,
        "effect": "NoExecute",
    } in patched["spec"]["tolerations"]
    assert "nodeName" not in patched["spec"]


async def test_bad_annotation_over_https_is_denied_naming_it(running: Running) -> None:
    status, out = await running.post(
        "/validate", make_review(make_pod(annotations={TL: "a-week"}), uid="https-2")
    )
    assert status == 200
    assert out["response"]["uid"] == "https-2"
    assert out["response"]["allowed"] is False
    assert TL in out["response"]["status"]["message"]


async def test_pod_in_other_namespace_passes_untouched_over_https(running: Running) -> None:
    for path in ("/mutate", "/validate"):
        status, out = await running.post(
            path, make_review(make_pod(namespace="default", annotations={TL: "x"}), uid="u3")
        )
        assert status == 200
        assert out["response"] == {"uid": "u3", "allowed": True}


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        pytest.param(b"{not json", "not valid JSON", id="not-json"),
        pytest.param(b'{"apiVersion":"v1","kind":"Pod"}', "apiVersion", id="not-a-review"),
        pytest.param(
            b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}',
            "request.uid",
            id="no-uid",
        ),
        pytest.param(b"\xff\xfe", "not valid JSON", id="binary"),
    ],
)
async def test_malformed_body_gets_400_with_a_clear_message(
    running: Running, raw: bytes, needle: str
) -> None:
    status, out = await running.post(
        "/validate", None, data=raw, headers={"Content-Type": "application/json"}
    )
    assert status == 400
    assert needle in out["error"]


async def test_body_over_max_request_bytes_gets_413(running: Running) -> None:
    pod = make_pod(annotations={"big": "x" * (70 * 1024)})
    status, _ = await running.post("/validate", make_review(pod))
    assert status == 413
    # and the server is still fine
    status, out = await running.post("/validate", make_review(make_pod(), uid="after"))
    assert (status, out["response"]["uid"]) == (200, "after")


async def test_plain_http_on_the_webhook_port_is_refused(running: Running) -> None:
    url = running.url.replace("https://", "http://") + "/healthz"
    async with aiohttp.ClientSession() as s:
        with pytest.raises(aiohttp.ClientError):
            async with s.get(url) as r:
                await r.read()


def broken(req: AdmissionRequest, ctx: AdmissionContext) -> AdmissionResponse:
    raise ZeroDivisionError("a bug")


@pytest.mark.parametrize(
    ("policy", "allowed"),
    [
        pytest.param("Fail", False, id="fail-denies"),
        pytest.param("Ignore", True, id="ignore-allows"),
    ],
)
async def test_bug_in_validate_is_answered_by_failure_policy_and_server_survives(
    tmp_path: Path, ca: trustme.CA, policy: str, allowed: bool
) -> None:
    cfg = make_config(tmp_path, failurePolicy=policy)
    deps = WebhookDeps(ctx=AdmissionContext(cfg), validate=broken)
    server = await start(tmp_path, ca, deps=deps)
    run = Running(server, ca)
    try:
        for i in range(3):
            status, out = await run.post("/validate", make_review(make_pod(), uid=f"bug-{i}"))
            assert status == 200
            assert out["response"]["uid"] == f"bug-{i}"
            assert out["response"]["allowed"] is allowed
            assert "patch" not in out["response"]
        if allowed:
            assert "internal error" in out["response"]["warnings"][0]
        else:
            assert out["response"]["status"]["code"] == 500
            assert "internal error" in out["response"]["status"]["message"]
        # mutate is unaffected
        status, out = await run.post("/mutate", make_review(make_pod()))
        assert out["response"]["allowed"] is True
        assert "patch" in out["response"]
        text = await _get(run.ops + "/metrics")
        assert 'result="error"' in text
    finally:
        await server.stop()


class HangingNamespaces:
    async def labels(self, namespace: str) -> dict[str, str]:
        await asyncio.Event().wait()
        return {}


async def test_request_timeout_is_answered_by_failure_policy(
    tmp_path: Path, ca: trustme.CA
) -> None:
    cfg = parse_config(
        {
            **make_config(tmp_path).model_dump(by_alias=True, mode="json"),
            "managedNamespaceSelector": {"matchLabels": {"team": "hpc"}},
            "admission": {
                **make_config(tmp_path).admission.model_dump(by_alias=True, mode="json"),
                "requestTimeoutSeconds": 0.05,
            },
        },
        env={},
    )
    deps = WebhookDeps(ctx=AdmissionContext(cfg), namespaces=HangingNamespaces())
    server = await start(tmp_path, ca, deps=deps)
    try:
        status, out = await Running(server, ca).post(
            "/mutate", make_review(make_pod(namespace="team-x"), uid="slow")
        )
        assert status == 200
        assert out["response"]["uid"] == "slow"
        assert out["response"]["allowed"] is False
        assert "timed out" in out["response"]["status"]["message"]
    finally:
        await server.stop()


async def _get(url: str, ssl_ctx: ssl.SSLContext | None = None) -> str:
    async with aiohttp.ClientSession() as s, s.get(url, ssl=ssl_ctx or False) as r:
        assert r.status == 200, (url, r.status)
        return await r.text()


async def test_health_ready_and_metrics(running: Running) -> None:
    assert await _get(running.url + "/healthz", client_ctx(running.ca)) == "ok"
    assert await _get(running.url + "/readyz", client_ctx(running.ca)) == "ok"
    health = f"http://127.0.0.1:{running.server.health_bound}"
    assert await _get(health + "/readyz") == "ok"
    t0 = time.perf_counter()
    await running.post("/mutate", make_review(make_pod()))
    round_trip = time.perf_counter() - t0
    await running.post("/validate", make_review(make_pod(annotations={TL: "x"})))
    text = await _get(running.ops + "/metrics")
    assert (
        'slurm_bridge_admission_reviews_total{endpoint="mutate",kind="Pod",'
        'operation="CREATE",result="patched"} 1.0'
    ) in text
    assert (
        'slurm_bridge_admission_reviews_total{endpoint="validate",kind="Pod",'
        'operation="CREATE",result="denied"} 1.0'
    ) in text
    assert 'slurm_bridge_admission_review_seconds_count{endpoint="mutate"} 1.0' in text
    # the review's own time, in seconds: some, and within the client's round trip
    mutate_s = total(parse(text), "slurm_bridge_admission_review_seconds_sum", endpoint="mutate")
    assert 0 < mutate_s <= round_trip


async def _wait_for(cond: Callable[[], bool]) -> None:
    await eventually(cond, within=5.0, every=0.01)


async def _handshake_ok(url: str, ca: trustme.CA) -> bool:
    try:
        await _get(url + "/healthz", client_ctx(ca))
    except aiohttp.ClientConnectorCertificateError:
        return False
    return True


async def test_rotated_certificate_is_served_to_new_handshakes_without_restart(
    tmp_path: Path, ca: trustme.CA
) -> None:
    clock = FakeClock()
    server = await start(tmp_path, ca, clock=clock)
    assert server.reloader is not None
    url = f"https://localhost:{server.webhook_bound}"
    try:
        assert await _handshake_ok(url, ca)
        new_ca = trustme.CA()
        assert not await _handshake_ok(url, new_ca)

        write_pair(new_ca, tmp_path)
        clock.advance(server.cfg.admission.cert_reload_interval_seconds)
        await _wait_for(lambda: server.reloader is not None and server.reloader.reloads == 1)

        assert await _handshake_ok(url, new_ca)
        assert not await _handshake_ok(url, ca)
    finally:
        await server.stop()


async def test_half_written_rotation_keeps_serving_the_old_pair(
    tmp_path: Path, ca: trustme.CA
) -> None:
    server = await start(tmp_path, ca)
    assert server.reloader is not None
    url = f"https://localhost:{server.webhook_bound}"
    try:
        other = trustme.CA().issue_cert("localhost")
        (tmp_path / "tls.crt").write_bytes(b"".join(p.bytes() for p in other.cert_chain_pems))
        # the key still belongs to the old cert: the pair does not load
        assert server.reloader.reload_if_changed() is False
        assert await _handshake_ok(url, ca)
        (tmp_path / "tls.key").write_bytes(other.private_key_pem.bytes())
        assert server.reloader.reload_if_changed() is True
        assert not await _handshake_ok(url, ca)
    finally:
        await server.stop()


async def fake_kube(namespaces: dict[str, dict[str, str]], fail: set[str]) -> web.AppRunner:
    async def read_namespace(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name in fail:
            return web.json_response({"kind": "Status", "code": 500}, status=500)
        if name not in namespaces:
            return web.json_response({"kind": "Status", "code": 404}, status=404)
        return web.json_response(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "labels": namespaces[name]},
            }
        )

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/{name}", read_namespace)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner


async def test_namespace_selector_looks_up_labels_through_the_kube_api(
    tmp_path: Path, ca: trustme.CA
) -> None:
    kube = await fake_kube({"team-a": {"team": "hpc"}, "team-b": {"team": "web"}}, {"broken"})
    port = kube.addresses[0][1]
    api = kube_for_host(f"http://127.0.0.1:{port}", request_timeout=5.0)
    cfg = make_config(tmp_path).model_copy(
        update={
            "managed_namespace_selector": parse_config(
                {"managedNamespaceSelector": {"matchLabels": {"team": "hpc"}}}, env={}
            ).managed_namespace_selector
        }
    )
    source = CachedNamespaceLabels(kube_namespace_fetch(api), FakeClock(), 30.0)
    server = await start(
        tmp_path, ca, deps=WebhookDeps(ctx=AdmissionContext(cfg)), namespaces=source
    )
    run = Running(server, ca)
    try:
        for _ in range(2):
            _, out = await run.post("/mutate", make_review(make_pod(namespace="team-a")))
            assert "patch" in out["response"]
        assert source.fetches == 1  # cached
        _, out = await run.post("/mutate", make_review(make_pod(namespace="team-b")))
        assert out["response"]["allowed"] is True
        assert "patch" not in out["response"]
        _, out = await run.post("/mutate", make_review(make_pod(namespace="slurm-bridge")))
        assert "patch" in out["response"]
        assert source.fetches == 2  # listed by name: no lookup
        _, out = await run.post("/mutate", make_review(make_pod(namespace="broken")))
        assert out["response"]["allowed"] is False
        assert "cannot read namespace broken" in out["response"]["status"]["message"]
    finally:
        await server.stop()
        await api.close()
        await kube.cleanup()


async def test_200_generated_bad_pods_over_https_all_get_well_formed_answers(
    running: Running,
) -> None:
    from tests.unit.admission.test_admission_fuzz import bad_pod

    rng = random.Random(7)
    tls = client_ctx(running.ca)
    async with aiohttp.ClientSession() as s:
        for i in range(200):
            path = rng.choice(["/mutate", "/validate"])
            body = make_review(bad_pod(rng), uid=f"h{i}")
            async with s.post(running.url + path, json=body, ssl=tls) as r:
                assert r.status == 200
                out = await r.json()
            assert out["response"]["uid"] == f"h{i}"
            if not out["response"]["allowed"]:
                assert out["response"]["status"]["details"]["causes"]
