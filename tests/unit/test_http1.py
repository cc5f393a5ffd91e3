"""bridge.http1, the lean HTTP/1.1 client of the plain requests, against loopback servers
that answer from a script of raw bytes: keep-alive, chunked and until-close bodies, the
doubled answers of slurmrestd, the body cap, stale connections, header injection, a
deadline mid-exchange."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest

from bridge.http1 import BodyTooLarge, Http1Pool, target


def ok(body: bytes, *extra: str) -> bytes:
    head = "".join(f"{h}\r\n" for h in extra)
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), head.encode(), body)


@dataclass
class Server:
    """Answers each request (read up to its blank line and its Content-Length body) with
    the next answer of ``answers``; ``close_after`` closes the connection after an answer."""

    answers: list[bytes]
    close_after: Callable[[int], bool] = lambda i: False
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while self.answers:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = await reader.readexactly(length) if length else b""
                self.requests.append(head + body)
                n = len(self.requests) - 1
                writer.write(self.answers.pop(0))
                await writer.drain()
                if self.close_after(n):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


Serve = Callable[..., Awaitable[Server]]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    servers: list[asyncio.Server] = []

    async def make(
        answers: list[bytes], close_after: Callable[[int], bool] | None = None
    ) -> Server:
        s = Server(list(answers), close_after or (lambda i: False))
        srv = await asyncio.start_server(s.handle, "127.0.0.1", 0)
        s.port = srv.sockets[0].getsockname()[1]
        servers.append(srv)
        return s

    yield make
    for srv in servers:
        srv.close()
        await srv.wait_closed()


def pool(s: Server) -> Http1Pool:
    return Http1Pool(f"http://127.0.0.1:{s.port}", limit=4)


async def test_a_kept_alive_connection_carries_the_next_request(serve: Serve) -> None:
    s = await serve([ok(b'{"a":1}'), ok(b'{"b":2}')])
    p = pool(s)
    first = await p.request("GET", "/x", headers={"Accept": "application/json"}, seconds=5)
    second = await p.request("POST", "/y", headers={}, body=b'{"c":3}', seconds=5)
    await p.close()
    assert (first.status, first.body, second.body) == (200, b'{"a":1}', b'{"b":2}')
    assert s.connections == 1
    assert s.requests[0].startswith(b"GET /x HTTP/1.1\r\nHost: 127.0.0.1:")
    assert s.requests[1].endswith(b'Content-Length: 7\r\n\r\n{"c":3}')


async def test_a_chunked_answer_is_put_together(serve: Serve) -> None:
    chunked = (
        b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\nx-a: 2\r\n\r\n"
        b"4\r\nabcd\r\n3;ext=1\r\nefg\r\n0\r\nTrailer: t\r\n\r\n"
    )
    s = await serve([chunked, ok(b"next")])
    p = pool(s)
    answer = await p.request("GET", "/", headers={}, seconds=5)
    again = await p.request("GET", "/", headers={}, seconds=5)
    await p.close()
    assert (answer.status, answer.body, answer.headers["x-a"]) == (201, b"abcdefg", "1, 2")
    assert again.body == b"next"
    assert s.connections == 1


async def test_slurmrestds_doubled_error_answer_is_read_and_its_copy_dropped(serve: Serve) -> None:
    body = b'{"errors":[{"error_number":2017}]}'
    doubled = (
        b"HTTP/1.1 404 NOT FOUND\r\nConnection: Close\r\nContent-Length: %d\r\n\r\n%s"
        b"HTTP/1.1 404 NOT FOUND\r\nConnection: Close\r\nContent-Length: 14\r\n\r\n"
        b"Invalid job id" % (len(body), body)
    )
    s = await serve([doubled, ok(b"fresh")], close_after=lambda i: i == 0)
    p = pool(s)
    answer = await p.request("GET", "/job/5", headers={}, seconds=5)
    fresh = await p.request("GET", "/job/6", headers={}, seconds=5)
    await p.close()
    assert (answer.status, answer.body) == (404, body)
    assert fresh.body == b"fresh"
    assert s.connections == 2  # the closed one was not used again


async def test_an_answer_without_a_length_runs_until_the_server_closes(serve: Serve) -> None:
    s = await serve([b"HTTP/1.1 200 OK\r\n\r\nall of it"], close_after=lambda i: True)
    p = pool(s)
    answer = await p.request("GET", "/", headers={}, seconds=5)
    await p.close()
    assert answer.body == b"all of it"


async def test_a_body_past_the_cap_is_refused(serve: Serve) -> None:
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n0\r\n\r\n"
    s = await serve([ok(b"x" * 100), chunked])
    p = pool(s)
    with pytest.raises(BodyTooLarge):
        await p.request("GET", "/", headers={}, max_body=10, seconds=5)
    with pytest.raises(BodyTooLarge):
        await p.request("GET", "/", headers={}, max_body=5, seconds=5)
    await p.close()
    assert s.connections == 2  # a refused answer's connection is not used again


async def test_a_connection_the_server_closed_while_idle_is_not_used_again(serve: Serve) -> None:
    s = await serve([ok(b"one"), ok(b"two")], close_after=lambda i: i == 0)
    p = pool(s)
    assert (await p.request("POST", "/", headers={}, body=b"", seconds=5)).body == b"one"
    await asyncio.sleep(0.05)  # the server's FIN arrives while the connection is idle
    assert (await p.request("POST", "/", headers={}, body=b"", seconds=5)).body == b"two"
    await p.close()
    assert s.connections == 2


async def test_a_line_break_in_a_header_or_target_is_refused(serve: Serve) -> None:
    s = await serve([ok(b"")])
    p = pool(s)
    with pytest.raises(ValueError, match="CR or LF"):
        await p.request("GET", "/", headers={"X-A": "a\r\nX-Injected: 1"}, seconds=5)
    with pytest.raises(ValueError, match="CR or LF"):
        await p.request("GET", "/a HTTP/1.1\r\nX: y", headers={}, seconds=5)
    await p.close()
    assert s.requests == []


async def test_a_request_cut_by_its_deadline_leaves_no_connection_behind(serve: Serve) -> None:
    s = await serve([b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf", ok(b"later")])
    p = pool(s)
    with pytest.raises(TimeoutError):
        await p.request("GET", "/", headers={}, seconds=0.2)
    answer = await p.request("GET", "/", headers={}, seconds=5)
    await p.close()
    assert answer.body == b"later"
    assert s.connections == 2


def test_a_target_is_quoted_as_aiohttp_would_and_carries_its_query() -> None:
    assert target("/api/v1/namespaces/a b/pods") == "/api/v1/namespaces/a%20b/pods"
    assert target("/x/%2F/y:z@w", [("labelSelector", "a=b,c"), ("limit", 5)]) == (
        "/x/%2F/y:z@w?labelSelector=a%3Db%2Cc&limit=5"
    )
    assert target("/p", {}) == "/p"


async def test_a_request_waits_for_a_busy_connection_within_its_deadline(serve: Serve) -> None:
    s = await serve([b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf", ok(b"next")])
    p = Http1Pool(f"http://127.0.0.1:{s.port}", limit=1)
    first = asyncio.ensure_future(p.request("GET", "/", headers={}, seconds=0.5))
    await asyncio.sleep(0.05)
    with pytest.raises(TimeoutError):  # the only connection is busy past this deadline
        await p.request("GET", "/", headers={}, seconds=0.1)
    with pytest.raises(TimeoutError):
        await first
    assert (await p.request("GET", "/", headers={}, seconds=5)).body == b"next"  # slot freed
    await p.close()
