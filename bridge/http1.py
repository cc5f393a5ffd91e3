"""A lean HTTP/1.1 client for the two clients' short requests (a JSON body in, one out),
on asyncio's transports.

Why not aiohttp for these: its ``ClientSession`` spends about 100 us of CPU per request
(request and response objects, URL parsing, header multidicts, timers, tracing hooks, a
stream reader) where this module spends about 30 us (measured side by side on one local
server, 5,000 requests, 16 at once). The scheduler sends five such requests for each pod
it places (``job/allocate``, ``GET /resources/{id}``, the link PATCH, the Binding, the
Scheduled event), so aiohttp's request path was about a quarter of its CPU per pod
(docs/benchmarks.md, "The cost of a pod, paired"). Streams (watches, Slurm's whole-table
reads) stay on aiohttp.

What it does, and no more:

* one origin (``http://`` or ``https://`` with the caller's ``ssl.SSLContext``);
* at most ``limit`` connections, kept alive between requests (dropped after
  :data:`IDLE_SECONDS` unused, as aiohttp does); a request waits for a free one;
* a request: method, target (path and query), headers, an optional body
  (``Content-Length``); a target or header holding CR or LF is refused (no injection);
* an answer: status, headers (names lower-cased), the body by ``Content-Length``,
  chunked, or until the server closes; at most ``max_body`` bytes (:class:`BodyTooLarge`);
* ``Connection: close`` (and HTTP/1.0) is honoured: the connection is dropped after the
  answer and whatever the server sends after it is ignored (slurmrestd 26.05 follows each
  error answer with a second copy, see :mod:`bridge.slurm.transport`);
* a connection the server closed while idle is never reused; an idempotent request
  (GET, HEAD, PUT, DELETE, OPTIONS) whose reused connection fails before any byte of the
  answer came is sent once more on a new connection (the server closed it just then);
* one deadline per request (``TimeoutError``); a transport failure raises ``OSError``
  (``ConnectionError``; ``ssl.SSLError`` for TLS): the callers map both to their error
  trees.
"""

from __future__ import annotations

import asyncio
import re
import ssl
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import quote, urlencode, urlsplit

# An idle kept-alive connection is closed after this long (aiohttp's keepalive_timeout).
IDLE_SECONDS = 15.0
# The longest status line plus headers accepted.
MAX_HEAD_BYTES = 64 << 10
IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
_CRLF = b"\r\n"
_HEAD_END = b"\r\n\r\n"


# Characters a path keeps as they are (RFC 3986 pchar and "/"; "%": already escaped), as
# aiohttp (yarl) leaves them.
_PATH_SAFE = "/%:@!$&'()*+,;="


_NEEDS_QUOTING = re.compile(r"[^A-Za-z0-9/%:@!$&'()*+,;=._~-]")


def target(path: str, query: Mapping[str, Any] | Sequence[tuple[str, Any]] | None = None) -> str:
    """A request target: ``path`` quoted, then the query (form-encoded), if any. A path
    that needs no quoting (nearly every one) is taken as it is: ``quote`` cost 2% of the
    scheduler's CPU (profiled)."""
    quoted = quote(path, safe=_PATH_SAFE) if _NEEDS_QUOTING.search(path) else path
    return f"{quoted}?{urlencode(query)}" if query else quoted


class BodyTooLarge(ValueError):
    """The answer's body is longer than the ``max_body`` the request allowed."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the answer is larger than {limit} bytes")
        self.limit = limit


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: dict[str, str]  # names lower-cased; a repeated header's values joined by ", "
    body: bytes


class _Malformed(ConnectionError):
    """The server's bytes are not an HTTP/1.1 answer."""


