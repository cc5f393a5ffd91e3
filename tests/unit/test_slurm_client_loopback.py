"""SlurmClient against loopback servers with scripted answers: retry policy, version
choice, DELETE status[] handling, and slurmrestd's doubled error responses."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from bridge.errors import (
    InvalidInput,
    SlurmNotFound,
    SlurmRejected,
    SlurmTimeout,
    SlurmUnavailable,
)
from bridge.models import JobSpec
from bridge.slurm.client import SlurmClient
from bridge.slurm.token import TokenProvider
from tests.clients import api_version, list_jobs
from tests.fake_clock import FakeClock

Script = list[tuple[int, Any]]
SPEC = JobSpec(name="j", min_nodes=1, tasks=1, memory_per_node_mib=10)


class Scripted:
    """Answers requests from a script of (status, json-or-text) and records them."""

    def __init__(self, script: Script) -> None:
        self.script = list(script)
        self.calls: list[tuple[str, str]] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.calls.append((request.method, request.path_qs))
        status, body = self.script.pop(0) if self.script else (500, "script exhausted")
        if isinstance(body, str):
            return web.Response(status=status, text=body)
        return web.json_response(body, status=status)


@pytest.fixture
async def serve(tmp_path: Path) -> AsyncIterator[Callable[[Script], Any]]:
    servers: list[TestServer] = []
    jwt = tmp_path / "jwt"
    jwt.write_text("tok")

    async def make(script: Script, version: str = "v0.0.45") -> tuple[SlurmClient, Scripted]:
        s = Scripted(script)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", s.handle)
        server = TestServer(app)
        await server.start_server()
        servers.append(server)
        client = SlurmClient(
            str(server.make_url("")),
            TokenProvider(jwt),
            api_version=version,
            retry_attempts=3,
            clock=_AutoClock(),
        )
        return client, s

    yield make
    for server in servers:
        await server.close()


class _AutoClock(FakeClock):
    """A fake clock whose sleeps return at once (backoff without real waiting)."""

    async def sleep(self, seconds: float) -> None:
        self.advance(seconds)


JOBS_OK = {"jobs": [], "last_update": {"set": True, "number": 5}, "errors": [], "warnings": []}


async def test_idempotent_get_is_retried_on_unavailable(serve: Any) -> None:
    client, s = await serve([(503, "busy"), (502, "bad gateway"), (200, JOBS_OK)])
    async with client:
        listed = await list_jobs(client)
    assert listed.jobs == ()
    assert len(s.calls) == 3


async def test_idempotent_get_gives_up_after_the_attempts(serve: Any) -> None:
    client, s = await serve([(503, "busy")] * 5)
    async with client:
        with pytest.raises(SlurmUnavailable):
            await list_jobs(client)
    assert len(s.calls) == 3


async def test_submit_is_never_retried(serve: Any) -> None:
    client, s = await serve([(503, "busy"), (200, {"job_id": 7})])
    async with client:
        with pytest.raises(SlurmUnavailable):
            await client.submit(SPEC)
    assert len(s.calls) == 1


async def test_submit_answer_with_a_job_id_and_errors_is_a_queued_job(serve: Any) -> None:
    """topology/block: HTTP 500, error 7203, yet the job is PENDING (Slurm 26.05)."""
    answer = {
        "job_id": 19,
        "errors": [{"error_number": 7203, "error": "No suitable topology unit found"}],
        "warnings": [{"description": "Job submission resulted in non-zero return code"}],
    }
    client, s = await serve([(500, answer), (500, {"errors": answer["errors"]})])
    async with client:
        result = await client.submit_result(SPEC)
        assert result.job_id == 19
        assert result.warnings
        with pytest.raises(SlurmRejected) as e:  # no job id: a real rejection
            await client.submit(SPEC)
    assert e.value.error_number == 7203
    assert len(s.calls) == 2


async def test_rejection_is_not_retried(serve: Any) -> None:
    bad = {"errors": [{"error_number": 2000, "error": "Invalid partition name specified"}]}
    client, s = await serve([(422, bad)])
    async with client:
        with pytest.raises(SlurmRejected) as e:
            await list_jobs(client)
    assert e.value.error_number == 2000
    assert len(s.calls) == 1


async def test_cancel_is_retried_and_already_done_is_success(serve: Any) -> None:
    done = {"status": [{"error": {"code": 2021, "string": "already completing"}, "job_id": 3}]}
    client, s = await serve([(503, "busy"), (200, done)])
    async with client:
        assert await client.cancel(3) is False
    assert [m for m, _ in s.calls] == ["DELETE", "DELETE"]


async def test_cancel_unknown_id_in_status_is_not_found(serve: Any) -> None:
    unknown = {"status": [{"error": {"code": 2017, "string": "Invalid job id specified"}}]}
    client, _ = await serve([(200, unknown)])
    async with client:
        with pytest.raises(SlurmNotFound):
            await client.cancel(99)


async def test_node_update_is_retried(serve: Any) -> None:
    client, s = await serve([(500, "oops"), (200, {"errors": [], "warnings": []})])
    async with client:
        await client.drain_node("n1", "maint")
    assert len(s.calls) == 2


@pytest.mark.parametrize(
    ("served", "picked"),
    [
        (["v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"], "v0.0.45"),
        (["v0.0.42", "v0.0.43", "v0.0.44"], "v0.0.44"),
        (["v0.0.41", "v0.0.43"], "v0.0.43"),
    ],
    ids=["26.05", "25.11", "only-43"],
)
async def test_auto_version_picks_the_newest_served_and_caches_it(
    serve: Any, served: list[str], picked: str
) -> None:
    doc = {"paths": {f"/slurm/{v}/jobs/": {} for v in served}}
    client, s = await serve([(200, doc), (200, JOBS_OK), (200, JOBS_OK)], "auto")
    async with client:
        await list_jobs(client)
        await list_jobs(client)
        assert await api_version(client) == picked
    assert [p for _, p in s.calls].count("/openapi/v3") == 1
    assert s.calls[1][1] == f"/slurm/{picked}/jobs/"


async def test_doubled_error_response_is_read(tmp_path: Path) -> None:
    """slurmrestd 26.05 sends a second response after a Connection: Close error."""
    body = json.dumps({"errors": [{"error_number": 2017, "error": "Invalid job id"}]}).encode()
    answer = (
        b"HTTP/1.1 404 NOT FOUND\r\nConnection: Close\r\nContent-Length: %d\r\n"
        b"Content-Type: application/json\r\n\r\n%s"
        b"HTTP/1.1 404 NOT FOUND\r\nConnection: Close\r\nContent-Length: 14\r\n"
        b"Content-Type: text/plain\r\n\r\nInvalid job id" % (len(body), body)
    )

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    jwt = tmp_path / "jwt"
    jwt.write_text("tok")
    try:
        async with SlurmClient(
            f"http://127.0.0.1:{port}", TokenProvider(jwt), api_version="v0.0.45", retry_attempts=1
        ) as client:
            with pytest.raises(SlurmNotFound) as e:
                await client.get_job(5)
        assert e.value.status == 404
    finally:
        server.close()
        await server.wait_closed()


async def test_the_whole_job_table_may_take_longer_than_one_request_timeout(
    tmp_path: Path,
) -> None:
    """GET /jobs/ (tens of MB on a busy cluster) gets the bulk timeout; GET /job/{id} the
    plain one. The server answers both after the same delay."""
    delay = 0.5

    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(delay)
        return web.json_response(JOBS_OK)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", slow)
    server = TestServer(app)
    await server.start_server()
    jwt = tmp_path / "jwt"
    jwt.write_text("tok")
    client = SlurmClient(
        str(server.make_url("")),
        TokenProvider(jwt),
        api_version="v0.0.45",
        request_timeout_seconds=delay / 5,
        retry_attempts=1,
    )
    try:
        async with client:
            assert (await list_jobs(client)).jobs == ()
            with pytest.raises(SlurmTimeout, match="job_get: no answer within"):
                await client.get_job(1)
    finally:
        await server.close()


async def test_scan_jobs_is_retried_on_unavailable_and_keeps_what_is_asked(serve: Any) -> None:
    jobs = {**JOBS_OK, "jobs": [{"job_id": 1, "name": "a"}, {"job_id": 2, "name": "b"}]}
    client, s = await serve([(503, "busy"), (200, jobs)])
    async with client:
        kept = await client.scan_jobs(lambda j: j.name == "b")
    assert [j.job_id for j in kept] == [2]
    assert len(s.calls) == 2


async def test_scan_jobs_raises_the_errors_slurm_lists_after_the_jobs(serve: Any) -> None:
    bad = {"jobs": [{"job_id": 1}], "errors": [{"error_number": 2000, "error": "no"}]}
    client, _ = await serve([(200, bad)])
    async with client:
        with pytest.raises(SlurmRejected) as e:
            await client.scan_jobs(lambda j: True)
    assert e.value.error_number == 2000


async def test_scan_jobs_refuses_a_truncated_answer(serve: Any) -> None:
    client, _ = await serve([(200, '{"jobs": [{"job_id": 1}')])
    async with client:
        with pytest.raises(InvalidInput):
            await client.scan_jobs(lambda j: True)
