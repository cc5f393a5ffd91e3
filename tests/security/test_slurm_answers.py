"""Issue #30, finding 7: slurmrestd's answers are capped in size and depth, and the stream
parser is linear in the body.

A 256 MiB body used to be read whole (+511 MiB RSS), and the stream parser decoded a
growing item again on every chunk (one 8 MiB item took 1.2 s). Now a whole answer over
``slurmMaxResponseBytes`` is refused as it arrives (or by its Content-Length), a streamed
item over it likewise, each naming the URL and never the token; a deep body is a clear
error, not a crash; and the parser decodes an item a few times, not once per chunk.
Loopback servers stand in for slurmrestd (a real one never sends such answers)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from bridge.config import parse_config
from bridge.errors import InvalidInput
from bridge.slurm import stream
from bridge.slurm.client import SlurmClient
from bridge.slurm.stream import ArrayStream

TOKEN = "eyJhbGciOiJIUzI1NiJ9.e30.c2VjcmV0LXRva2Vu"
CAP = 1 << 20  # the smallest slurmMaxResponseBytes
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@pytest.fixture
async def slurmrestd(tmp_path: Path) -> AsyncIterator[Callable[[Handler], Awaitable[SlurmClient]]]:
    servers: list[TestServer] = []
    clients: list[SlurmClient] = []
    jwt = tmp_path / "jwt"
    jwt.write_text(TOKEN)

    async def start(handler: Handler) -> SlurmClient:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handler)
        server = TestServer(app)
        await server.start_server()
        servers.append(server)
        cfg = parse_config(
            {
                "slurmRestApi": str(server.make_url("")).rstrip("/"),
                "slurmTokenFile": str(jwt),
                "slurmApiVersion": "v0.0.45",
                "slurmMaxResponseBytes": CAP,
            },
            env={},
        )
        client = SlurmClient.from_config(cfg)
        clients.append(client)
        return client

    yield start
    for c in clients:
        await c.close()
    for s in servers:
        await s.close()


def _huge(size: int) -> bytes:
    return b'{"nodes": [], "pad": "' + b"x" * size + b'"}'


async def _streamed(request: web.Request, body: bytes, chunk: int = 1 << 16) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "application/json"})
    resp.enable_chunked_encoding()  # no Content-Length: the cap must count as it reads
    await resp.prepare(request)
    for i in range(0, len(body), chunk):
        await resp.write(body[i : i + chunk])
    await resp.write_eof()
    return resp


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
async def test_an_answer_larger_than_the_cap_is_refused_naming_the_url(
    slurmrestd: Any, framing: str
) -> None:
    body = _huge(8 * CAP)

    async def handler(request: web.Request) -> web.StreamResponse:
        if framing == "chunked":
            return await _streamed(request, body)
        return web.Response(body=body, content_type="application/json")

    client = await slurmrestd(handler)
    with pytest.raises(InvalidInput) as e:
        await client.list_nodes()
    message = str(e.value)
    assert "slurmMaxResponseBytes" in message
    assert "/slurm/v0.0.45/nodes/" in message
    assert TOKEN not in message


async def test_a_streamed_item_larger_than_the_cap_is_refused_naming_the_url(
    slurmrestd: Any,
) -> None:
    item = json.dumps({"job_id": 1, "comment": "x" * (4 * CAP)}).encode()

    async def handler(request: web.Request) -> web.StreamResponse:
        return await _streamed(request, b'{"jobs": [' + item + b"]}")

    client = await slurmrestd(handler)
    with pytest.raises(InvalidInput) as e:
        await client.scan_jobs(lambda _job: True)
    assert "/slurm/v0.0.45/jobs/" in str(e.value)
    assert TOKEN not in str(e.value)


@pytest.mark.parametrize("depth", [2_000, 100_000])
async def test_a_deep_answer_is_a_clear_error_not_a_crash(slurmrestd: Any, depth: int) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(body=b"[" * depth + b"]" * depth, content_type="application/json")

    client = await slurmrestd(handler)
    with pytest.raises(InvalidInput):
        await client.list_nodes()


@pytest.mark.parametrize("depth", [2_000, 100_000])
async def test_a_deep_streamed_item_is_a_clear_error_not_a_crash(
    slurmrestd: Any, depth: int
) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return await _streamed(request, b'{"jobs": [' + b"[" * depth + b"]" * depth + b"]}")

    client = await slurmrestd(handler)
    with pytest.raises(InvalidInput) as e:
        await client.scan_jobs(lambda _job: True)
    assert "/slurm/v0.0.45/jobs/" in str(e.value)


class _CountingDecoder:
    """json's decoder, counting the characters each decode attempt starts from."""

    def __init__(self) -> None:
        self.inner = json.JSONDecoder()
        self.scanned = 0

    def raw_decode(self, s: str, idx: int = 0) -> tuple[Any, int]:
        self.scanned += len(s) - idx
        return self.inner.raw_decode(s, idx)


def test_the_stream_parser_decodes_a_big_item_a_few_times_not_once_per_chunk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # one 8 MiB item in 64 KiB chunks: it used to be decoded again on each of 128 chunks
    # (~512 MiB scanned); linear means a small multiple of the body
    counting = _CountingDecoder()
    monkeypatch.setattr(stream, "_DECODER", counting)
    item = {"job_id": 1, "nodes": ["n"] * (1 << 20), "comment": "y" * (2 << 20)}
    body = json.dumps({"jobs": [item, {"job_id": 2}], "errors": []}).encode()
    s = ArrayStream("jobs")
    items: list[Any] = []
    for i in range(0, len(body), 1 << 16):
        items += s.feed(body[i : i + (1 << 16)])
    items += s.close()
    assert [it["job_id"] for it in items] == [1, 2]
    assert counting.scanned <= 4 * len(body)
