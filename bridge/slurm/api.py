"""The request path to slurmrestd: one session, the JWT and a timeout on every request,
errors classified in one place, retries of idempotent calls, and the API version.

One :class:`SlurmApi` owns one aiohttp session; use it as an async context manager.
Every request carries a fresh JWT from :class:`~bridge.slurm.token.TokenProvider` and a
timeout (``slurmRequestTimeoutSeconds``); an ``https://`` URL is verified
(:mod:`bridge.slurm.tls`). Answers are decoded by the pure codec of the chosen API version
(``slurmApiVersion``: pinned, or ``auto`` = the newest of v0.0.45/44/43 that the server's
``/openapi/v3`` document lists; read once, cached: :meth:`SlurmApi.codec`).

Errors are classified only by :func:`bridge.errors.classify_slurm_error` (HTTP status and
Slurm error numbers, never text).

Retries (on :class:`~bridge.errors.SlurmUnavailable` / ``SlurmTimeout`` only)
apply to the calls the verbs mark idempotent (:meth:`SlurmApi.request`): every GET,
cancel, node state updates and node deletion. Submit never is
(:mod:`bridge.slurm.submitting`).

The verbs build on this: :mod:`bridge.slurm.fetching`, :mod:`bridge.slurm.submitting`,
:mod:`bridge.slurm.updating`.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar
from urllib.parse import urlsplit

import aiohttp

from bridge import fastjson, http1
from bridge.clock import Clock, SystemClock, backoff_delay
from bridge.config import BridgeConfig
from bridge.errors import (
    ConfigError,
    InvalidInput,
    SlurmError,
    SlurmTimeout,
    SlurmUnavailable,
    classify_slurm_error,
)
from bridge.http1 import BodyTooLarge, Http1Pool
from bridge.logging import get_logger
from bridge.slurm.codec import CODECS, SUPPORTED_VERSIONS, Codec, codec_for
from bridge.slurm.stream import ArrayStream
from bridge.slurm.tls import client_tls_context, warn_if_plaintext
from bridge.slurm.token import TokenProvider
from bridge.slurm.transport import SlurmConnector

OPENAPI_PATH = "/openapi/v3"
# GET /jobs/ (every job Slurm remembers, finished ones too: tens of MB on a busy cluster,
# ~10 s at 94 MB measured) gets this many times the request timeout, at least the minimum.
BULK_TIMEOUT_FACTOR = 6
BULK_TIMEOUT_MIN_SECONDS = 60.0
SCAN_CHUNK_BYTES = 1 << 16  # read size of a streamed whole-table answer
# The largest answer read whole, and the largest item of a streamed one (slurmRestApi's
# answers are not the bridge's to trust with its memory: a 256 MiB body used to be read
# whole, +511 MiB RSS). Config: slurmMaxResponseBytes.
MAX_RESPONSE_BYTES = 64 << 20
# Connections to slurmrestd at most (aiohttp's default limit, which it had before).
SLURM_CONNECTIONS = 100

_log = get_logger("bridge.slurm")
T = TypeVar("T")


def _transport_failure(
    error: BaseException, endpoint: str, timeout: aiohttp.ClientTimeout, base_url: str
) -> SlurmError:
    """The SlurmError for a request that got no answer."""
    if isinstance(error, TimeoutError):
        return SlurmTimeout(f"{endpoint}: no answer within {timeout.total}s", endpoint=endpoint)
    cert_error: BaseException | None = None
    if isinstance(error, aiohttp.ClientConnectorCertificateError):
        cert_error = error.certificate_error
    elif isinstance(error, ssl.SSLCertVerificationError):  # bridge.http1's connection
        cert_error = error
    if cert_error is not None:
        # The verifier's own words (about the certificate: never the request or its token).
        why = getattr(cert_error, "verify_message", None) or type(cert_error).__name__
        return SlurmUnavailable(
            f"{endpoint}: TLS certificate of {base_url} not trusted ({why}): "
            "set slurmCaFile to the CA that signed slurmrestd's certificate",
            endpoint=endpoint,
        )
    if isinstance(error, aiohttp.ClientSSLError | ssl.SSLError):
        return SlurmUnavailable(
            f"{endpoint}: TLS handshake with {base_url} failed: {type(error).__name__}",
            endpoint=endpoint,
        )
    # Only the type: aiohttp's messages carry the request headers (the token).
    return SlurmUnavailable(
        f"{endpoint}: cannot reach slurmrestd: {type(error).__name__}", endpoint=endpoint
    )


class _Response:
    __slots__ = ("body", "status")

    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.body = body


def _not_json(endpoint: str, error: ValueError) -> InvalidInput:
    """A 2xx answer that is not JSON (not UTF-8, nested deeper than the decoder goes,
    truncated): named, never a bare decode error or a retry loop on ``None``."""
    reason = str(error).split("\n")[0][:120] or type(error).__name__
    return InvalidInput(f"{endpoint} response", f"slurmrestd's answer is not JSON: {reason}")


def _too_large(endpoint: str, url: str, limit: int) -> InvalidInput:
    return InvalidInput(
        f"{endpoint} response",
        f"the answer of {url} is larger than slurmMaxResponseBytes ({limit} bytes)",
    )


async def read_capped(resp: aiohttp.ClientResponse, limit: int, endpoint: str, url: str) -> bytes:
    """The body of ``resp``, refused once it is longer than ``limit`` bytes (by its
    Content-Length, or as it arrives), naming the URL (never a header: no token)."""

    def too_large() -> InvalidInput:
        return _too_large(endpoint, url, limit)

    if resp.content_length is not None and resp.content_length > limit:
        raise too_large()
    body = bytearray()
    async for chunk in resp.content.iter_chunked(SCAN_CHUNK_BYTES):
        body += chunk
        if len(body) > limit:
            raise too_large()
    return bytes(body)


class SlurmApi:
    """One session to slurmrestd. Not thread-safe; safe to share between tasks of one loop."""

    def __init__(
        self,
        base_url: str,
        token: TokenProvider,
        *,
        api_version: str = "auto",
        request_timeout_seconds: float = 10.0,
        retry_attempts: int = 4,
        retry_max_wait_seconds: float = 2.0,
        ca_file: str | Path | None = None,
        clock: Clock | None = None,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        if api_version != "auto" and api_version not in SUPPORTED_VERSIONS:
            raise ConfigError("slurmApiVersion", f"must be 'auto' or one of {SUPPORTED_VERSIONS}")
        if request_timeout_seconds <= 0:
            raise ConfigError("slurmRequestTimeoutSeconds", "must be > 0")
        self._base = base_url.rstrip("/")
        self._path = urlsplit(self._base).path  # a prefix the server is mounted under
        self._ssl = client_tls_context(ca_file) if self._base.startswith("https://") else None
        self._token = token
        self._api_version = api_version
        self._timeout = aiohttp.ClientTimeout(total=request_timeout_seconds)
        self._bulk_timeout = aiohttp.ClientTimeout(
            total=max(request_timeout_seconds * BULK_TIMEOUT_FACTOR, BULK_TIMEOUT_MIN_SECONDS)
        )
        self._retry_attempts = max(1, retry_attempts)
        self._retry_max_wait = retry_max_wait_seconds
        self._clock = clock or SystemClock()
        self._max_body = max_response_bytes
        self._session: aiohttp.ClientSession | None = None
        # The plain requests' connections (bridge.http1: a third of aiohttp's CPU per
        # request); the streamed whole-table reads use the aiohttp session.
        self._lean: Http1Pool | None = None
        self._codec: Codec | None = None if api_version == "auto" else codec_for(api_version)
        self._sharing_codec: Codec | None = None  # sharing_codec's choice
        self._codec_lock = asyncio.Lock()

    @classmethod
    def from_config(cls, cfg: BridgeConfig, *, clock: Clock | None = None) -> Self:
        """The client of ``cfg`` (each component builds it once, at start: an ``http://``
        URL to another host is logged as a warning here, :func:`warn_if_plaintext`)."""
        warn_if_plaintext(cfg.slurm_rest_api, cfg.slurm_ca_file)
        return cls(
            cfg.slurm_rest_api,
            TokenProvider(cfg.slurm_token_file, cfg.slurm_user_name),
            api_version=cfg.slurm_api_version,
            request_timeout_seconds=cfg.slurm_request_timeout_seconds,
            ca_file=cfg.slurm_ca_file,
            clock=clock,
            max_response_bytes=cfg.slurm_max_response_bytes,
        )

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"{name}(base_url={self._base!r}, api_version={self._api_version!r})"

    # ------------------------------------------------------------------ lifecycle
    async def __aenter__(self) -> Self:
        self._session_or_open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._lean is not None:
            await self._lean.close()
            self._lean = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _session_or_open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = SlurmConnector(ssl=self._ssl if self._ssl is not None else True)
            self._session = aiohttp.ClientSession(timeout=self._timeout, connector=connector)
        return self._session

    # ------------------------------------------------------------------ transport
    async def _send(
        self,
        method: str,
        path: str,
        *,
        endpoint: str,
        body: Any = None,
        params: Mapping[str, str] | Sequence[tuple[str, str]] | None = None,
        bulk: bool = False,
        stream: Callable[[aiohttp.StreamReader], Awaitable[Mapping[str, Any]]] | None = None,
        accept: Callable[[Any], bool] | None = None,
    ) -> _Response:
        """One HTTP exchange: the decoded answer, or a classified SlurmError.

        ``bulk``: a whole-table answer, allowed the longer bulk timeout. ``stream``: reads a
        successful answer's body itself (chunk by chunk) and returns what is left of it to
        check for Slurm's ``errors[]``; an error answer is always read whole. ``accept``:
        an answer it says yes to is returned whatever its status and ``errors[]`` say."""
        timeout = self._bulk_timeout if bulk else self._timeout
        headers = self._token.headers()
        headers["Accept"] = "application/json"
        data = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            data = fastjson.dumps(body)
        started = self._clock.monotonic()
        failure: SlurmError | None = None
        status, raw = 0, b""
        streamed: Mapping[str, Any] | None = None
        try:
            if stream is None:
                status, raw = await self._exchange(method, path, headers, data, params, timeout)
            else:  # a whole-table read, chunk by chunk, on the aiohttp session
                url = self._base + path
                async with self._session_or_open().request(
                    method, url, headers=headers, data=data, params=params, timeout=timeout
                ) as resp:
                    status = resp.status
                    if status >= 400:
                        raw = await read_capped(resp, self._max_body, endpoint, url)
                    else:
                        streamed = await stream(resp.content)
        except BodyTooLarge:
            raise _too_large(endpoint, self._base + path, self._max_body) from None
        except (TimeoutError, aiohttp.ClientError, OSError) as e:
            failure = _transport_failure(e, endpoint, timeout, self._base)
        del headers
        if failure is not None:
            # Raised outside the except block: no __context__ holding the transport's error.
            raise failure
        parsed: Any = streamed
        text = ""
        if streamed is None:
            try:
                parsed = fastjson.loads(raw) if raw else None
            except ValueError as e:
                text = raw.decode("utf-8", "replace").strip()[:200]
                if status < 400:
                    raise _not_json(endpoint, e) from None
        _log.debug(
            "slurm_request",
            endpoint=endpoint,
            method=method,
            status=status,
            seconds=round(self._clock.monotonic() - started, 4),
        )
        if accept is None or not accept(parsed):
            self._raise_for_errors(endpoint, status, parsed, text)
        return _Response(status, parsed)

    async def _exchange(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        data: bytes | None,
        params: Mapping[str, str] | Sequence[tuple[str, str]] | None,
        limits: aiohttp.ClientTimeout,
    ) -> tuple[int, bytes]:
        """A plain request, on :mod:`bridge.http1`'s connections: ``(status, body)``."""
        if self._lean is None:
            self._lean = Http1Pool(self._base, ssl_context=self._ssl, limit=SLURM_CONNECTIONS)
        target = http1.target(self._path + path, params)
        answer = await self._lean.request(
            method,
            target,
            headers=headers,
            body=data,
            seconds=limits.total or BULK_TIMEOUT_MIN_SECONDS,
            max_body=self._max_body,
        )
        return answer.status, answer.body

    def _raise_for_errors(self, endpoint: str, status: int, parsed: Any, text: str) -> None:
        """Raise the classified SlurmError an answer (HTTP status, ``errors[]``) carries."""
        codec = self._codec or CODECS[0]()
        errors = [e for e in codec.errors(parsed) if e.error_number]
        if status >= 400 or errors:
            first = errors[0] if errors else None
            if first is None and isinstance(parsed, Mapping):
                described = codec.errors(parsed)
                text = described[0].text if described else text
            raise classify_slurm_error(
                endpoint=endpoint,
                status=status,
                error_number=first.error_number if first else 0,
                slurm_message=first.text if first else text,
            )

    async def _scan(
        self, path: str, *, endpoint: str, key: str, pick: Callable[[Any], T | None]
    ) -> tuple[list[T], Mapping[str, Any]]:
        """One streamed GET of a whole-table answer: ``pick`` of each item of its array
        ``key`` (None: dropped), and its other top-level keys. The body is decoded chunk by chunk
        (:class:`~bridge.slurm.stream.ArrayStream`), never held whole."""
        kept: list[T] = []
        seen = 0

        async def read(content: aiohttp.StreamReader) -> Mapping[str, Any]:
            nonlocal seen
            stream = ArrayStream(
                key,
                max_item_chars=self._max_body,
                source=f"{endpoint} response ({self._base}{path})",
            )

            def take(items: list[Any]) -> None:
                nonlocal seen
                seen += len(items)
                kept.extend(p for p in map(pick, items) if p is not None)

            async for chunk in content.iter_chunked(SCAN_CHUNK_BYTES):
                take(stream.feed(chunk))
            take(stream.close())
            return stream.rest

        resp = await self._send("GET", path, endpoint=endpoint, bulk=True, stream=read)
        _log.debug("slurm_scan", endpoint=endpoint, items=seen, kept=len(kept))
        rest: Mapping[str, Any] = resp.body
        return kept, rest

    async def request(
        self,
        method: str,
        path: str,
        *,
        endpoint: str,
        idempotent: bool,
        body: Any = None,
        params: Mapping[str, str] | Sequence[tuple[str, str]] | None = None,
        bulk: bool = False,
        accept: Callable[[Any], bool] | None = None,
    ) -> _Response:
        """One call of the API (``endpoint`` names it in errors, logs and metrics); retried
        on SlurmUnavailable when ``idempotent``, sent once otherwise."""
        send = functools.partial(
            self._send,
            method,
            path,
            endpoint=endpoint,
            body=body,
            params=params,
            bulk=bulk,
            accept=accept,
        )
        if not idempotent:
            return await send()
        return await self._retried(send, endpoint)

    async def _retried(self, send: Callable[[], Awaitable[T]], endpoint: str) -> T:
        """``send()``, tried again on SlurmUnavailable (idempotent calls only): at most
        ``retry_attempts`` tries, 0.1 s between the first two, doubling up to
        ``retry_max_wait_seconds``; the last failure is raised. A plain loop: a retry
        object per call cost ~0.1-0.2 ms of CPU on every read (docs/benchmarks.md)."""
        attempt = 1
        while True:
            if attempt > 1:
                _log.info("slurm_retry", endpoint=endpoint, attempt=attempt)
            try:
                return await send()
            except SlurmUnavailable:
                if attempt >= self._retry_attempts:
                    raise
            await self._clock.sleep(backoff_delay(0.1, attempt - 1, self._retry_max_wait))
            attempt += 1

    # ------------------------------------------------------------------ version
    async def codec(self) -> Codec:
        """The codec in use; with ``auto``, read ``/openapi/v3`` once and cache the choice."""
        if self._codec is not None:
            return self._codec
        async with self._codec_lock:
            if self._codec is None:
                served = await self.served_versions()
                for cls in CODECS:
                    if cls.version in served:
                        self._codec = cls()
                        _log.info("slurm_api_version", version=cls.version, auto=True)
                        break
                else:
                    raise ConfigError(
                        "slurmApiVersion",
                        f"slurmrestd serves {sorted(served) or 'nothing'}; "
                        f"this client knows {SUPPORTED_VERSIONS}",
                    )
        return self._codec

    async def sharing_codec(self) -> Codec:
        """The codec whose job records say which jobs asked whole nodes (``shared``): the
        one in use when it does, else the newest other version slurmrestd serves that
        does (v0.0.44 beside v0.0.45), else the one in use. Read once, cached."""
        c = await self.codec()
        if c.reports_shared:
            return c
        if self._sharing_codec is None:
            served = await self.served_versions()
            self._sharing_codec = next(
                (cls() for cls in CODECS if cls.reports_shared and cls.version in served), c
            )
        return self._sharing_codec

    async def served_versions(self) -> frozenset[str]:
        """The ``/slurm/<version>/`` API versions the server's OpenAPI document lists."""
        resp = await self.request("GET", OPENAPI_PATH, endpoint="openapi", idempotent=True)
        paths = resp.body.get("paths", {}) if isinstance(resp.body, Mapping) else {}
        return frozenset(p.split("/")[2] for p in paths if p.startswith("/slurm/v"))


__all__ = ["SlurmApi"]
