"""The request path to the Kubernetes API server: one session, a timeout on every request,
and ONE mapping of answers to the bridge's error tree.

Decisions (and the kubernetes_asyncio pitfalls behind them):

* Objects are plain dicts, exactly the JSON the server sent (:data:`KubeObject`). The pure
  translation layer consumes dicts; no generated model leaves the client. Every request
  goes through :meth:`KubeApi._send` on kubernetes_asyncio's aiohttp session and
  credentials (:mod:`bridge.kube.auth`), JSON by :mod:`bridge.fastjson`: the generated
  models and ``call_api`` are never used (the typed binding call raises ``ValueError`` on
  the ``Status`` the server answers with, custom resources have no model, and
  ``call_api``'s serializer cost 5-12% of the scheduler's CPU).
* Every request carries a timeout (``kubeRequestTimeoutSeconds``); kubernetes_asyncio has
  none by default.
* Errors are mapped in ONE place, :func:`error_for_status` / :func:`_translate`, by HTTP
  status (and exception class for transport failures), never by message text.

The verbs build on this: :mod:`bridge.kube.fetching`, :mod:`bridge.kube.creating`,
:mod:`bridge.kube.patching`, :mod:`bridge.kube.deleting`, and the watch
(:mod:`bridge.kube.watch`, on :meth:`KubeApi.open_stream`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

import aiohttp
from kubernetes_asyncio.client import Configuration
from kubernetes_asyncio.client.exceptions import ApiException

from bridge import fastjson, http1
from bridge.clock import Clock, SystemClock
from bridge.config import BridgeConfig
from bridge.errors import (
    ConfigError,
    KubeConflict,
    KubeError,
    KubeForbidden,
    KubeGone,
    KubeInvalid,
    KubeNotFound,
    KubeTimeout,
    KubeUnavailable,
)
from bridge.http1 import Http1Pool
from bridge.kube.auth import load_configuration, open_session, tls_context
from bridge.kube.resources import KubeObject


# --------------------------------------------------------------------------- answers
def answer_object(status: int, data: bytes, what: str) -> KubeObject:
    """A request's answer as an object: a non-2xx status raises the mapped
    :class:`KubeError`, an empty body is ``{}``, a body that is not JSON is
    :class:`KubeUnavailable`."""
    if not 200 <= status < 300:
        raise error_for_status(status, data, what)
    if not data:
        return {}
    try:
        parsed = fastjson.loads(data)
    except ValueError:
        raise KubeUnavailable(f"{what}: answer is not JSON", status=status) from None
    return parsed if isinstance(parsed, dict) else {"items": parsed}


# --------------------------------------------------------------------------- errors
def status_text(body: bytes | str | None) -> tuple[str, str]:
    """``(reason, message)`` of a ``Status`` body, for messages only (never to classify)."""
    if not body:
        return "", ""
    try:
        data = fastjson.loads(body)
    except (ValueError, UnicodeDecodeError):
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        return "", text[:300]
    if not isinstance(data, dict):
        return "", ""
    return str(data.get("reason") or ""), str(data.get("message") or "")


def error_for_status(status: int, body: bytes | str | None, what: str) -> KubeError:
    """THE mapping from an HTTP status to the bridge's error tree."""
    reason, message = status_text(body)
    text = (
        f"{what}: HTTP {status}"
        + (f" {reason}" if reason else "")
        + (f": {message}" if message else "")
    )
    cls: type[KubeError]
    if status == 409:
        cls = KubeConflict
    elif status == 404:
        cls = KubeNotFound
    elif status == 410:
        cls = KubeGone
    elif status in (401, 403):
        cls = KubeForbidden
    elif status in (400, 415, 422):
        cls = KubeInvalid
    elif status == 429 or status >= 500:
        cls = KubeUnavailable
    else:
        cls = KubeError
    return cls(text, status=status, reason=reason)


