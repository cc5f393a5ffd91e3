"""The Kubernetes adapter: one client over kubernetes_asyncio 36.1.0.

What it offers the components (scheduler, controller, admission): reads and writes of pods,
nodes, namespaces and the workload objects (PodGroup, JobSet, LeaderWorkerSet, Job),
idempotent binding, and the transport that :mod:`bridge.kube.watch`,
:mod:`bridge.kube.events` and :mod:`bridge.kube.leader` build on.

Decisions (and the kubernetes_asyncio pitfalls behind them):

* Objects are plain dicts, exactly the JSON the server sent (:data:`KubeObject`). The pure
  translation layer consumes dicts; no generated model leaves this module. Every request
  goes through :meth:`KubeClient._send` on kubernetes_asyncio's aiohttp session and
  credentials, JSON by :mod:`bridge.fastjson`: the generated models and ``call_api`` are
  never used (the typed binding call raises ``ValueError`` on the ``Status`` the server
  answers with, custom resources have no model, and ``call_api``'s serializer cost 5-12%
  of the scheduler's CPU).
* Every request carries a timeout (``kubeRequestTimeoutSeconds``); kubernetes_asyncio has
  none by default.
* Errors are mapped in ONE place, :func:`error_for_status` / :func:`_translate`, by HTTP
  status (and exception class for transport failures), never by message text.
* Patches name their content type explicitly; a dict patch of a custom resource would
  otherwise go out as json-patch (400), and strategic merge on a custom resource is 415.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlencode

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.config import ConfigException, load_incluster_config, load_kube_config
from yarl import URL

from bridge import fastjson
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
from bridge.kube.resources import (
    JOBS,
    JOBSETS,
    LEADERWORKERSETS,
    NAMESPACES,
    NODES,
    PODGROUPS,
    PODS,
    KubeObject,
    Resource,
    format_time,
)
from bridge.text import clip
from bridge.wellknown import CONDITION_POD_SCHEDULED

PatchType = Literal["merge", "strategic", "json"]
_CONTENT_TYPES: dict[PatchType, str] = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
}
USER_AGENT = "slurm-bridge"
# How often a read-modify-write retries after a 409 (someone else wrote in between).
CONFLICT_ATTEMPTS = 5
# The longest pod condition (or Failed) message we write: it may quote tenant text.
CONDITION_MESSAGE_MAX = 2048


# --------------------------------------------------------------------------- errors
def _status_body(body: bytes | str | None) -> tuple[str, str]:
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
    reason, message = _status_body(body)
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


# --------------------------------------------------------------------------- client
@dataclass(frozen=True)
class ObjectList:
    """A list answer: the items and the list's resourceVersion (where a watch resumes)."""

    items: list[KubeObject]
    resource_version: str


def _env_read_once(api: ApiClient, configuration: Configuration) -> None:
    """kubernetes_asyncio's session has ``trust_env=True``: aiohttp then reads the proxy
    variables and ``~/.netrc`` in a worker thread for EVERY request (~10% of the
    scheduler's CPU in a burst, py-spy). The proxy for the API server is read once here
    (kept unless it needs credentials aiohttp would only take per request); netrc is
    never needed (bearer tokens and client certificates)."""
    rest = api.rest_client
    if rest.proxy is None:
        try:
            proxy, auth = get_env_proxy_for_url(URL(str(configuration.host)))
        except LookupError:  # no proxy for this host
            proxy, auth = None, None
        if auth is not None:
            return  # a proxy with credentials: leave aiohttp's per-request handling
        if proxy is not None:
            rest.proxy = str(proxy)
    rest.pool_manager._trust_env = False


