"""Admission cannot be worn down: every check runs against the real webhook over HTTPS.

- metric label values come from a fixed set, whatever kinds clients send;
- a wrong Content-Type gets 415; a body too deep gets 400, too large 413, never a 500;
- a denial (and its log line) is bounded, however many errors the object holds;
- a client that sends its request head or body too slowly is dropped;
- TLS 1.2 offers AEAD suites with ECDHE only (CBC, static RSA and DHE fail the handshake).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import warnings
from typing import Any

import aiohttp
import pytest
import structlog
import trustme

from admission.metrics import KINDS, OPERATIONS, OTHER, RESULTS
from admission.review import MAX_DENY_ERRORS, MAX_JSON_DEPTH
from admission.server import LOG_MESSAGE_CHARS
from bridge import wellknown
from tests.admission_helpers import make_pod, make_review
from tests.security.conftest import StartWebhook, Webhook

JSON = {"Content-Type": "application/json"}


async def post(
    hook: Webhook, data: bytes, headers: dict[str, str] | None = None, path: str = "/validate"
) -> tuple[int, Any]:
    headers = JSON if headers is None else headers
    async with (
        aiohttp.ClientSession() as s,
        s.post(
            hook.url + path,
            data=data,
            headers=headers,
            skip_auto_headers=() if headers else ("Content-Type",),
            ssl=hook.client_ctx(),
        ) as r,
    ):
        ctype = r.headers.get("Content-Type", "")
        return r.status, (await r.json() if "json" in ctype else await r.text())


def dumps(body: Any) -> bytes:
    return json.dumps(body).encode()


# ----------------------------------------------------------------- metrics
async def test_metric_labels_stay_in_a_fixed_set_whatever_kinds_clients_send(
    webhook: Webhook,
) -> None:
    ctx = webhook.client_ctx()
    async with aiohttp.ClientSession() as s:
        for i in range(300):
            review = make_review(make_pod(name=f"p{i}"), kind=f"Kind{i:05d}", group="evil.example")
            async with s.post(
                webhook.url + ("/validate" if i % 2 else "/mutate"),
                data=dumps(review),
                headers=JSON,
                ssl=ctx,
            ) as r:
                assert r.status == 200
        async with s.get(webhook.metrics_url) as r:
            text = await r.text()
    series = [
        line
        for line in text.splitlines()
        if line.startswith("slurm_bridge_admission_reviews_total")
    ]
    kinds = {line.split('kind="')[1].split('"')[0] for line in series}
    assert kinds == {OTHER}
    assert len(series) <= 2, series  # one per endpoint, not one per kind
    assert sum(float(line.rsplit(" ", 1)[1]) for line in series) == 300
    assert "Kind0" not in text


def test_the_fixed_label_sets_name_the_bridges_own_values() -> None:
    assert {
        "Pod",
        "Job",
        "JobSet",
        "LeaderWorkerSet",
        "PodGroup",
        "Workload",
        "CompositePodGroup",
    } == KINDS
    assert {"CREATE", "UPDATE", "DELETE", "CONNECT"} == OPERATIONS
    assert {"bad_request", "too_large", "unsupported_media"} <= RESULTS


# ----------------------------------------------------------------- content type, depth, size
@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "application/yaml", ""]
)
async def test_a_review_that_is_not_application_json_gets_415(
    webhook: Webhook, content_type: str
) -> None:
    body = dumps(make_review(make_pod()))
    headers = {"Content-Type": content_type} if content_type else {}
    status, out = await post(webhook, body, headers)
    assert status == 415
    assert "Content-Type must be application/json" in out["error"]


async def test_application_json_with_a_charset_is_accepted(webhook: Webhook) -> None:
    body = dumps(make_review(make_pod(), uid="cs"))
    status, out = await post(webhook, body, {"Content-Type": "application/json; charset=utf-8"})
    assert (status, out["response"]["uid"]) == (200, "cs")


@pytest.mark.parametrize("levels", [MAX_JSON_DEPTH + 1, 1_000, 100_000])
async def test_a_body_nested_too_deep_gets_400_not_500(webhook: Webhook, levels: int) -> None:
    nested = b"[" * levels + b"]" * levels
    review = dumps(make_review(make_pod(annotations={"x": "PLACEHOLDER"})))
    body = review.replace(b'"PLACEHOLDER"', nested)
    status, out = await post(webhook, body)
    assert status == 400, out
    assert out["error"].startswith("malformed AdmissionReview: <body>:")
    # and the server still answers
    status, out = await post(webhook, dumps(make_review(make_pod(), uid="after")))
    assert (status, out["response"]["uid"]) == (200, "after")


async def test_a_body_at_the_nesting_limit_is_reviewed(webhook: Webhook) -> None:
    depth_of_annotation_value = 5  # review > request > object > metadata > annotations
    inner = MAX_JSON_DEPTH - depth_of_annotation_value
    nested = b"[" * inner + b"]" * inner
    review = dumps(make_review(make_pod(annotations={"x": "PLACEHOLDER"}), uid="deep-ok"))
    status, out = await post(webhook, review.replace(b'"PLACEHOLDER"', nested))
    assert status == 200, out
    assert out["response"]["uid"] == "deep-ok"


async def test_a_body_over_max_request_bytes_gets_413_with_a_json_reason(webhook: Webhook) -> None:
    body = dumps(make_review(make_pod(annotations={"big": "x" * (300 * 1024)})))
    status, out = await post(webhook, body)
    assert status == 413
    assert "admission.maxRequestBytes" in out["error"]


@pytest.mark.parametrize(
    "raw", [b"\xff\xfe{}", b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"', b""]
)
async def test_undecodable_bodies_get_400_naming_the_body(webhook: Webhook, raw: bytes) -> None:
    status, out = await post(webhook, raw)
    assert status == 400
    assert "<body>" in out["error"]


# ----------------------------------------------------------------- bounded denials
async def test_a_denial_lists_the_first_errors_and_counts_the_rest(webhook: Webhook) -> None:
    bad = {wellknown.slurmjob_annotation(f"nope-{i:04d}"): "v" * 400 for i in range(500)}
    review = make_review(make_pod(annotations=bad), uid="many")
    with structlog.testing.capture_logs() as logs:
        status, out = await post(webhook, dumps(review))
    assert status == 200
    st = out["response"]["status"]
    assert out["response"]["allowed"] is False
    assert st["message"].startswith("Pod slurm-bridge/web-0: 500 errors: ")
    assert st["message"].endswith(f"; ... and {500 - MAX_DENY_ERRORS} more")
    assert len(st["details"]["causes"]) == MAX_DENY_ERRORS
    assert len(st["message"]) < 20_000
    assert all(c["field"].startswith("metadata.annotations[") for c in st["details"]["causes"])
    (line,) = [e for e in logs if e["event"] == "admission_review"]
    assert len(line["message"]) <= LOG_MESSAGE_CHARS


# ----------------------------------------------------------------- slow clients
async def _open(hook: Webhook) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(
        "127.0.0.1", hook.port, ssl=hook.client_ctx(), server_hostname="localhost"
    )


async def _dropped(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, data: bytes
) -> bytes:
    """Send ``data`` one byte at a time (a pause between each) until the server closes the
    connection; what the server sent before closing. Fails if it never does."""
    for i in range(len(data)):
        try:
            writer.write(data[i : i + 1])
            await writer.drain()
        except (ConnectionError, ssl.SSLError):
            break
        with contextlib.suppress(TimeoutError):
            got = await asyncio.wait_for(reader.read(65536), timeout=0.2)
            return got + await reader.read()  # the server spoke or closed: read to the end
    else:
        pytest.fail("the server never dropped a client sending one byte every 0.2 s")
    return await reader.read()


async def test_a_client_sending_its_request_head_slowly_is_dropped(
    start_webhook: StartWebhook,
) -> None:
    hook = await start_webhook(headerReadTimeoutSeconds=1)
    reader, writer = await _open(hook)
    head = b"POST /validate HTTP/1.1\r\nHost: localhost\r\n" + b"X-Slow: " + b"a" * 10_000
    try:
        answer = await _dropped(reader, writer, head)
    finally:
        writer.close()
    assert answer == b"", answer  # closed without a word: no request was ever read
    # the server is fine for everyone else
    status, out = await post(hook, dumps(make_review(make_pod(), uid="after")))
    assert (status, out["response"]["uid"]) == (200, "after")


async def test_a_client_sending_its_body_slowly_gets_408(start_webhook: StartWebhook) -> None:
    hook = await start_webhook(requestTimeoutSeconds=1)
    reader, writer = await _open(hook)
    body = dumps(make_review(make_pod()))
    head = (
        b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body)
    )
    try:
        writer.write(head)
        await writer.drain()
        answer = await _dropped(reader, writer, body)
    finally:
        writer.close()
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert b"timed out reading the request body" in answer


async def test_an_idle_connection_is_closed_after_the_header_timeout(
    start_webhook: StartWebhook,
) -> None:
    hook = await start_webhook(headerReadTimeoutSeconds=1)
    reader, writer = await _open(hook)
    try:
        # nothing sent at all: the server closes (read returns EOF); no bound on the wait
        # beyond a generous safety net
        assert await asyncio.wait_for(reader.read(), timeout=120) == b""
    finally:
        writer.close()


# ----------------------------------------------------------------- TLS
def _client(version: ssl.TLSVersion, ciphers: str | None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with warnings.catch_warnings():  # TLS 1.1 is deprecated: that is the point
        warnings.simplefilter("ignore", DeprecationWarning)
        ctx.minimum_version = min(version, ssl.TLSVersion.TLSv1_2)
        ctx.maximum_version = version
    if ciphers is not None:
        ctx.set_ciphers(f"{ciphers}:@SECLEVEL=0")  # the client offers them; the server decides
    return ctx


async def _handshake(port: int, ctx: ssl.SSLContext) -> tuple[str, str] | None:
    """(protocol, cipher) of a real handshake, or None when the server refused it."""
    try:
        _, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=ctx, server_hostname="localhost"
        )
    except (ssl.SSLError, ConnectionError):
        return None
    sslobj = writer.get_extra_info("ssl_object")
    got = (sslobj.version(), sslobj.cipher()[0])
    writer.close()
    with contextlib.suppress(ssl.SSLError, ConnectionError):
        await writer.wait_closed()
    return got


WEAK_TLS12 = [
    "ECDHE-RSA-AES128-SHA",  # CBC with SHA-1
    "ECDHE-RSA-AES256-SHA384",  # CBC with SHA-384
    "AES128-GCM-SHA256",  # static RSA key exchange (no forward secrecy)
    "AES256-SHA",  # static RSA and CBC
    "DHE-RSA-AES128-GCM-SHA256",  # finite-field DHE
    "DHE-RSA-AES256-SHA",  # DHE and CBC
]
STRONG_TLS12 = [
    "ECDHE-RSA-AES128-GCM-SHA256",
    "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-RSA-CHACHA20-POLY1305",
]


async def test_tls12_refuses_cbc_static_rsa_and_dhe_suites_in_real_handshakes(
    start_webhook: StartWebhook,
) -> None:
    # an RSA certificate, so that every suite below could be chosen if the server allowed it
    hook = await start_webhook(key_type=trustme.KeyType.RSA)
    for cipher in WEAK_TLS12:
        assert await _handshake(hook.port, _client(ssl.TLSVersion.TLSv1_2, cipher)) is None, cipher
    for cipher in STRONG_TLS12:
        got = await _handshake(hook.port, _client(ssl.TLSVersion.TLSv1_2, cipher))
        assert got == ("TLSv1.2", cipher)


async def test_the_weak_suites_would_be_negotiated_by_a_default_server(
    start_webhook: StartWebhook, tmp_path: Any
) -> None:
    """The control: the same client and suites do succeed against Python's default server
    context, so the refusals above come from the webhook's settings, not from the client."""
    ca = trustme.CA(key_type=trustme.KeyType.RSA)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.set_ciphers("ALL:@SECLEVEL=0")
    ca.issue_cert("localhost", key_type=trustme.KeyType.RSA).configure_cert(server_ctx)
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0, ssl=server_ctx)
    port = server.sockets[0].getsockname()[1]
    try:
        for cipher in ("ECDHE-RSA-AES128-SHA", "AES256-SHA"):
            got = await _handshake(port, _client(ssl.TLSVersion.TLSv1_2, cipher))
            assert got == ("TLSv1.2", cipher)
    finally:
        server.close()
        await server.wait_closed()


async def test_tls13_is_offered_and_tls11_is_refused(start_webhook: StartWebhook) -> None:
    hook = await start_webhook()
    got = await _handshake(hook.port, _client(ssl.TLSVersion.TLSv1_3, None))
    assert got is not None
    assert got[0] == "TLSv1.3"
    assert await _handshake(hook.port, _client(ssl.TLSVersion.TLSv1_1, "ALL")) is None
