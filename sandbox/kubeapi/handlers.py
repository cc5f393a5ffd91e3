"""HTTP: routing of Kubernetes API paths onto :class:`ObjectApi`, watch streaming, Table
negotiation, the fault/request-log middleware and the ``/sandbox/...`` hook endpoints."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from aiohttp import web

from bridge import fastjson
from sandbox.kubeapi import discovery, protobuf, rbac, tables
from sandbox.kubeapi.admission_chain import Writes, options
from sandbox.kubeapi.authn import Authenticator
from sandbox.kubeapi.errors import ApiError, bad_request
from sandbox.kubeapi.faults import Fault, Faults, LoggedRequest, RequestLog
from sandbox.kubeapi.identity import UserInfo, user
from sandbox.kubeapi.rbac import Authorizer
from sandbox.kubeapi.registry import CONNECT_KINDS, ResourceDef
from sandbox.kubeapi.selectors import parse_field_selector, parse_label_selector
from sandbox.kubeapi.store import Obj
from sandbox.kubeapi.verbs import ObjectApi
from sandbox.kubeapi.watch import WatchRequest, run_watch, validate_list_options

USER = web.RequestKey("user", UserInfo)  # who sent the request (authenticated, authorized)

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=fastjson.dumps(body), status=status, content_type="application/json")


def error_response(err: ApiError) -> web.Response:
    return json_response(err.status(), err.code)


@dataclass(frozen=True)
class Target:
    """A parsed resource path."""

    group: str
    version: str
    namespace: str
    plural: str
    name: str
    subresource: str


def parse_resource_path(parts: list[str]) -> Target | None:
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    if len(rest) > 3:
        return None
    plural = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    return Target(group, version, namespace, plural, name, sub)


def _truthy(v: str | None) -> bool:
    return v is not None and v.lower() in ("true", "1")


def connect_options(subresource: str, q: Any) -> dict[str, Any]:
    """The Pod{Exec,Attach,PortForward}Options of a CONNECT request's query."""
    out: dict[str, Any] = {"kind": CONNECT_KINDS[subresource], "apiVersion": "v1"}
    if subresource == "portforward":
        ports = [int(p) for p in q.getall("ports", []) if str(p).isdigit()]
        if ports:
            out["ports"] = ports
        return out
    for f in ("stdin", "stdout", "stderr", "tty"):
        if f in q:
            out[f] = _truthy(q.get(f))
    if q.get("container"):
        out["container"] = q["container"]
    if subresource == "exec":
        out["command"] = list(q.getall("command", []))
    return out


async def _body(request: web.Request) -> Any:
    raw = await request.read()
    if not raw:
        return None
    ctype = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
    if ctype == protobuf.PROTOBUF:
        return protobuf.decode(raw)
    if ctype and ctype != "application/json" and not ctype.endswith("+json"):
        # protobuf, CBOR, YAML: only JSON is spoken here
        raise ApiError(
            415,
            "UnsupportedMediaType",
            f"the body of the request was in an unknown format - accepted media types "
            f"include: application/json, application/merge-patch+json, "
            f"application/json-patch+json (got {ctype})",
        )
    try:
        return fastjson.loads(raw)
    except ValueError as e:
        raise bad_request(f"the body of the request could not be decoded as JSON: {e}") from e


class KubeletHooks(Protocol):
    """What the ``/sandbox/kubelet`` and ``/sandbox/pods/.../finish`` hooks drive: the fake
    kubelet, when the sandbox runs one (:mod:`sandbox.cluster`)."""

    enabled: bool

    def start(self) -> None: ...

    async def stop(self) -> None: ...

    def stop_node(self, node: str) -> None: ...

    def start_node(self, node: str) -> None: ...

    def finish_pod(
        self, namespace: str, name: str, *, exit_code: int = 0, reason: str | None = None
    ) -> Obj: ...


