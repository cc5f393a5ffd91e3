"""Async client for slurmrestd (REST API v0.0.43, v0.0.44, v0.0.45).

One :class:`SlurmClient` owns one aiohttp session; use it as an async context manager.
Every request carries a fresh JWT from :class:`~bridge.slurm.token.TokenProvider` and a
timeout (``slurmRequestTimeoutSeconds``). An ``https://`` URL is always verified
(certificate and host name, against ``slurmCaFile`` or the system trust store);
:meth:`SlurmClient.from_config` logs ``slurm_plaintext_url`` for ``http://`` to a host that
is not loopback. Answers are decoded by the pure codec of the chosen API version
(``slurmApiVersion``: pinned, or ``auto`` = the newest of v0.0.45/44/43 that the server's
``/openapi/v3`` document lists; read once, cached).

Errors are classified only by :func:`bridge.errors.classify_slurm_error` (HTTP status and
Slurm error numbers, never text).

Retries (on :class:`~bridge.errors.SlurmUnavailable` / ``SlurmTimeout`` only)
apply to idempotent calls: every GET, cancel, node state updates and node deletion.

**Submit is never retried.** A submit whose answer was lost (timeout, connection reset,
5xx) may or may not have created a job: Slurm has no idempotency key. The rule is:

1. the caller gives every job an identity it can find again: ``admin_comment`` (the
   bridge writes the group's UID there) and/or ``name``;
2. after a ``SlurmUnavailable`` from :meth:`SlurmClient.submit`, the caller calls
   :meth:`SlurmClient.find_jobs_by_admin_comment` (one ``GET /jobs/``) and adopts an
   active job it finds instead of submitting again;
3. only when none is found does it submit again; a periodic sweep cancels strays (jobs
   whose identity matches no live group).
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import ssl
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar
from urllib.parse import urlsplit

import aiohttp

from bridge import fastjson
from bridge.clock import Clock, SystemClock, backoff_delay
from bridge.config import BridgeConfig
from bridge.errors import (
    ConfigError,
    InvalidInput,
    SlurmBusy,
    SlurmError,
    SlurmNotFound,
    SlurmTimeout,
    SlurmUnavailable,
    classify_slurm_error,
)
from bridge.logging import get_logger
from bridge.models import JobSpec
from bridge.slurm.codec import CODECS, SUPPORTED_VERSIONS, Codec, codec_for
from bridge.slurm.models import (
    Allocated,
    AllocateOutcome,
    AllocationRefused,
    JobList,
    JobState,
    JobStateItem,
    NodeResources,
    PingResult,
    SlurmJob,
    SlurmNode,
    SlurmPartition,
    SubmitResult,
)
from bridge.slurm.stream import ArrayStream
from bridge.slurm.token import TokenProvider
from bridge.slurm.transport import SlurmConnector

# ESLURM_ALREADY_DONE: "Job/step already completing or completed".
ALREADY_DONE = 2021
# ESLURM_NODE_ALREADY_EXISTS: "Node already exists in the node table" (POST /new/node/).
NODE_ALREADY_EXISTS = 2168


def _queued_despite_errors(parsed: Any) -> bool:
    """A submit answer with a job id: the job is queued, whatever ``errors[]`` says.
    slurmctld queues a job and then reports why it cannot start yet as the submit's return
    code: topology/block's "No suitable topology unit found" (7203) comes back as HTTP 500
    with ``job_id`` set and the job PENDING (measured on 26.05). Raising would make the
    caller submit the same group again."""
    job_id = parsed.get("job_id") if isinstance(parsed, Mapping) else None
    return isinstance(job_id, int) and not isinstance(job_id, bool) and job_id > 0


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
# job ids per GET /jobs/state/ request (repeated job_id=..., ~15 bytes each): slurmrestd
# 26.05 answered 5,000 in 0.1 s and refused 10,000 ("Insane message length")
STATE_IDS_PER_URL = 4000


def state_requests(ids: int) -> int:
    """How many requests :meth:`SlurmClient.list_job_states` makes for ``ids`` job ids."""
    return max(1, -(-ids // STATE_IDS_PER_URL))


_log = get_logger("bridge.slurm")
T = TypeVar("T")


def _transport_failure(
    error: BaseException, endpoint: str, timeout: aiohttp.ClientTimeout, base_url: str
) -> SlurmError:
    """The SlurmError for a request that got no answer."""
    if isinstance(error, TimeoutError):
        return SlurmTimeout(f"{endpoint}: no answer within {timeout.total}s", endpoint=endpoint)
    if isinstance(error, aiohttp.ClientConnectorCertificateError):
        # The verifier's own words (about the certificate: never the request or its token).
        cert_error = error.certificate_error
        why = getattr(cert_error, "verify_message", None) or type(cert_error).__name__
        return SlurmUnavailable(
            f"{endpoint}: TLS certificate of {base_url} not trusted ({why}): "
            "set slurmCaFile to the CA that signed slurmrestd's certificate",
            endpoint=endpoint,
        )
    if isinstance(error, aiohttp.ClientSSLError):
        return SlurmUnavailable(
            f"{endpoint}: TLS handshake with {base_url} failed: {type(error).__name__}",
            endpoint=endpoint,
        )
    # Only the type: aiohttp's messages carry the request headers (the token).
    return SlurmUnavailable(
        f"{endpoint}: cannot reach slurmrestd: {type(error).__name__}", endpoint=endpoint
    )


def client_tls_context(ca_file: str | Path | None) -> ssl.SSLContext:
    """The context to reach an ``https://`` slurmrestd: the certificate and host name are
    always verified (there is no "skip verify"), against ``ca_file`` when given, else the
    system's trust store; TLS 1.2 or newer."""
    try:
        ctx = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
    except (OSError, ssl.SSLError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise ConfigError("slurmCaFile", f"cannot load CA file {ca_file}: {reason}") from None
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


def is_loopback_url(url: str) -> bool:
    """True when ``url``'s host is ``localhost`` or a loopback address."""
    host = urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def warn_if_plaintext(url: str, ca_file: Path | None = None) -> bool:
    """Log ``slurm_plaintext_url`` (a warning) when ``url`` sends the Slurm token in clear
    over a network (``http://`` to a host that is not loopback); True when it did."""
    if url.startswith("https://"):
        return False
    if ca_file is not None:
        _log.warning("slurm_ca_file_unused", url=url, ca_file=str(ca_file), reason="not https")
    if is_loopback_url(url):
        return False
    _log.warning(
        "slurm_plaintext_url",
        url=url,
        reason="the Slurm token travels in clear: use https:// (and slurmCaFile)",
    )
    return True


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


async def read_capped(resp: aiohttp.ClientResponse, limit: int, endpoint: str, url: str) -> bytes:
    """The body of ``resp``, refused once it is longer than ``limit`` bytes (by its
    Content-Length, or as it arrives), naming the URL (never a header: no token)."""

    def too_large() -> InvalidInput:
        return InvalidInput(
            f"{endpoint} response",
            f"the answer of {url} is larger than slurmMaxResponseBytes ({limit} bytes)",
        )

    if resp.content_length is not None and resp.content_length > limit:
        raise too_large()
    body = bytearray()
    async for chunk in resp.content.iter_chunked(SCAN_CHUNK_BYTES):
        body += chunk
        if len(body) > limit:
            raise too_large()
    return bytes(body)


class SlurmClient:
    """slurmrestd client. Not thread-safe; safe to share between tasks of one loop."""

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
        self._codec: Codec | None = None if api_version == "auto" else codec_for(api_version)
        self._codec_lock = asyncio.Lock()

    @classmethod
    def from_config(cls, cfg: BridgeConfig, *, clock: Clock | None = None) -> SlurmClient:
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
        return f"SlurmClient(base_url={self._base!r}, api_version={self._api_version!r})"

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
    ) -> _Response:
        """One HTTP exchange: the decoded answer, or a classified SlurmError.

        ``bulk``: a whole-table answer, allowed the longer bulk timeout. ``stream``: reads a
        successful answer's body itself (chunk by chunk) and returns what is left of it to
        check for Slurm's ``errors[]``; an error answer is always read whole."""
        timeout = self._bulk_timeout if bulk else self._timeout
        headers = self._token.headers()
        headers["Accept"] = "application/json"
        data = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            data = fastjson.dumps(body)
        session = self._session_or_open()
        started = self._clock.monotonic()
        failure: SlurmError | None = None
        status, raw = 0, b""
        streamed: Mapping[str, Any] | None = None
        try:
            async with session.request(
                method,
                self._base + path,
                headers=headers,
                data=data,
                params=params,
                timeout=timeout,
            ) as resp:
                status = resp.status
                if stream is None or status >= 400:
                    raw = await read_capped(resp, self._max_body, endpoint, self._base + path)
                else:
                    streamed = await stream(resp.content)
        except (TimeoutError, aiohttp.ClientError) as e:
            failure = _transport_failure(e, endpoint, timeout, self._base)
        del headers
        if failure is not None:
            # Raised outside the except block: no __context__ holding the aiohttp error.
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
        if not (endpoint == "job_submit" and _queued_despite_errors(parsed)):
            self._raise_for_errors(endpoint, status, parsed, text)
        return _Response(status, parsed)

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

    async def _call(
        self,
        method: str,
        path: str,
        *,
        endpoint: str,
        idempotent: bool,
        body: Any = None,
        params: Mapping[str, str] | Sequence[tuple[str, str]] | None = None,
        bulk: bool = False,
    ) -> _Response:
        send = functools.partial(
            self._send, method, path, endpoint=endpoint, body=body, params=params, bulk=bulk
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

    async def served_versions(self) -> frozenset[str]:
        """The ``/slurm/<version>/`` API versions the server's OpenAPI document lists."""
        resp = await self._call("GET", OPENAPI_PATH, endpoint="openapi", idempotent=True)
        paths = resp.body.get("paths", {}) if isinstance(resp.body, Mapping) else {}
        return frozenset(p.split("/")[2] for p in paths if p.startswith("/slurm/v"))

    async def api_version(self) -> str:
        return (await self.codec()).version

    # ------------------------------------------------------------------ misc
    async def ping(self) -> tuple[PingResult, ...]:
        """slurmctld reachability. NOT an auth check (a bad token still gets HTTP 200)."""
        c = await self.codec()
        resp = await self._call("GET", c.path("ping/"), endpoint="ping", idempotent=True)
        return c.decode_ping(resp.body)

    async def diag(self) -> dict[str, Any]:
        """slurmctld statistics (``GET /diag/``): needs a valid token."""
        c = await self.codec()
        resp = await self._call("GET", c.path("diag/"), endpoint="diag", idempotent=True)
        stats = resp.body.get("statistics") if isinstance(resp.body, Mapping) else None
        return dict(stats) if isinstance(stats, Mapping) else {}

    # ------------------------------------------------------------------ jobs
    async def submit_result(self, spec: JobSpec) -> SubmitResult:
        """Submit ``spec`` once (never retried: see the module docstring)."""
        c = await self.codec()
        body = c.encode_submit(spec)
        resp = await self._call(
            "POST", c.path("job/submit"), endpoint="job_submit", idempotent=False, body=body
        )
        result = c.decode_submit(resp.body)
        for w in result.warnings:
            _log.info("slurm_submit_warning", job_id=result.job_id, warning=w.description)
        return result

    async def submit(self, spec: JobSpec) -> int:
        """Submit ``spec`` (external placeholder or batch) and return the job id."""
        return (await self.submit_result(spec)).job_id

    async def allocate(self, spec: JobSpec) -> AllocateOutcome:
        """Start the external job ``spec`` NOW (``POST job/allocate``, ``immediate``).

        :class:`Allocated`: it is RUNNING when this returns (~5 ms on 26.05).
        :class:`AllocationRefused`: Slurm cannot start it now (busy, or a job pending in
        the partition comes first); it left a FAILED record with ``spec``'s name and
        comments, and no job id. Other rejections raise :class:`SlurmRejected`; a lost
        answer raises :class:`SlurmUnavailable` and, as for :meth:`submit`, the job may
        exist: never retried here, the caller looks it up by identity.
        """
        c = await self.codec()
        body = c.encode_allocate(spec)
        try:
            resp = await self._call(
                "POST", c.path("job/allocate"), endpoint="job_allocate", idempotent=False, body=body
            )
        except SlurmBusy as e:
            return AllocationRefused(error_number=e.error_number, message=e.slurm_message)
        result = c.decode_submit(resp.body)
        return Allocated(job_id=result.job_id, user_msg=result.user_msg, warnings=result.warnings)

    async def get_job(self, job_id: int) -> SlurmJob:
        c = await self.codec()
        resp = await self._call(
            "GET", c.path(f"job/{int(job_id)}"), endpoint="job_get", idempotent=True
        )
        job = c.decode_job_record(resp.body, int(job_id))
        if job is None:
            raise SlurmNotFound(f"job_get: job {job_id} not found", endpoint="job_get")
        return job

    async def get_job_resources(self, job_id: int) -> tuple[NodeResources, ...]:
        """What Slurm allocated to a running job, per node: core bitmap and GRES indices
        (``GET /resources/{job_id}``; v0.0.43 has no such endpoint: v0.0.44's is used)."""
        c = await self.codec()
        path = c.path(f"resources/{int(job_id)}")
        if c.version == "v0.0.43":
            path = codec_for("v0.0.44").path(f"resources/{int(job_id)}")
        resp = await self._call("GET", path, endpoint="resources_get", idempotent=True)
        return c.decode_resources(resp.body)

    async def get_jobs(self, job_ids: Iterable[int], *, concurrency: int = 16) -> list[SlurmJob]:
        """``GET /job/{id}`` of each, ``concurrency`` at a time; the jobs Slurm no longer
        has are left out."""
        sem = asyncio.Semaphore(concurrency)

        async def one(job_id: int) -> SlurmJob | None:
            async with sem:
                try:
                    return await self.get_job(job_id)
                except SlurmNotFound:
                    return None

        return [j for j in await asyncio.gather(*(one(i) for i in job_ids)) if j is not None]

    async def list_jobs(self, update_since: datetime | None = None) -> JobList:
        """``GET /jobs/``; with ``update_since``, nothing at all when no job changed since
        then (cheap: ``unchanged=True``), else the whole table (Slurm's granularity).

        Pass the previous answer's ``last_update`` as the next ``update_since``.

        The whole table includes every job Slurm still remembers (finished ones until
        ``MinJobAge``): tens of MB on a busy cluster, so this one request may take
        :data:`BULK_TIMEOUT_FACTOR` times the request timeout (at least
        :data:`BULK_TIMEOUT_MIN_SECONDS`).
        """
        c = await self.codec()
        params = None
        if update_since is not None:
            params = {"update_time": str(int(update_since.timestamp()))}
        resp = await self._call(
            "GET",
            c.path("jobs/"),
            endpoint="jobs_get",
            idempotent=True,
            params=params,
            bulk=True,
        )
        listed = c.decode_jobs(resp.body)
        if update_since is not None and not listed.jobs and listed.last_update is None:
            # "No job changes since update_time": Slurm sends no jobs and last_update 0.
            return JobList(jobs=(), last_update=update_since, unchanged=True)
        return listed

    async def list_job_states(
        self, job_ids: Sequence[int] | None = None
    ) -> tuple[JobStateItem, ...]:
        """``GET /jobs/state/``: id and state of every job (or of ``job_ids``).

        ``job_ids`` are asked :data:`STATE_IDS_PER_URL` at a time (one request each,
        :func:`state_requests`): never the whole table for them, whose answer takes
        slurmrestd ~10 s at 68,000 jobs (4,000 listed ids: ~0.1 s, measured)."""
        c = await self.codec()
        if not job_ids:
            resp = await self._call(
                "GET", c.path("jobs/state/"), endpoint="jobs_state", idempotent=True
            )
            return c.decode_job_states(resp.body)
        wanted = sorted({int(j) for j in job_ids})
        out: list[JobStateItem] = []
        for i in range(0, len(wanted), STATE_IDS_PER_URL):
            # Repeated job_id parameters: slurmrestd 26.05 answers a CSV list with HTTP 500.
            params = [("job_id", str(j)) for j in wanted[i : i + STATE_IDS_PER_URL]]
            resp = await self._call(
                "GET", c.path("jobs/state/"), endpoint="jobs_state", idempotent=True, params=params
            )
            out += c.decode_job_states(resp.body)
        return tuple(out)

    async def scan_job_states(
        self, keep: Callable[[JobStateItem], bool]
    ) -> tuple[JobStateItem, ...]:
        """The rows of ``GET /jobs/state/`` (every job, finished ones too) that ``keep``
        accepts, read as a stream: memory follows the kept rows (the active jobs, say),
        not Slurm's table (100,000 rows decoded at once were ~100 MB)."""
        c = await self.codec()
        states: dict[tuple[str, ...], JobState] = {}

        def pick(item: Any) -> JobStateItem | None:
            row = c.decode_job_state_row(item, states)
            return row if row is not None and keep(row) else None

        return await self._scan_jobs_array(c.path("jobs/state/"), "jobs_state", pick)

    async def find_jobs_by_admin_comment(
        self, admin_comment: str, *, name: str | None = None, active_only: bool = True
    ) -> tuple[SlurmJob, ...]:
        """Jobs whose ``admin_comment`` equals (or, if it is JSON, contains as a substring
        of the raw text) ``admin_comment``, optionally also matching ``name``.

        The submit-timeout rule: call this before submitting again after a lost answer.
        """
        return await self.scan_jobs(
            lambda j: (
                (
                    j.admin_comment == admin_comment
                    or bool(admin_comment and admin_comment in j.admin_comment)
                )
                and (name is None or j.name == name)
                and (not active_only or j.state.active)
            )
        )

    async def scan_jobs(self, keep: Callable[[SlurmJob], bool]) -> tuple[SlurmJob, ...]:
        """The jobs of ``GET /jobs/`` that ``keep`` accepts, read as a stream: one job is
        decoded at a time and only the kept ones are held, so memory does not grow with
        Slurm's job table (finished jobs included), only with what the caller keeps."""
        c = await self.codec()

        def pick(item: Any) -> SlurmJob | None:
            job = c.decode_job(item) if isinstance(item, Mapping) else None
            return job if job is not None and keep(job) else None

        return await self._scan_jobs_array(c.path("jobs/"), "jobs_get", pick)

    async def _scan_jobs_array(
        self, path: str, endpoint: str, pick: Callable[[Any], T | None]
    ) -> tuple[T, ...]:
        """The picked items of the ``jobs`` array of one streamed, retried GET."""
        kept, _ = await self._retried(
            functools.partial(self._scan, path, endpoint=endpoint, key="jobs", pick=pick),
            endpoint,
        )
        return tuple(kept)

    async def update_job(self, job_id: int, spec: JobSpec) -> None:
        """Update a pending job from ``spec`` (size, resources, time, comments, ...)."""
        c = await self.codec()
        resp = await self._call(
            "POST",
            c.path(f"job/{int(job_id)}"),
            endpoint="job_update",
            idempotent=False,
            body=c.encode_update(spec),
        )
        for err in c.decode_update_results(resp.body):
            raise classify_slurm_error(
                endpoint="job_update",
                status=resp.status,
                error_number=err.error_number,
                slurm_message=err.text,
            )

    async def cancel(self, job_id: int) -> bool:
        """Cancel a job. True: cancelled now; False: it had already ended (success too).

        Unknown id: SlurmNotFound. DELETE reports failures in ``status[]`` with HTTP 200.
        """
        c = await self.codec()
        resp = await self._call(
            "DELETE", c.path(f"job/{int(job_id)}"), endpoint="job_cancel", idempotent=True
        )
        for st in c.decode_cancel(resp.body):
            if st.error is None:
                continue
            if st.error.error_number == ALREADY_DONE:
                return False
            raise classify_slurm_error(
                endpoint="job_cancel",
                status=resp.status,
                error_number=st.error.error_number,
                slurm_message=st.error.text,
            )
        return True

    # ------------------------------------------------------------------ nodes
    async def list_nodes(self, update_since: datetime | None = None) -> tuple[SlurmNode, ...]:
        c = await self.codec()
        params = None
        if update_since is not None:
            params = {"update_time": str(int(update_since.timestamp()))}
        resp = await self._call(
            "GET", c.path("nodes/"), endpoint="nodes_get", idempotent=True, params=params
        )
        return c.decode_nodes(resp.body)

    async def get_node(self, name: str) -> SlurmNode:
        c = await self.codec()
        resp = await self._call("GET", c.path(f"node/{name}"), endpoint="node_get", idempotent=True)
        for node in c.decode_nodes(resp.body):
            if node.name == name:
                return node
        raise SlurmNotFound(f"node_get: node {name!r} not found", endpoint="node_get")

    async def _update_node(self, name: str, body: Callable[[Codec], Any]) -> None:
        c = await self.codec()
        await self._call(
            "POST", c.path(f"node/{name}"), endpoint="node_update", idempotent=True, body=body(c)
        )

    async def _node_state(self, name: str, state: str, reason: str | None) -> None:
        await self._update_node(name, lambda c: c.encode_node_update(state, reason))

    async def drain_node(self, name: str, reason: str) -> None:
        await self._node_state(name, "DRAIN", reason)

    async def resume_node(self, name: str) -> None:
        """Undo DRAIN/DOWN (Slurm's RESUME)."""
        await self._node_state(name, "RESUME", None)

    async def set_node_down(self, name: str, reason: str) -> None:
        await self._node_state(name, "DOWN", reason)

    async def create_external_node(
        self,
        name: str,
        *,
        cpus: int,
        memory_mib: int,
        features: Sequence[str] = (),
        gres: str | None = None,
    ) -> None:
        """Register a ``State=EXTERNAL`` node (needs MaxNodeCount headroom; v0.0.44+).

        Slurm 26.05 refuses ``Gres=gpu:N`` on a dynamic node (no ``File=``; gres.conf is
        not consulted for nodes created at run time): the answer is a SlurmRejected.
        """
        c = await self.codec()
        body = c.encode_new_node(
            name, cpus=cpus, memory_mib=memory_mib, features=features, gres=gres
        )
        path = c.path("new/node/")
        if not c.supports_new_node:
            # v0.0.43 has no /new/node/: the same body is valid for the next version up.
            path = codec_for("v0.0.44").path("new/node/")
        await self._call("POST", path, endpoint="node_create", idempotent=False, body=body)

    async def set_node_comment(self, name: str, comment: str) -> None:
        """Set a node's comment (the bridge marks the external nodes it registered)."""
        await self._update_node(name, lambda c: c.encode_node_comment(comment))

    async def set_node_topology(self, name: str, topology: str) -> None:
        """Set a node's ``Topology=`` (``topology_str``: ``net:block-0``, tree
        ``net:spine:leaf-1``). Slurm refuses a block or topology that topology.yaml lacks
        (2178, "Requested topology configuration is not available")."""
        await self._update_node(name, lambda c: c.encode_node_topology(topology))

    async def add_node_to_partition(self, partition: str, node: str) -> bool:
        """Add ``node`` to the EXISTING ``partition`` (``scontrol update nodes+=``).

        False when the API version has no partition update (before v0.0.45); the node
        then joins partitions only through its features (``NodeSet=... Feature=...``).
        Raises SlurmNotFound when the partition does not exist: Slurm's ``POST
        /partitions/`` would silently create it.
        """
        c = await self.codec()
        if not c.supports_partition_update:
            return False
        await self.get_partition(partition)
        await self._call(
            "POST",
            c.path("partitions/"),
            endpoint="partition_update",
            idempotent=True,
            body=c.encode_partition_nodes(partition, f"+{node}"),
        )
        return True

    async def delete_node(self, name: str) -> None:
        c = await self.codec()
        await self._call("DELETE", c.path(f"node/{name}"), endpoint="node_delete", idempotent=True)

    # ------------------------------------------------------------------ partitions
    async def list_partitions(self) -> tuple[SlurmPartition, ...]:
        c = await self.codec()
        resp = await self._call(
            "GET", c.path("partitions/"), endpoint="partitions_get", idempotent=True
        )
        return c.decode_partitions(resp.body)

    async def get_partition(self, name: str) -> SlurmPartition:
        """One partition; SlurmNotFound when absent (Slurm says so with a 200 + warning)."""
        c = await self.codec()
        resp = await self._call(
            "GET", c.path(f"partition/{name}"), endpoint="partition_get", idempotent=True
        )
        for part in c.decode_partitions(resp.body):
            if part.name == name:
                return part
        raise SlurmNotFound(
            f"partition_get: partition {name!r} not found", endpoint="partition_get"
        )


__all__ = ["SlurmClient", "SlurmError"]