class _Connection(asyncio.Protocol):
    """One connection; one exchange at a time. The answer is parsed as it arrives."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._answer: asyncio.Future[Answer] | None = None
        self._max_body: int | None = None
        self._head_request = False  # a HEAD: no body follows the answer's headers
        self._got = False  # a byte of the current answer came
        self._timer: asyncio.TimerHandle | None = None  # the current exchange's deadline
        self._reset()

    def _reset(self) -> None:
        self._buf = bytearray()
        self._status = 0
        self._headers: dict[str, str] = {}
        self._keep = True
        self._mode = ""  # "" head, "length", "chunked", "close"
        self._left = 0  # body bytes left (length), or of the current chunk
        self._chunk_state = "size"  # size, data, crlf, trailer
        self._body = bytearray()

    # -- asyncio.Protocol --------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport (uvloop's is not registered as an asyncio.Transport)
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        answer = self._answer
        if answer is None or answer.done():
            # Bytes nobody asked for (after a close answer, or while idle): the connection
            # is no longer in step with the server.
            self.close()
            return
        self._got = True
        self._buf += data
        try:
            done = self._parse()
        except (ValueError, _Malformed) as e:
            self.close()
            if not answer.done():
                answer.set_exception(e if isinstance(e, BodyTooLarge) else _Malformed(str(e)))
            return
        if done:
            result = Answer(self._status, self._headers, bytes(self._body))
            if not self._keep or self._buf:
                self.close()  # Connection: close (anything after the answer is dropped)
            self._answer = None
            answer.set_result(result)

    def eof_received(self) -> bool:
        self.closed = True
        answer = self._answer
        if answer is not None and not answer.done():
            if self._mode == "close":  # the body ends with the connection
                answer.set_result(Answer(self._status, self._headers, bytes(self._body)))
            else:
                answer.set_exception(ConnectionResetError("the server closed the connection"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        answer = self._answer
        if answer is not None and not answer.done():
            answer.set_exception(exc or ConnectionResetError("the connection was lost"))

    # -- the exchange ------------------------------------------------------------------
    def send(
        self, request: bytes, max_body: int | None, *, head: bool, deadline: float
    ) -> asyncio.Future[Answer]:
        """Send ``request``; the future is its answer, or ``TimeoutError`` at ``deadline``
        (the loop's clock). One timer per exchange, cancelled by :meth:`disarm`: a third
        of what ``asyncio.timeout`` costs (profiled, 2% of the scheduler's CPU)."""
        assert self.transport is not None
        self._reset()
        self._got = False
        self._max_body = max_body
        self._head_request = head
        loop = asyncio.get_running_loop()
        self._answer = loop.create_future()
        self._timer = loop.call_at(deadline, self._expire)
        self.transport.write(request)
        return self._answer

    def _expire(self) -> None:
        answer = self._answer
        if answer is not None and not answer.done():
            answer.set_exception(TimeoutError("no answer before the deadline"))
        self.close()

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    @property
    def got_bytes(self) -> bool:
        return self._got

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    # -- parsing -----------------------------------------------------------------------
    def _parse(self) -> bool:
        """Parse what has arrived; True once the answer is whole."""
        while True:
            if self._mode == "":
                if not self._parse_head():
                    return False
                continue
            if self._mode == "length":
                take = min(self._left, len(self._buf))
                self._add_body(self._buf[:take])
                del self._buf[:take]
                self._left -= take
                return self._left == 0
            if self._mode == "chunked":
                return self._parse_chunks()
            # "close": the body runs until the server closes (eof_received)
            self._add_body(self._buf)
            self._buf.clear()
            return False

    def _parse_head(self) -> bool:
        end = self._buf.find(_HEAD_END)
        if end < 0:
            if len(self._buf) > MAX_HEAD_BYTES:
                raise _Malformed("the answer's headers are too long")
            return False
        lines = bytes(self._buf[:end]).decode("latin-1").split("\r\n")
        del self._buf[: end + len(_HEAD_END)]
        version, _, rest = lines[0].partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise _Malformed(f"not an HTTP/1.x status line: {lines[0][:60]!r}")
        status = int(code)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                raise _Malformed("a header line without ':'")
            key = name.strip().lower()
            value = value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        if 100 <= status < 200:
            return True  # an interim answer (100 Continue): the real one follows
        self._status, self._headers = status, headers
        conn = headers.get("connection", "").lower()
        self._keep = "close" not in conn and (version != "HTTP/1.0" or "keep-alive" in conn)
        if status in (204, 304) or self._head_request:
            self._mode, self._left = "length", 0
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            self._mode, self._chunk_state = "chunked", "size"
        elif "content-length" in headers:
            length = int(headers["content-length"])
            if length < 0:
                raise _Malformed("a negative Content-Length")
            if self._max_body is not None and length > self._max_body:
                raise BodyTooLarge(self._max_body)
            self._mode, self._left = "length", length
        else:
            self._mode, self._keep = "close", False
        return True

    def _parse_chunks(self) -> bool:
        buf = self._buf
        while True:
            if self._chunk_state == "size":
                end = buf.find(_CRLF)
                if end < 0:
                    return False
                size_text = bytes(buf[:end]).split(b";", 1)[0].strip()
                del buf[: end + 2]
                self._left = int(size_text, 16)
                self._chunk_state = "data" if self._left else "trailer"
            elif self._chunk_state == "data":
                take = min(self._left, len(buf))
                if take == 0:
                    return False
                self._add_body(buf[:take])
                del buf[:take]
                self._left -= take
                if self._left == 0:
                    self._chunk_state = "crlf"
            elif self._chunk_state == "crlf":
                if len(buf) < 2:
                    return False
                if buf[:2] != _CRLF:
                    raise _Malformed("a chunk not followed by CRLF")
                del buf[:2]
                self._chunk_state = "size"
            else:  # trailer lines until an empty one
                end = buf.find(_CRLF)
                if end < 0:
                    return False
                del buf[: end + 2]
                if end == 0:
                    return True

    def _add_body(self, data: bytes | bytearray) -> None:
        self._body += data
        if self._max_body is not None and len(self._body) > self._max_body:
            raise BodyTooLarge(self._max_body)


class Http1Pool:
    """Keep-alive connections to one origin (``scheme://host[:port]``)."""

    def __init__(
        self,
        origin: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        limit: int = 16,
    ) -> None:
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) origin: {origin!r}")
        self._tls = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._tls else 80)
        default_port = (parts.scheme == "https" and self._port == 443) or (
            parts.scheme == "http" and self._port == 80
        )
        host = f"[{self._host}]" if ":" in self._host else self._host
        self.host_header = host if default_port else f"{host}:{self._port}"
        self._ssl: ssl.SSLContext | None = None
        if self._tls:
            self._ssl = ssl_context or ssl.create_default_context()
        self._server_hostname = server_hostname
        self._idle: deque[_Connection] = deque()
        self._slots = asyncio.Semaphore(limit)
        self._closed = False

    async def request(
        self,
        method: str,
        target: str,
        *,
        headers: Mapping[str, str],
        body: bytes | None = None,
        seconds: float,
        max_body: int | None = None,
    ) -> Answer:
        """One exchange: the answer whatever its status; ``TimeoutError`` once ``seconds``
        have passed (the wait for a connection included, as aiohttp's total timeout),
        ``OSError`` when the connection fails, :class:`BodyTooLarge` past ``max_body``. A
        connection left mid-exchange (the deadline, a cancellation) is closed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        request = self._encode(method, target, headers, body)
        if self._slots.locked():  # every connection busy: wait for one, within the deadline
            async with asyncio.timeout_at(deadline):
                await self._slots.acquire()
        else:
            await self._slots.acquire()  # at once
        try:
            while True:
                conn = self._take_idle()
                reused = conn is not None
                if conn is None:
                    async with asyncio.timeout_at(deadline):
                        conn = await self._connect()
                try:
                    answer = await conn.send(
                        request, max_body, head=method == "HEAD", deadline=deadline
                    )
                except OSError:
                    conn.close()
                    if reused and not conn.got_bytes and method in IDEMPOTENT:
                        continue  # closed by the server just as it was reused: once more
                    raise
                except BaseException:  # the deadline, a cancellation, a body too large
                    conn.close()
                    raise
                finally:
                    conn.disarm()
                self._keep(conn)
                return answer
        finally:
            self._slots.release()

    def _encode(
        self, method: str, target: str, headers: Mapping[str, str], body: bytes | None
    ) -> bytes:
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self.host_header}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body or b'')}")
        if any("\n" in line or "\r" in line for line in lines):
            # A target or header value with a line break would split the request.
            raise ValueError("a request target or header holds CR or LF")
        head = "\r\n".join(lines)
        return head.encode("latin-1") + b"\r\n\r\n" + (body or b"")

    def _take_idle(self) -> _Connection | None:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()  # the most recently used: the least likely closed
            if not conn.closed and now - conn.idle_since < IDLE_SECONDS:
                return conn
            conn.close()
        return None

    def _keep(self, conn: _Connection) -> None:
        if conn.closed or self._closed:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        self._idle.append(conn)

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        if self._ssl is None:
            _, conn = await loop.create_connection(_Connection, self._host, self._port)
        else:
            _, conn = await loop.create_connection(
                _Connection,
                self._host,
                self._port,
                ssl=self._ssl,
                server_hostname=self._server_hostname or self._host,
            )
        return conn

    async def close(self) -> None:
        self._closed = True
        while self._idle:
            self._idle.pop().close()


__all__ = ["IDEMPOTENT", "Answer", "BodyTooLarge", "Http1Pool", "target"]