@dataclass(frozen=True)
class WatchSettings:
    """``timeout``: a watch's length when it asks for none; ``bookmark_interval``: seconds
    between BOOKMARKs (a real server sends one about every minute)."""

    timeout: float
    bookmark_interval: float


class Handlers:
    """The HTTP side of the API server, given each part it uses."""

    def __init__(
        self,
        *,
        api: ObjectApi,
        writes: Writes,
        tokens: Authenticator,
        authorizer: Authorizer,
        faults: Faults,
        request_log: RequestLog,
        watch: WatchSettings,
        watch_tasks: set[asyncio.Task[Any]],
        kubelet: KubeletHooks | None,
    ) -> None:
        self.api = api
        self.writes = writes
        self.tokens = tokens
        self.authorizer = authorizer
        self.faults = faults
        self.request_log = request_log
        self.watch_settings = watch
        self.watch_tasks = watch_tasks  # the server cancels them on close
        self.kubelet = kubelet

    # --- entry -------------------------------------------------------------------------

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        if parts[:1] == ["sandbox"]:
            try:
                return await self.sandbox(request, parts[1:])
            except ApiError as e:
                return error_response(e)
        try:
            caller = self.tokens.authenticate(request.headers.get("Authorization"))
        except ApiError as e:  # 401: before anything else, as kube-apiserver
            self._log(request, e.code)
            return error_response(e)
        fault = self.faults.take(request.method, request.path, caller.username)
        if fault is not None:
            if fault.delay:
                await asyncio.sleep(fault.delay)
            if fault.drop:
                self._log(request, 0)
                if request.transport is not None:
                    request.transport.abort()
                return web.Response(status=500)
            if fault.status:
                self._log(request, fault.status)
                reason = _REASONS.get(fault.status, "InternalError")
                return error_response(ApiError(fault.status, reason, f"injected fault {reason}"))
        try:
            self.authorizer.require(
                rbac.request_attributes(caller, request.method, request.path, request.query)
            )
            request[USER] = caller
            resp = await self.route(request, parts)
        except ApiError as e:
            resp = error_response(e)
        if not getattr(resp, "_sandbox_logged", False):
            self._log(request, resp.status)
        return resp

    def _log(self, request: web.Request, status: int) -> None:
        self.request_log.add(
            LoggedRequest(request.method, request.path, request.query_string, status)
        )

    async def route(self, request: web.Request, parts: list[str]) -> web.StreamResponse:
        reg = self.api.registry
        m = request.method
        if m == "GET":
            doc: Any = None
            if parts == ["api"]:
                doc = discovery.api_versions()
            elif parts == ["apis"]:
                doc = discovery.api_group_list(reg)
            elif parts == ["version"]:
                doc = discovery.version_info(reg)
            elif parts in (["healthz"], ["readyz"], ["livez"]):
                return web.Response(text="ok")
            elif parts == ["api", "v1"]:
                doc = discovery.resource_list(reg, "", "v1")
            elif len(parts) == 2 and parts[0] == "apis":
                doc = discovery.api_group(reg, parts[1])
            elif len(parts) == 3 and parts[0] == "apis":
                doc = discovery.resource_list(reg, parts[1], parts[2])
            elif parts == ["openapi", "v3"]:
                doc = discovery.openapi_v3_root(reg)
            elif parts[:2] == ["openapi", "v3"] and len(parts) in (4, 5):
                if parts[2] == "api":
                    doc = discovery.openapi_v3_gv(reg, "", parts[3])
                elif len(parts) == 5:
                    doc = discovery.openapi_v3_gv(reg, parts[3], parts[4])
            if doc is not None:
                return json_response(doc)
        target = parse_resource_path(parts)
        if target is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        rd = self.api.resolve(target.group, target.version, target.plural)
        if target.namespace and not rd.namespaced:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if target.subresource and target.subresource not in rd.subresources:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return await self.resource(request, rd, target)

    # --- resources ---------------------------------------------------------------------

    async def resource(
        self, request: web.Request, rd: ResourceDef, t: Target
    ) -> web.StreamResponse:
        q = request.query
        m = request.method
        dry_run = bool(q.get("dryRun"))
        user = request[USER]
        accept = request.headers.get("Accept", "")
        table = tables.wants_table(accept)
        if rd.key in rbac.REVIEWS:
            if m != "POST":
                raise ApiError(405, "MethodNotAllowed", f"{m} is not supported on {rd.plural}")
            answer = rbac.review(
                self.authorizer, rbac.REVIEWS[rd.key], user, t.namespace, await _body(request)
            )
            return json_response(answer, 201)
        if not t.name:
            if m == "GET":
                watching = _truthy(q.get("watch"))
                validate_list_options(
                    watching,
                    q.get("sendInitialEvents"),
                    q.get("resourceVersionMatch"),
                    q.get("resourceVersion"),
                    q.get("continue"),
                )
                if watching:
                    return await self.watch(request, rd, t, table)
                lst = self.api.list(
                    rd,
                    t.namespace,
                    label_selector=q.get("labelSelector"),
                    field_selector=q.get("fieldSelector"),
                    limit=int(q.get("limit") or 0),
                    continue_token=q.get("continue"),
                )
                if table:
                    items = [self.api.present(rd, o) for o in lst["items"]]
                    return json_response(
                        tables.table(
                            rd,
                            items,
                            self.api.clock.now(),
                            lst["metadata"],
                            q.get("includeObject", "Metadata"),
                        )
                    )
                if tables.wants_metadata_list(accept):
                    return json_response(tables.metadata_list(lst))
                return json_response(lst)
            if m == "POST":
                obj = await self.writes.create(
                    rd,
                    t.namespace,
                    await _body(request),
                    user=user,
                    dry_run=dry_run,
                    opts=options("CreateOptions", q),
                )
                return json_response(obj, 201)
            if m == "DELETE":
                return await self.delete_collection(request, rd, t, user)
            raise ApiError(405, "MethodNotAllowed", f"{m} is not supported on a collection")
        if t.subresource in CONNECT_KINDS:
            if m not in ("GET", "POST"):
                raise ApiError(405, "MethodNotAllowed", f"{m} is not supported")
            await self.writes.connect(
                t.namespace, t.name, t.subresource, connect_options(t.subresource, q), user=user
            )
            if request.headers.get("Upgrade"):
                raise ApiError(
                    500,
                    "InternalError",
                    f"the sandbox has no container runtime: pods/{t.subresource} is admitted "
                    "but not served",
                )
            raise bad_request("Upgrade request required")
        if t.subresource == "token":
            if m != "POST":
                raise ApiError(405, "MethodNotAllowed", "token supports POST only")
            self.api.get(rd, t.namespace, t.name)  # 404 when the ServiceAccount is missing
            token = self.tokens.token_request(t.namespace, t.name, await _body(request))
            return json_response(token, 201)
        if t.subresource == "binding":
            if m != "POST":
                raise ApiError(405, "MethodNotAllowed", "binding supports POST only")
            bound = await self.writes.bind(t.namespace, t.name, await _body(request), user=user)
            return json_response(bound, 201)
        if m == "GET":
            obj = self.api.get(rd, t.namespace, t.name)
            if table:
                return json_response(
                    tables.table(
                        rd, [obj], self.api.clock.now(), {}, q.get("includeObject", "Metadata")
                    )
                )
            return json_response(obj)
        if m == "PUT":
            body = await _body(request)
            if rd.key == rbac.CLAIM_KEY:

                def dry_update() -> Any:
                    return self.api.update(
                        rd, t.namespace, t.name, body, subresource=t.subresource, dry_run=True
                    )

                self._check_claim_status(rd, t, user, "update", dry_update)
            obj = await self.writes.update(
                rd,
                t.namespace,
                t.name,
                body,
                subresource=t.subresource,
                user=user,
                dry_run=dry_run,
                opts=options("UpdateOptions", q),
            )
            return json_response(obj)
        if m == "PATCH":
            ctype, body = request.headers.get("Content-Type", ""), await _body(request)
            if rd.key == rbac.CLAIM_KEY:

                def dry_patch() -> Any:
                    return self.api.patch(
                        rd,
                        t.namespace,
                        t.name,
                        ctype,
                        body,
                        subresource=t.subresource,
                        dry_run=True,
                    )

                self._check_claim_status(rd, t, user, "patch", dry_patch)
            obj = await self.writes.patch(
                rd,
                t.namespace,
                t.name,
                ctype,
                body,
                subresource=t.subresource,
                user=user,
                dry_run=dry_run,
                opts=options("PatchOptions", q),
            )
            return json_response(obj)
        if m == "DELETE":
            return await self._delete_one(rd, t, await self._delete_options(request), user)
        raise ApiError(405, "MethodNotAllowed", f"{m} is not supported")

    def _check_claim_status(
        self, rd: ResourceDef, t: Target, user: UserInfo, verb: str, dry: Callable[[], Any]
    ) -> None:
        """DRA's synthetic ``resourceclaims/binding`` and ``/driver`` checks on a write
        (``dry`` computes the claim it would store)."""
        if rbac.MASTERS in user.groups:
            return
        old = self.api.get(rd, t.namespace, t.name)
        rbac.check_claim_status(self.authorizer, user, verb, old, dry())

    async def _delete_options(self, request: web.Request) -> dict[str, Any]:
        body = await _body(request)
        opts: dict[str, Any] = dict(body) if isinstance(body, dict) else {}
        q = request.query
        if "gracePeriodSeconds" in q:
            try:
                opts["gracePeriodSeconds"] = int(q["gracePeriodSeconds"])
            except ValueError as e:
                raise bad_request("gracePeriodSeconds must be an integer") from e
        if "dryRun" in q:
            opts["dryRun"] = [q["dryRun"]]
        return opts

    async def _delete_one(
        self, rd: ResourceDef, t: Target, opts: dict[str, Any], user: UserInfo
    ) -> web.Response:
        result = await self.writes.delete(
            rd, t.namespace, t.name, opts, user=user, dry_run=bool(opts.get("dryRun"))
        )
        ns = t.namespace if rd.namespaced else ""
        still_there = self.api.store.get(rd.key, ns, t.name) is not None
        # like the real handler: 202 only for a pending deletion with orphanDependents=false
        pending_cascade = still_there and opts.get("orphanDependents") is False
        return json_response(result, 202 if pending_cascade else 200)

    async def delete_collection(
        self, request: web.Request, rd: ResourceDef, t: Target, user: UserInfo
    ) -> web.Response:
        opts = await self._delete_options(request)
        lst = self.api.list(
            rd,
            t.namespace,
            label_selector=request.query.get("labelSelector"),
            field_selector=request.query.get("fieldSelector"),
        )
        items = []
        for o in lst["items"]:
            md = o["metadata"]
            try:
                items.append(
                    await self.writes.delete(
                        rd,
                        md.get("namespace", ""),
                        md["name"],
                        opts,
                        user=user,
                        dry_run=bool(opts.get("dryRun")),
                    )
                )
            except ApiError as e:
                if e.code != 404:
                    raise
        return json_response(
            {"kind": f"{rd.kind}List", "apiVersion": rd.api_version, "metadata": {}, "items": items}
        )

    async def watch(
        self, request: web.Request, rd: ResourceDef, t: Target, table: bool
    ) -> web.StreamResponse:
        q = request.query
        timeout = float(q.get("timeoutSeconds") or self.watch_settings.timeout)
        initial = q.get("sendInitialEvents")
        req = WatchRequest(
            rd=rd,
            namespace=t.namespace,
            labels=parse_label_selector(q.get("labelSelector")),
            fields=parse_field_selector(q.get("fieldSelector"), rd.fields),
            resource_version=q.get("resourceVersion"),
            timeout=timeout,
            bookmarks=_truthy(q.get("allowWatchBookmarks")),
            bookmark_interval=self.watch_settings.bookmark_interval,
            send_initial=None if initial is None else _truthy(initial),
        )
        resp = web.StreamResponse(status=200)
        resp.content_type = "application/json"
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        self._log(request, 200)
        resp._sandbox_logged = True  # type: ignore[attr-defined]

        async def send(ev: dict[str, Any]) -> None:
            await resp.write(fastjson.dumps(ev) + b"\n")

        transform = None
        if table:
            now = self.api.clock.now

            def transform(obj: dict[str, Any]) -> dict[str, Any]:
                return tables.table(
                    rd,
                    [obj],
                    now(),
                    {"resourceVersion": obj["metadata"].get("resourceVersion", "")},
                    q.get("includeObject", "Metadata"),
                )

        task = asyncio.current_task()
        if task is not None:
            self.watch_tasks.add(task)
        try:
            await run_watch(self.api.store, req, send, transform)
        except ConnectionResetError:
            return resp
        finally:
            if task is not None:
                self.watch_tasks.discard(task)
        with contextlib.suppress(ConnectionResetError, RuntimeError):
            await resp.write_eof()
        return resp

    # --- /sandbox hooks ----------------------------------------------------------------

    async def sandbox(self, request: web.Request, parts: list[str]) -> web.Response:
        m = request.method
        body = await _body(request) or {}
        if parts == ["tokens"] and m == "POST":
            username = body.get("username")
            groups = body.get("groups") or []
            if not isinstance(username, str) or not username:
                raise bad_request("tokens: username (a non-empty string) is required")
            if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
                raise bad_request("tokens: groups must be a list of strings")
            return json_response({"token": self.tokens.mint(user(username, groups))}, 201)
        if parts == ["compact"] and m == "POST":
            self.api.store.compact()
            return json_response({"compacted": self.api.store.compacted})
        if parts == ["faults"]:
            if m == "POST":
                f = self.faults.add(
                    Fault(
                        path=body["path"],
                        method=body.get("method", "*"),
                        status=int(body.get("status", 500)),
                        count=body.get("count", 1),
                        drop=bool(body.get("drop", False)),
                        delay=float(body.get("delay", 0.0)),
                        user=body.get("user"),
                    )
                )
                return json_response(asdict(f), 201)
            if m == "DELETE":
                self.faults.clear()
                return json_response({})
            return json_response([asdict(f) for f in self.faults.faults])
        if parts == ["requests"]:
            if m == "DELETE":
                self.request_log.clear()
                return json_response({})
            entries = self.request_log.entries(
                request.query.get("method"), request.query.get("path")
            )
            return json_response([asdict(e) for e in entries])
        kubelet = self.kubelet
        if kubelet is not None and parts == ["kubelet"] and m == "POST":
            if body.get("enabled", True):
                kubelet.start()
            else:
                await kubelet.stop()
            return json_response({"enabled": kubelet.enabled})
        if (
            kubelet is not None
            and len(parts) == 4
            and parts[:2] == ["kubelet", "nodes"]
            and parts[3] in ("stop", "start")
            and m == "POST"
        ):
            (kubelet.stop_node if parts[3] == "stop" else kubelet.start_node)(parts[2])
            return json_response({})
        if (
            kubelet is not None
            and len(parts) == 4
            and parts[0] == "pods"
            and parts[3] == "finish"
            and m == "POST"
        ):
            pod = kubelet.finish_pod(
                parts[1],
                parts[2],
                exit_code=int(body.get("exitCode", 0)),
                reason=body.get("reason"),
            )
            return json_response(pod)
        if len(parts) == 3 and parts[0] == "nodes" and parts[2] == "ready" and m == "POST":
            return json_response(self.api.set_node_ready(parts[1], bool(body.get("ready", True))))
        raise ApiError(404, "NotFound", f"no sandbox hook {request.path}")