class KubeClient:
    """One aiohttp session to the API server, with a timeout on every request.

    Build it with :meth:`connect` (kubeconfig or in-cluster) or :meth:`for_host`; close it
    with :meth:`close` or ``async with``.
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
        self._api = ApiClient(configuration)
        self._api.user_agent = USER_AGENT
        _env_read_once(self._api, configuration)

    # -- construction -----------------------------------------------------------------
    @classmethod
    async def connect(
        cls,
        *,
        kubeconfig: Path | None,
        request_timeout: float,
        context: str | None = None,
        clock: Clock | None = None,
    ) -> KubeClient:
        """From ``kubeconfig``; when None, in-cluster, then ``~/.kube/config``.

        ``load_kube_config`` is a coroutine in kubernetes_asyncio; ``load_incluster_config``
        is not.
        """
        conf = Configuration()
        try:
            if kubeconfig is not None:
                await load_kube_config(
                    config_file=str(kubeconfig), context=context, client_configuration=conf
                )
            else:
                try:
                    load_incluster_config(client_configuration=conf)  # type: ignore[no-untyped-call]
                except ConfigException:
                    await load_kube_config(context=context, client_configuration=conf)
        except (ConfigException, OSError) as e:
            raise ConfigError("kubeconfig", f"cannot load Kubernetes credentials: {e}") from None
        return cls(conf, request_timeout=request_timeout, clock=clock)

    @classmethod
    async def from_config(cls, cfg: BridgeConfig, *, clock: Clock | None = None) -> KubeClient:
        return await cls.connect(
            kubeconfig=cfg.kubeconfig,
            request_timeout=cfg.kube_request_timeout_seconds,
            clock=clock,
        )

    @classmethod
    def for_host(
        cls,
        host: str,
        *,
        request_timeout: float,
        token: str | None = None,
        clock: Clock | None = None,
    ) -> KubeClient:
        """A client for a plain URL (sandbox server, loopback test servers)."""
        conf = Configuration(host=host.rstrip("/"))
        if token:
            conf.api_key = {"BearerToken": token}
            conf.api_key_prefix = {"BearerToken": "Bearer"}
        return cls(conf, request_timeout=request_timeout, clock=clock)

    def new_session(self) -> KubeClient:
        """Another client on the same credentials with its OWN aiohttp session.

        Each watch owns one, so a long-lived stream never holds a connection of the
        request pool; close it with the watch.
        """
        return KubeClient(
            self.configuration, request_timeout=self.request_timeout, clock=self.clock
        )

    async def close(self) -> None:
        await self._api.close()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- transport --------------------------------------------------------------------
    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, Any]] = (),
        body: Any = None,
        content_type: str = "application/json",
        client_timeout: aiohttp.ClientTimeout,
        what: str,
    ) -> aiohttp.ClientResponse:
        """One request on kubernetes_asyncio's session and credentials, sent directly.

        ``ApiClient.call_api`` walks every body and header through its generic
        serializer and encodes with :mod:`json`: 5-12% of the scheduler's CPU in a burst
        (profiled). The credentials still come from it (``update_params_for_auth``: a
        rotated in-cluster token or an exec plugin's refresh), and the session carries
        its TLS settings; the proxy was read once (:func:`_env_read_once`)."""
        api = self._api
        rest = api.rest_client
        headers = {
            **api.default_headers,
            "Accept": "application/json",
            "Content-Type": content_type,
        }
        params = list(query)
        url = str(self.configuration.host) + path
        try:
            await api.update_params_for_auth(headers, params, ["BearerToken"])
            if params:
                url += "?" + urlencode(params)
            data = None
            if body is not None:
                data = body if isinstance(body, bytes) else fastjson.dumps(body)
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
        what: str = "",
    ) -> tuple[int, bytes]:
        """One request: ``(status, body)``; HTTP errors are NOT raised (caller decides)."""
        what = what or f"{method} {path}"
        timeout = aiohttp.ClientTimeout(total=self.request_timeout)
        resp = await self._send(
            method,
            path,
            query=query,
            body=body,
            content_type=content_type,
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

    async def served_versions(self, group: str) -> tuple[str, ...]:
        """The versions the server serves of API ``group`` (discovery: ``GET /apis/<group>``),
        its preferred version first; () when it serves none."""
        status, data = await self.raw("GET", f"/apis/{group}", what=f"discovery of {group}")
        if status == 404:
            return ()
        if not 200 <= status < 300:
            raise error_for_status(status, data, f"discovery of {group}")
        try:
            body = fastjson.loads(data)
        except ValueError:
            raise KubeUnavailable(
                f"discovery of {group}: answer is not JSON", status=status
            ) from None
        versions = [
            str(v.get("version"))
            for v in (body.get("versions") or [])
            if isinstance(v, dict) and v.get("version")
        ]
        preferred = (body.get("preferredVersion") or {}).get("version")
        if preferred in versions:
            versions.remove(preferred)
            versions.insert(0, preferred)
        return tuple(versions)

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
        if not 200 <= status < 300:
            raise error_for_status(status, data, what)
        if not data:
            return {}
        try:
            parsed = fastjson.loads(data)
        except ValueError:
            raise KubeUnavailable(f"{what}: answer is not JSON", status=status) from None
        return parsed if isinstance(parsed, dict) else {"items": parsed}

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

    # -- generic verbs ----------------------------------------------------------------
    async def get(self, res: Resource, name: str, namespace: str | None = None) -> KubeObject:
        return await self.request(
            "GET", res.path(namespace, name), what=f"get {res.describe(namespace, name)}"
        )

    async def list(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
    ) -> ObjectList:
        """All objects (following ``continue`` pages); the first page's resourceVersion.

        Items get ``apiVersion`` and ``kind`` filled in when the server left them out.

        A continue token that expired (410) restarts the list from the beginning once.
        """
        items: list[KubeObject] = []
        rv = ""
        async for page, page_rv in self.pages(
            res,
            namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            page_size=page_size,
        ):
            if page_rv is None:  # restarted from the beginning
                items.clear()
                rv = ""
                continue
            rv = rv or page_rv
            items += page
        return ObjectList(items, rv)

    async def pages(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
    ) -> AsyncIterator[tuple[Sequence[KubeObject], str | None]]:
        """The list, one page at a time (at most ``page_size`` objects held), with the
        first page's resourceVersion. An empty page with resourceVersion None means the
        continue token expired and the list starts again from the beginning (once)."""
        base: list[tuple[str, Any]] = []
        if label_selector:
            base.append(("labelSelector", label_selector))
        if field_selector:
            base.append(("fieldSelector", field_selector))
        what = f"list {res.plural}" + (f" in {namespace}" if namespace else "")
        for attempt in range(2):
            rv = ""
            cont = ""
            try:
                while True:
                    query = [*base, ("limit", page_size)]
                    if cont:
                        query.append(("continue", cont))
                    page = await self.request("GET", res.path(namespace), query=query, what=what)
                    meta = page.get("metadata") or {}
                    rv = rv or str(meta.get("resourceVersion") or "")
                    items: list[KubeObject] = []
                    for item in page.get("items") or []:
                        # List items come without kind/apiVersion (watch objects have
                        # them): fill them so every object dict has the same shape.
                        item.setdefault("apiVersion", res.api_version)
                        item.setdefault("kind", res.kind)
                        items.append(item)
                    cont = str(meta.get("continue") or "")
                    yield items, rv
                    if not cont:
                        return
            except KubeGone:
                if attempt or not cont:
                    raise
                yield [], None

    async def create(
        self, res: Resource, obj: KubeObject, namespace: str | None = None
    ) -> KubeObject:
        name = str((obj.get("metadata") or {}).get("name") or "")
        return await self.request(
            "POST", res.path(namespace), body=obj, what=f"create {res.describe(namespace, name)}"
        )

    async def replace(
        self, res: Resource, name: str, obj: KubeObject, namespace: str | None = None
    ) -> KubeObject:
        """PUT: carries ``metadata.resourceVersion``; a stale one answers 409."""
        return await self.request(
            "PUT",
            res.path(namespace, name),
            body=obj,
            what=f"replace {res.describe(namespace, name)}",
        )

    async def patch(
        self,
        res: Resource,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        patch_type: PatchType = "merge",
        subresource: str = "",
    ) -> KubeObject:
        if patch_type == "strategic" and not res.builtin:
            raise KubeInvalid(
                f"patch {res.describe(namespace, name)}: strategic merge is not supported on "
                "custom resources (the server answers 415); use merge or json",
                status=415,
            )
        sub = f"/{subresource}" if subresource else ""
        return await self.request(
            "PATCH",
            res.path(namespace, name, subresource),
            body=patch,
            content_type=_CONTENT_TYPES[patch_type],
            what=f"patch{sub} {res.describe(namespace, name)}",
        )

    async def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        grace_period_seconds: int | None = None,
        uid: str | None = None,
    ) -> KubeObject:
        """Delete; ``uid`` adds a precondition (409 when the name now holds another object)."""
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        query: list[tuple[str, Any]] = []
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
            query.append(("gracePeriodSeconds", grace_period_seconds))
        if uid:
            body["preconditions"] = {"uid": uid}
        return await self.request(
            "DELETE",
            res.path(namespace, name),
            query=query,
            body=body,
            what=f"delete {res.describe(namespace, name)}",
        )

    async def modify(
        self,
        res: Resource,
        name: str,
        change: Callable[[KubeObject], KubeObject | None],
        *,
        namespace: str | None = None,
        subresource: str = "",
    ) -> KubeObject:
        """Read-modify-write with optimistic concurrency.

        ``change(current)`` returns a merge patch, or None when nothing needs to change (no
        request is sent). The patch carries the read resourceVersion, so a concurrent
        writer makes it 409; it is then re-read and retried (``CONFLICT_ATTEMPTS`` times).
        """
        last: KubeConflict | None = None
        for _ in range(CONFLICT_ATTEMPTS):
            current = await self.get(res, name, namespace)
            patch = change(current)
            if patch is None:
                return current
            meta = dict(patch.get("metadata") or {})
            meta["resourceVersion"] = (current.get("metadata") or {}).get("resourceVersion")
            patch = {**patch, "metadata": meta}
            try:
                return await self.patch(
                    res, name, patch, namespace=namespace, subresource=subresource
                )
            except KubeConflict as e:
                last = e
        assert last is not None
        raise last

    # -- metadata helpers (any resource) ----------------------------------------------
    async def add_finalizer(
        self, res: Resource, name: str, finalizer: str, namespace: str | None = None
    ) -> KubeObject:
        def change(obj: KubeObject) -> KubeObject | None:
            current = list((obj.get("metadata") or {}).get("finalizers") or [])
            if finalizer in current:
                return None
            return {"metadata": {"finalizers": [*current, finalizer]}}

        return await self.modify(res, name, change, namespace=namespace)

    async def remove_finalizer(
        self, res: Resource, name: str, finalizer: str, namespace: str | None = None
    ) -> KubeObject | None:
        """Remove ``finalizer``; None when the object is gone (already finalized)."""

        def change(obj: KubeObject) -> KubeObject | None:
            current = list((obj.get("metadata") or {}).get("finalizers") or [])
            if finalizer not in current:
                return None
            return {"metadata": {"finalizers": [f for f in current if f != finalizer]}}

        try:
            return await self.modify(res, name, change, namespace=namespace)
        except KubeNotFound:
            return None

    async def set_labels(
        self,
        res: Resource,
        name: str,
        labels: Mapping[str, str | None],
        namespace: str | None = None,
    ) -> KubeObject:
        """Merge ``labels`` into the object's labels; a None value removes the label."""
        return await self.patch(
            res, name, {"metadata": {"labels": dict(labels)}}, namespace=namespace
        )

    async def set_annotations(
        self,
        res: Resource,
        name: str,
        annotations: Mapping[str, str | None],
        namespace: str | None = None,
    ) -> KubeObject:
        """Merge ``annotations``; a None value removes the annotation."""
        return await self.patch(
            res, name, {"metadata": {"annotations": dict(annotations)}}, namespace=namespace
        )

    # -- pods -------------------------------------------------------------------------
    async def get_pod(self, namespace: str, name: str) -> KubeObject:
        return await self.get(PODS, name, namespace)

    async def list_pods(
        self,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ObjectList:
        return await self.list(
            PODS, namespace, label_selector=label_selector, field_selector=field_selector
        )

    async def patch_pod(
        self, namespace: str, name: str, patch: Any, *, patch_type: PatchType = "strategic"
    ) -> KubeObject:
        return await self.patch(PODS, name, patch, namespace=namespace, patch_type=patch_type)

    async def patch_pod_status(
        self, namespace: str, name: str, patch: Any, *, patch_type: PatchType = "strategic"
    ) -> KubeObject:
        """Patch ``pods/{name}/status`` (strategic merge: conditions merge by type)."""
        return await self.patch(
            PODS, name, patch, namespace=namespace, patch_type=patch_type, subresource="status"
        )

    async def set_pod_condition(
        self,
        namespace: str,
        name: str,
        cond_type: str,
        status: bool,
        *,
        reason: str,
        message: str,
        pod: KubeObject | None = None,
    ) -> KubeObject:
        """Set one pod condition; no request when it already says exactly this.

        ``lastTransitionTime`` moves only when the status flips (as kubelet/scheduler do).
        Pass the ``pod`` you hold to save a read. ``message`` is clipped
        (:func:`bridge.text.clip`): it may quote tenant text.
        """
        message = clip(message, CONDITION_MESSAGE_MAX)
        if pod is None:
            pod = await self.get_pod(namespace, name)
        want = "True" if status else "False"
        existing = next(
            (
                c
                for c in (pod.get("status") or {}).get("conditions") or []
                if c.get("type") == cond_type
            ),
            None,
        )
        if (
            existing is not None
            and existing.get("status") == want
            and existing.get("reason", "") == reason
            and existing.get("message", "") == message
        ):
            return pod
        ltt = (
            existing.get("lastTransitionTime")
            if existing is not None and existing.get("status") == want
            else None
        ) or format_time(self.clock.now())
        cond = {
            "type": cond_type,
            "status": want,
            "reason": reason,
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": ltt,
        }
        return await self.patch_pod_status(namespace, name, {"status": {"conditions": [cond]}})

    async def set_pod_unschedulable(
        self,
        namespace: str,
        name: str,
        *,
        reason: str,
        message: str,
        pod: KubeObject | None = None,
    ) -> KubeObject:
        """``PodScheduled=False`` with ``reason``/``message`` (why the pod waits)."""
        return await self.set_pod_condition(
            namespace,
            name,
            CONDITION_POD_SCHEDULED,
            False,
            reason=reason,
            message=message,
            pod=pod,
        )

    async def fail_pod(
        self,
        namespace: str,
        name: str,
        *,
        reason: str,
        message: str,
        conditions: Sequence[KubeObject] = (),
    ) -> KubeObject:
        """Phase ``Failed`` with ``reason``/``message`` (plus our own conditions; the
        message clipped like a condition's)."""
        message = clip(message, CONDITION_MESSAGE_MAX)
        status: dict[str, Any] = {"phase": "Failed", "reason": reason, "message": message}
        if conditions:
            now = format_time(self.clock.now())
            status["conditions"] = [{"lastTransitionTime": now, **c} for c in conditions]
        return await self.patch_pod_status(namespace, name, {"status": status})

    async def delete_pod(
        self,
        namespace: str,
        name: str,
        *,
        grace_period_seconds: int | None = None,
        uid: str | None = None,
    ) -> KubeObject | None:
        """Delete a pod; None when it is already gone."""
        try:
            return await self.delete(
                PODS, name, namespace, grace_period_seconds=grace_period_seconds, uid=uid
            )
        except KubeNotFound:
            return None

    async def bind_pod(
        self,
        namespace: str,
        name: str,
        pod_uid: str,
        node: str,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        """Bind a pod to ``node``. Idempotent. ``annotations``: the API server adds them to
        the pod in the same write as its node (kube-apiserver's BindingREST copies a
        Binding's ``metadata.annotations``, never its labels).

        The server answers 201 with a ``Status`` (the generated typed call raises
        ``ValueError`` parsing it, after binding), so the request is sent raw and the
        status checked here. A 409 means the pod is already bound, the UID does not match
        or the pod is terminating; which one is decided from the pod itself (one GET), not
        from the message text: bound to the same node = success, otherwise
        :class:`KubeConflict` naming what the pod is.
        """
        what = f"bind Pod {namespace}/{name} to node {node}"
        meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": pod_uid}
        if annotations:
            meta["annotations"] = dict(annotations)
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        status, data = await self.raw(
            "POST", PODS.path(namespace, name, "binding"), body=body, what=what
        )
        if 200 <= status < 300:
            return
        if status != 409:
            raise error_for_status(status, data, what)
        _, message = _status_body(data)
        pod = await self.get_pod(namespace, name)
        meta = pod.get("metadata") or {}
        bound_to = (pod.get("spec") or {}).get("nodeName") or ""
        if meta.get("uid") != pod_uid:
            raise KubeConflict(
                f"{what}: the pod now has uid {meta.get('uid')}, not {pod_uid}",
                status=409,
                reason="UIDMismatch",
            )
        if bound_to == node:
            return
        if bound_to:
            raise KubeConflict(
                f"{what}: already bound to node {bound_to}", status=409, reason="AlreadyBound"
            )
        if meta.get("deletionTimestamp"):
            raise KubeConflict(f"{what}: the pod is terminating", status=409, reason="Terminating")
        raise KubeConflict(f"{what}: HTTP 409: {message}", status=409, reason="Conflict")

    # -- nodes ------------------------------------------------------------------------
    async def get_node(self, name: str) -> KubeObject:
        return await self.get(NODES, name)

    async def list_nodes(
        self, *, label_selector: str | None = None, field_selector: str | None = None
    ) -> ObjectList:
        return await self.list(NODES, label_selector=label_selector, field_selector=field_selector)

    async def patch_node(
        self, name: str, patch: Any, *, patch_type: PatchType = "strategic"
    ) -> KubeObject:
        return await self.patch(NODES, name, patch, patch_type=patch_type)

    async def set_node_unschedulable(self, name: str, unschedulable: bool) -> KubeObject:
        """Cordon / uncordon."""
        return await self.patch(NODES, name, {"spec": {"unschedulable": unschedulable}})

    async def add_node_taint(self, name: str, taint: KubeObject) -> KubeObject:
        """Add (or update) the taint with this key+effect; no request when already there."""

        def change(node: KubeObject) -> KubeObject | None:
            taints = list((node.get("spec") or {}).get("taints") or [])
            same = [t for t in taints if _taint_id(t) == _taint_id(taint)]
            if same and all(t.get("value") == taint.get("value") for t in same):
                return None
            kept = [t for t in taints if _taint_id(t) != _taint_id(taint)]
            new = dict(taint)
            if "timeAdded" not in new:
                new["timeAdded"] = format_time(self.clock.now())
            return {"spec": {"taints": [*kept, new]}}

        return await self.modify(NODES, name, change)

    async def remove_node_taint(self, name: str, key: str, effect: str | None = None) -> KubeObject:
        """Remove taints with ``key`` (and ``effect`` when given)."""

        def change(node: KubeObject) -> KubeObject | None:
            taints = list((node.get("spec") or {}).get("taints") or [])
            kept = [
                t
                for t in taints
                if not (t.get("key") == key and (effect is None or t.get("effect") == effect))
            ]
            if len(kept) == len(taints):
                return None
            return {"spec": {"taints": kept}}

        return await self.modify(NODES, name, change)

    # -- namespaces -------------------------------------------------------------------
    async def get_namespace(self, name: str) -> KubeObject:
        return await self.get(NAMESPACES, name)

    async def list_namespaces(self, *, label_selector: str | None = None) -> ObjectList:
        return await self.list(NAMESPACES, label_selector=label_selector)

    # -- workload objects (read) ------------------------------------------------------
    async def get_podgroup(self, namespace: str, name: str) -> KubeObject:
        return await self.get(PODGROUPS, name, namespace)

    async def list_podgroups(self, namespace: str | None = None) -> ObjectList:
        return await self.list(PODGROUPS, namespace)

    async def patch_podgroup_status(
        self, namespace: str, name: str, status: KubeObject
    ) -> KubeObject:
        """Merge-patch ``podgroups/{name}/status`` (json-patch/strategic would be refused)."""
        return await self.patch(
            PODGROUPS, name, {"status": status}, namespace=namespace, subresource="status"
        )

    async def get_jobset(self, namespace: str, name: str) -> KubeObject:
        return await self.get(JOBSETS, name, namespace)

    async def get_leaderworkerset(self, namespace: str, name: str) -> KubeObject:
        return await self.get(LEADERWORKERSETS, name, namespace)

    async def get_job(self, namespace: str, name: str) -> KubeObject:
        return await self.get(JOBS, name, namespace)


def _taint_id(taint: Mapping[str, Any]) -> tuple[str, str]:
    return str(taint.get("key") or ""), str(taint.get("effect") or "")


__all__ = [
    "CONFLICT_ATTEMPTS",
    "KubeClient",
    "ObjectList",
    "PatchType",
    "error_for_status",
]