def _translate(exc: BaseException, what: str) -> KubeError:
    """Transport failures -> KubeTimeout / KubeUnavailable; ApiException -> by status."""
    if isinstance(exc, KubeError):
        return exc
    if isinstance(exc, ApiException):
        return error_for_status(int(exc.status or 0), exc.body, what)
    # aiohttp's ServerTimeoutError is both a ClientError and a TimeoutError: test timeouts first.
    if isinstance(exc, TimeoutError):
        return KubeTimeout(f"{what}: no answer within the request timeout")
    if isinstance(exc, aiohttp.ClientError | OSError):
        return KubeUnavailable(f"{what}: {type(exc).__name__}: {exc}")
    raise exc


# --------------------------------------------------------------------------- transport
def _encoded(body: Any) -> bytes | None:
    """A request body: bytes as given, anything else JSON (:mod:`bridge.fastjson`)."""
    if body is None:
        return None
    return body if isinstance(body, bytes) else fastjson.dumps(body)


class KubeApi:
    """One aiohttp session to the API server, with a timeout on every request.

    Build it with :meth:`connect` (kubeconfig or in-cluster) or :meth:`from_config`; close
    it with :meth:`close` or ``async with``.
    """

    def __init__(
        self,
        configuration: Configuration,
        *,
        request_timeout: float,
        clock: Clock | None = None,
    ) -> None:
        if request_timeout <= 0:
            raise ConfigError("kubeRequestTimeoutSeconds", "must be > 0")
        self.configuration = configuration
        self.request_timeout = request_timeout
        self.clock: Clock = clock or SystemClock()
        self._api = open_session(configuration)
        self._lean: Http1Pool | None = None  # the plain requests' connections (raw())

    # -- construction -----------------------------------------------------------------
    @classmethod
    async def connect(
        cls,
        *,
        kubeconfig: Path | None,
        request_timeout: float,
        context: str | None = None,
        clock: Clock | None = None,
    ) -> Self:
        """From ``kubeconfig``; when None, in-cluster, then ``~/.kube/config``."""
        conf = await load_configuration(kubeconfig, context=context)
        return cls(conf, request_timeout=request_timeout, clock=clock)

    @classmethod
    async def from_config(cls, cfg: BridgeConfig, *, clock: Clock | None = None) -> Self:
        return await cls.connect(
            kubeconfig=cfg.kubeconfig,
            request_timeout=cfg.kube_request_timeout_seconds,
            clock=clock,
        )

    def new_session(self) -> Self:
        """Another client on the same credentials with its OWN aiohttp session.

        Each watch owns one, so a long-lived stream never holds a connection of the
        request pool; close it with the watch.
        """
        return type(self)(
            self.configuration, request_timeout=self.request_timeout, clock=self.clock
        )

    async def close(self) -> None:
        if self._lean is not None:
            await self._lean.close()
        await self._api.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- the request path -------------------------------------------------------------
    def _lean_pool(self) -> Http1Pool | None:
        """The connections of the plain requests (:mod:`bridge.http1`: a third of
        aiohttp's CPU per request); None behind a proxy (aiohttp's session speaks to it)."""
        if self._lean is None and not self._api.rest_client.proxy:
            conf = self.configuration
            host = str(conf.host)
            self._lean = Http1Pool(
                host,
                ssl_context=tls_context(conf) if host.startswith("https://") else None,
                server_hostname=conf.tls_server_name,
                limit=conf.connection_pool_maxsize,
            )
        return self._lean

    async def _prepared(
        self,
        path: str,
        query: Sequence[tuple[str, Any]],
        content_type: str,
        accept: str = "application/json",
    ) -> tuple[dict[str, str], str]:
        """A request's headers, with the credentials as the session has them now
        (``update_params_for_auth``: a rotated token is picked up), and its target (the
        path, quoted as aiohttp would, and the query)."""
        api = self._api
        headers = {
            **api.default_headers,
            "Accept": accept,
            "Content-Type": content_type,
        }
        params = list(query)
        await api.update_params_for_auth(headers, params, ["BearerToken"])
        return headers, http1.target(path, params)

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, Any]] = (),
        body: Any = None,
        content_type: str = "application/json",
        accept: str = "application/json",
        client_timeout: aiohttp.ClientTimeout,
        what: str,
    ) -> aiohttp.ClientResponse:
        """One request on kubernetes_asyncio's session and credentials, sent directly.

        ``ApiClient.call_api`` walks every body and header through its generic
        serializer and encodes with :mod:`json`: 5-12% of the scheduler's CPU in a burst
        (profiled). The credentials still come from it (``update_params_for_auth``: a
        rotated in-cluster token or an exec plugin's refresh), and the session carries
        its TLS settings; the proxy was read once (:func:`bridge.kube.auth.open_session`)."""
        rest = self._api.rest_client
        try:
            headers, target = await self._prepared(path, query, content_type, accept)
            url = str(self.configuration.host) + target
            data = _encoded(body)
            extra: dict[str, Any] = {}
            if rest.proxy:
                extra["proxy"] = rest.proxy
                if rest.proxy_headers:
                    extra["proxy_headers"] = rest.proxy_headers
            if rest.server_hostname:
                extra["server_hostname"] = rest.server_hostname
            resp: aiohttp.ClientResponse = await rest.pool_manager.request(
                method, url, data=data, headers=headers, timeout=client_timeout, **extra
            )
        except (ApiException, TimeoutError, aiohttp.ClientError, OSError) as e:
            raise _translate(e, what) from e
        return resp

    async def raw(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, Any]] = (),
        body: Any = None,
        content_type: str = "application/json",
        accept: str = "application/json",
        what: str = "",
    ) -> tuple[int, bytes]:
        """One request: ``(status, body)``; HTTP errors are NOT raised (caller decides).
        ``accept``: the media types asked for (e.g.
        :data:`bridge.kube.fetching.METADATA_LIST`)."""
        what = what or f"{method} {path}"
        lean = self._lean_pool()
        if lean is not None:
            try:
                headers, target = await self._prepared(path, query, content_type, accept)
                answer = await lean.request(
                    method,
                    target,
                    headers=headers,
                    body=_encoded(body),
                    seconds=self.request_timeout,
                )
            except (ApiException, TimeoutError, OSError) as e:
                raise _translate(e, what) from e
            return answer.status, answer.body
        timeout = aiohttp.ClientTimeout(total=self.request_timeout)
        resp = await self._send(
            method,
            path,
            query=query,
            body=body,
            content_type=content_type,
            accept=accept,
            client_timeout=timeout,
            what=what,
        )
        try:
            data = await resp.read()
        except (TimeoutError, aiohttp.ClientError, OSError) as e:
            raise _translate(e, what) from e
        finally:
            resp.release()
        return resp.status, data

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, Any]] = (),
        body: Any = None,
        content_type: str = "application/json",
        what: str = "",
    ) -> KubeObject:
        """One request; a non-2xx answer raises the mapped :class:`KubeError`."""
        what = what or f"{method} {path}"
        status, data = await self.raw(
            method, path, query=query, body=body, content_type=content_type, what=what
        )
        return answer_object(status, data, what)

    async def open_stream(
        self, path: str, query: Sequence[tuple[str, Any]], *, read_timeout: float, what: str
    ) -> aiohttp.ClientResponse:
        """Start a streaming GET (watch). The caller reads lines and releases the response.

        Connecting is bounded by the request timeout; each read by ``read_timeout`` (the
        server's ``timeoutSeconds`` plus a margin), so a silent dead connection is noticed.
        """
        timeout = aiohttp.ClientTimeout(
            connect=self.request_timeout,
            sock_connect=self.request_timeout,
            sock_read=read_timeout,
        )
        resp = await self._send("GET", path, query=query, client_timeout=timeout, what=what)
        if not 200 <= resp.status < 300:
            try:
                data = await resp.read()
            except (TimeoutError, aiohttp.ClientError, OSError) as e:
                raise _translate(e, what) from e
            finally:
                resp.release()
            raise error_for_status(resp.status, data, what)
        return resp


__all__ = ["KubeApi", "answer_object", "error_for_status", "status_text"]
