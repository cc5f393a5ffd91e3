"""Dynamic admission: the sandbox calls the webhooks of Mutating/ValidatingWebhookConfigurations
like kube-apiserver v1.36 does, for every operation a rule names.

One :class:`AdmissionRequest` describes a write (CREATE, UPDATE, DELETE; see
:mod:`sandbox.kubeapi.admission_chain` for the one path every write takes). A webhook is called
when one of its ``rules`` matches (apiGroups, apiVersions, operations, ``resources`` with
subresources: ``pods`` matches neither ``pods/status`` nor ``pods/binding``, ``pods/*`` and
``*/status`` do, ``*`` is every resource but no subresource, ``*/*`` everything; ``scope``),
then its ``namespaceSelector`` (the namespace's labels; a Namespace's own labels), its
``objectSelector`` (the object's or the old object's labels; a missing one never matches)
and finally all its ``matchConditions`` (CEL, :mod:`bridge.cel`; variables ``object``,
``oldObject``, ``request``, ``namespaceObject``): a false condition skips the webhook, an
evaluation error is a call failure. ``matchPolicy: Equivalent`` (the default) also matches a
custom resource's other served versions: the webhook then gets the object in the version its
rule names (``kind``/``resource`` that version, ``requestKind``/``requestResource`` the request's).

The AdmissionReview (``admission.k8s.io/v1``) carries ``object`` (null for DELETE),
``oldObject`` (UPDATE, DELETE), ``userInfo`` (the caller, see :mod:`identity`),
``dryRun``, ``options`` (Create/Update/Patch/DeleteOptions) and ``subResource``. It is
POSTed to ``clientConfig.url`` or to ``clientConfig.service`` (resolved through the
Service's EndpointSlices, else its Endpoints, to an address and targetPort; TLS verified
with ``caBundle`` for the name ``<service>.<namespace>.svc``) with ``?timeout=<n>s``,
within ``timeoutSeconds`` (default 10).

Mutating webhooks run first (configurations by name, webhooks in order), a ``JSONPatch``
is applied; with ``reinvocationPolicy: IfNeeded`` a webhook is called once more when a
later webhook changed the object. Then validating ones. A denial answers with the
webhook's status (``admission webhook "<name>" denied the request: <message>``); a webhook
that cannot be called (refused, timeout, TLS, bad answer, no endpoints, match condition
error) fails the request with 500 ``Internal error occurred: failed calling webhook
"<name>": failed to call webhook: Post "<url>": <why>`` under ``failurePolicy: Fail`` (the
default) and is skipped under ``Ignore``. A dry-run request only calls webhooks whose
``sideEffects`` is ``None`` or ``NoneOnDryRun`` (others: 400 ``does not support dry run``).

Deviations: the matchCondition variable ``authorizer`` is not available (an expression
using it fails to compile, so its configuration is refused); CONNECT is sent for
``pods/exec``, ``attach`` and ``portforward`` (object: the Pod*Options), but the stream
itself is not served (no container runtime); ``matchPolicy:
Equivalent`` knows no equivalences between built-in groups (``apps/v1beta1``...), as the
sandbox serves one version of each.
"""

from __future__ import annotations

import base64
import errno
import json
import ssl
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import aiohttp
from pydantic import ValidationError

from bridge.cel import compile_expression
from bridge.config import LabelSelector
from bridge.errors import CelError
from bridge.fastjson import clone
from sandbox.kubeapi.errors import ApiError
from sandbox.kubeapi.identity import UserInfo
from sandbox.kubeapi.patch import json_patch
from sandbox.kubeapi.registry import Registry, ResourceDef
from sandbox.kubeapi.store import Obj, Store

GROUP = "admissionregistration.k8s.io"
MUTATING_KEY = (GROUP, "mutatingwebhookconfigurations")
VALIDATING_KEY = (GROUP, "validatingwebhookconfigurations")
NS_KEY = ("", "namespaces")
SERVICE_KEY = ("", "services")
ENDPOINTS_KEY = ("", "endpoints")
SLICE_KEY = ("discovery.k8s.io", "endpointslices")
DEFAULT_TIMEOUT_SECONDS = 10


@dataclass(frozen=True)
class AdmissionRequest:
    """What admission sees of one request (kube's ``admission.Attributes``)."""

    rd: ResourceDef
    operation: str  # CREATE, UPDATE, DELETE, CONNECT
    namespace: str
    name: str
    user: UserInfo
    obj: Obj | None = None
    old: Obj | None = None
    subresource: str = ""
    dry_run: bool = False
    options: Obj | None = None
    kind: str = ""  # the subresource's kind when it is not the resource's (Binding)

    def with_object(self, obj: Obj | None) -> AdmissionRequest:
        return replace(self, obj=obj)


def _listed(values: Any, want: str) -> bool:
    return isinstance(values, list) and ("*" in values or want in values)


def _resource_listed(values: Any, plural: str, sub: str) -> bool:
    if not isinstance(values, list):
        return False
    for v in values:
        res, _, rsub = str(v).partition("/")
        if (res in ("*", plural)) and (rsub == "*" or rsub == sub):
            return True
    return False


def rule_matches(rule: Mapping[str, Any], rd: ResourceDef, operation: str, sub: str) -> bool:
    """One ``rules[]`` entry against a request on ``rd`` (``sub``: its subresource)."""
    scope = rule.get("scope") or "*"
    if scope == "Namespaced" and not rd.namespaced:
        return False
    if scope == "Cluster" and rd.namespaced:
        return False
    return (
        _listed(rule.get("apiGroups"), rd.group)
        and _listed(rule.get("apiVersions"), rd.version)
        and _resource_listed(rule.get("resources"), rd.plural, sub)
        and _listed(rule.get("operations"), operation)
    )


def _selector_matches(selector: Any, labels: Mapping[str, str], where: str) -> bool:
    if not selector:
        return True
    try:
        return LabelSelector.model_validate(selector).matches(labels)
    except ValidationError as e:
        raise ApiError(500, "InternalError", f"webhook {where} is not a valid selector: {e}") from e


def _labels(obj: Obj | None) -> dict[str, str]:
    return dict(((obj or {}).get("metadata") or {}).get("labels") or {})


def _convert(obj: Obj | None, rd: ResourceDef) -> Obj | None:
    """``obj`` in ``rd``'s version (custom resources: conversion strategy None)."""
    if obj is None:
        return None
    out = clone(obj)
    out["apiVersion"], out["kind"] = rd.api_version, rd.kind
    return out


def review(req: AdmissionRequest, as_rd: ResourceDef) -> Obj:
    """The AdmissionReview sent for ``req`` to a webhook that matched it as ``as_rd``."""
    kind = req.kind or as_rd.kind
    request_kind = req.kind or req.rd.kind
    body: Obj = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": as_rd.group, "version": as_rd.version, "kind": kind},
        "resource": {"group": as_rd.group, "version": as_rd.version, "resource": as_rd.plural},
    }
    if req.subresource:
        body["subResource"] = req.subresource
    body["requestKind"] = {"group": req.rd.group, "version": req.rd.version, "kind": request_kind}
    body["requestResource"] = {
        "group": req.rd.group,
        "version": req.rd.version,
        "resource": req.rd.plural,
    }
    if req.subresource:
        body["requestSubResource"] = req.subresource
    if req.name:
        body["name"] = req.name
    if req.namespace and req.rd.namespaced:
        body["namespace"] = req.namespace
    conv = _convert if not req.kind else (lambda o, _rd: clone(o))
    body.update(
        {
            "operation": req.operation,
            "userInfo": req.user.as_dict(),
            "object": conv(req.obj, as_rd),
            "oldObject": conv(req.old, as_rd),
            "dryRun": req.dry_run,
            "options": req.options,
        }
    )
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": body}


class CallFailed(Exception):
    """The webhook could not be called; ``url`` and ``why`` shape kube's message."""

    def __init__(self, url: str, why: str) -> None:
        self.url = url
        self.why = why
        super().__init__(why)


def failure(name: str, why: str) -> ApiError:
    return ApiError(
        500, "InternalError", f'Internal error occurred: failed calling webhook "{name}": {why}'
    )


class WebhookCaller:
    """Calls the stored webhook configurations (see the module docstring)."""

    def __init__(self, store: Store, registry: Registry) -> None:
        self.store = store
        self.registry = registry
        # like kube-apiserver's webhook clients: connections and TLS contexts are kept
        self._session: aiohttp.ClientSession | None = None
        self._contexts: dict[str, ssl.SSLContext] = {}

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        return self._session

    def _ssl_context(self, bundle: str) -> ssl.SSLContext:
        ctx = self._contexts.get(bundle)
        if ctx is None:
            ctx = ssl.create_default_context()
            if bundle:
                ctx.load_verify_locations(cadata=base64.b64decode(bundle).decode())
            self._contexts[bundle] = ctx
        return ctx

    def _hooks(self, key: tuple[str, str]) -> list[Mapping[str, Any]]:
        configs = sorted(self.store.list(key), key=lambda c: str(c["metadata"]["name"]))
        return [h for c in configs for h in c.get("webhooks") or [] if isinstance(h, dict)]

    def active(self) -> bool:
        return bool(self.store.count(MUTATING_KEY) or self.store.count(VALIDATING_KEY))

    # --- matching ----------------------------------------------------------------------

    def _equivalents(self, rd: ResourceDef) -> list[ResourceDef]:
        """``rd`` first, then the other served versions of its group/resource."""
        others = [d for d in self.registry.all() if d.key == rd.key and d.version != rd.version]
        return [rd, *sorted(others, key=lambda d: d.version)]

    def matched_as(self, hook: Mapping[str, Any], req: AdmissionRequest) -> ResourceDef | None:
        """The resource version a webhook's rules match ``req`` as, or None."""
        rules = hook.get("rules") or []
        exact = (hook.get("matchPolicy") or "Equivalent") == "Exact"
        for rd in [req.rd] if exact else self._equivalents(req.rd):
            if any(rule_matches(r, rd, req.operation, req.subresource) for r in rules):
                return rd
        return None

    def _namespace(self, req: AdmissionRequest) -> Obj | None:
        if req.rd.key == NS_KEY:
            return req.obj or req.old
        if req.rd.namespaced and req.namespace:
            return self.store.get(NS_KEY, "", req.namespace)
        return None

    def _selected(self, hook: Mapping[str, Any], req: AdmissionRequest) -> bool:
        if req.rd.namespaced or req.rd.key == NS_KEY:
            ns_labels = _labels(self._namespace(req))
            if not _selector_matches(hook.get("namespaceSelector"), ns_labels, "namespaceSelector"):
                return False
        osel = hook.get("objectSelector")
        if not osel:
            return True
        # kube's matcher: the new or the old object must match; a missing one (the old
        # object of a CREATE, the object of a DELETE) never does, even for a selector that
        # empty labels would satisfy (DoesNotExist, NotIn)
        return any(
            _selector_matches(osel, _labels(o), "objectSelector")
            for o in (req.obj, req.old)
            if o is not None
        )

    def _conditions_hold(self, hook: Mapping[str, Any], req: AdmissionRequest, body: Obj) -> bool:
        """All matchConditions true; False when one is false; CallFailed on an error."""
        conds = hook.get("matchConditions") or []
        if not conds:
            return True
        variables = {
            "object": body["request"]["object"],
            "oldObject": body["request"]["oldObject"],
            "request": body["request"],
            "namespaceObject": self._namespace(req),
        }
        errors = []
        for c in conds:
            try:
                if not compile_expression(str(c.get("expression", ""))).evaluate_bool(variables):
                    return False
            except CelError as e:
                errors.append(f"matchCondition '{c.get('name')}': {e.reason}")
        if errors:
            raise CallFailed("", "; ".join(errors))
        return True

    # --- calling -----------------------------------------------------------------------

    def _prepare(
        self, hook: Mapping[str, Any], req: AdmissionRequest
    ) -> tuple[Obj, ResourceDef] | None:
        """The review to send, or None when the webhook does not apply to ``req``.
        Raises ApiError when it applies but cannot be called (failurePolicy Fail)."""
        as_rd = self.matched_as(hook, req)
        if as_rd is None or not self._selected(hook, req):
            return None
        body = review(req, as_rd)
        name = str(hook.get("name") or "")
        try:
            if not self._conditions_hold(hook, req, body):
                return None
        except CallFailed as e:
            if (hook.get("failurePolicy") or "Fail") == "Fail":
                raise failure(name, e.why) from e
            return None
        if req.dry_run and hook.get("sideEffects") not in ("None", "NoneOnDryRun"):
            raise ApiError(
                400, "BadRequest", f'admission webhook "{name}" does not support dry run'
            )
        return body, as_rd

    async def mutate(self, req: AdmissionRequest) -> Obj | None:
        """Run the mutating webhooks (with IfNeeded reinvocation); the mutated object."""
        hooks = self._hooks(MUTATING_KEY)
        obj = req.obj
        invoked_ifneeded: list[int] = []
        reinvoke: set[int] = set()
        for i, hook in enumerate(hooks):
            called, new = await self._mutate_one(hook, req.with_object(obj))
            if new is not None and new != obj:
                obj = new
                reinvoke.update(invoked_ifneeded)  # earlier IfNeeded ones: once more
                invoked_ifneeded = []
            if called and hook.get("reinvocationPolicy") == "IfNeeded":
                invoked_ifneeded.append(i)
        for i in sorted(reinvoke):
            _, new = await self._mutate_one(hooks[i], req.with_object(obj))
            if new is not None:
                obj = new
        return obj

    async def _mutate_one(
        self, hook: Mapping[str, Any], req: AdmissionRequest
    ) -> tuple[bool, Obj | None]:
        """(called, the object after this webhook or None when unchanged)."""
        prepared = self._prepare(hook, req)
        if prepared is None:
            return False, None
        body, as_rd = prepared
        resp = await self._call(hook, body)
        if resp is None or not resp.get("patch"):
            return True, None
        name = str(hook.get("name") or "")
        if req.obj is None:
            raise failure(
                name,
                f'admission webhook "{name}" attempted to modify the object, which is not '
                "supported for this operation",
            )
        if resp.get("patchType", "JSONPatch") != "JSONPatch":
            raise failure(name, f"unsupported patchType {resp['patchType']}")
        try:
            ops = json.loads(base64.b64decode(resp["patch"]))
        except ValueError as e:
            raise failure(name, f"undecodable patch: {e}") from e
        patched = json_patch(body["request"]["object"], ops)
        return True, (
            _convert(patched, req.rd) if as_rd is not req.rd and not req.kind else patched
        )

    async def validate(self, req: AdmissionRequest) -> None:
        for hook in self._hooks(VALIDATING_KEY):
            prepared = self._prepare(hook, req)
            if prepared is not None:
                await self._call(hook, prepared[0])

    async def _call(self, hook: Mapping[str, Any], body: Obj) -> Obj | None:
        """The webhook's response; None when it failed and failurePolicy is Ignore.
        Raises ApiError on a denial, or on a failure with failurePolicy Fail."""
        name = str(hook.get("name") or "")
        fail = (hook.get("failurePolicy") or "Fail") == "Fail"
        try:
            resp = await self._post(hook, body)
        except CallFailed as e:
            if fail:
                raise failure(name, f'failed to call webhook: Post "{e.url}": {e.why}') from e
            return None
        if resp.get("allowed"):
            return resp
        status = resp.get("status") or {}
        code = int(status.get("code") or 400)
        code = max(code, 400)
        denied = f'admission webhook "{name}" denied the request'
        message, reason = str(status.get("message") or ""), str(status.get("reason") or "")
        if message:
            text = f"{denied}: {message}"
        elif reason:
            text = f"{denied}: {reason}"
        else:
            text = f"{denied} without explanation"
        raise ApiError(code, reason, text, details=status.get("details"))

    def _endpoint(self, hook: Mapping[str, Any], svc: Mapping[str, Any]) -> tuple[str, int]:
        """(address, port) of a ready endpoint of the service reference ``svc``."""
        ns, name = str(svc.get("namespace") or ""), str(svc.get("name") or "")
        port = int(svc.get("port") or 443)
        service = self.store.get(SERVICE_KEY, ns, name)
        if service is None:
            raise CallFailed("", f'service "{name}" not found')
        sport = next(
            (p for p in (service.get("spec") or {}).get("ports") or [] if p.get("port") == port),
            None,
        )
        if sport is None:
            raise CallFailed("", f'service "{name}" has no port {port}')
        port_name = sport.get("name") or ""
        for sl in self.store.list(SLICE_KEY, ns):
            if _labels(sl).get("kubernetes.io/service-name") != name:
                continue
            ports = [p for p in sl.get("ports") or [] if (p.get("name") or "") == port_name]
            for ep in sl.get("endpoints") or []:
                if (ep.get("conditions") or {}).get("ready") is False or not ports:
                    continue
                if ep.get("addresses"):
                    return str(ep["addresses"][0]), int(ports[0]["port"])
        eps = self.store.get(ENDPOINTS_KEY, ns, name)
        for subset in (eps or {}).get("subsets") or []:
            ports = [p for p in subset.get("ports") or [] if (p.get("name") or "") == port_name]
            if subset.get("addresses") and ports:
                return str(subset["addresses"][0]["ip"]), int(ports[0]["port"])
        raise CallFailed("", f'no endpoints available for service "{name}"')

    async def _send(
        self,
        url: str,
        body: Obj,
        ctx: ssl.SSLContext,
        server_hostname: str | None,
        seconds: int,
        shown: str,
    ) -> Any:
        """POST ``body``; the decoded answer. CallFailed in kube's words, except a
        dropped kept-alive connection (ServerDisconnectedError), which the caller retries."""
        try:
            async with self._client().post(
                url,
                json=body,
                ssl=ctx,
                server_hostname=server_hostname,
                timeout=aiohttp.ClientTimeout(total=seconds),
            ) as r:
                answer = await r.json(content_type=None)
                if r.status != 200:
                    raise CallFailed(shown, f"expected response code 200, got {r.status}")
                return answer
        except TimeoutError as e:
            raise CallFailed(shown, "context deadline exceeded") from e
        except aiohttp.ClientConnectorCertificateError as e:
            raise CallFailed(
                shown, f"tls: failed to verify certificate: {e.certificate_error}"
            ) from e
        except aiohttp.ClientConnectorError as e:
            raise CallFailed(shown, _dial_error(e)) from e
        except aiohttp.ServerDisconnectedError:
            raise
        except (aiohttp.ClientError, ValueError) as e:
            raise CallFailed(shown, f"{type(e).__name__}: {e}") from e

    async def _post(self, hook: Mapping[str, Any], body: Obj) -> Obj:
        cc = hook.get("clientConfig") or {}
        timeout = int(hook.get("timeoutSeconds") or DEFAULT_TIMEOUT_SECONDS)
        server_hostname: str | None = None
        svc = cc.get("service")
        if isinstance(svc, dict):
            host = f"{svc.get('name')}.{svc.get('namespace')}.svc"
            shown = f"https://{host}:{int(svc.get('port') or 443)}{svc.get('path') or ''}"
            shown += f"?timeout={timeout}s"
            try:
                addr, port = self._endpoint(hook, svc)
            except CallFailed as e:
                raise CallFailed(shown, e.why) from e
            url = f"https://{addr}:{port}{svc.get('path') or ''}?timeout={timeout}s"
            server_hostname = host
        elif cc.get("url"):
            sep = "&" if "?" in str(cc["url"]) else "?"
            url = shown = f"{cc['url']}{sep}timeout={timeout}s"
        else:
            raise CallFailed(
                "", "the webhook has neither clientConfig.url nor clientConfig.service"
            )
        try:
            ctx = self._ssl_context(str(cc.get("caBundle") or ""))
        except (ValueError, ssl.SSLError) as e:
            raise CallFailed(shown, f"bad caBundle: {e}") from e
        for attempt in (1, 2):
            try:
                answer = await self._send(url, body, ctx, server_hostname, timeout, shown)
                break
            except aiohttp.ServerDisconnectedError as e:
                # a kept-alive connection the webhook closed (it restarted or stopped):
                # dial again once, as Go's transport retries an idempotent-safe request
                if attempt == 2:
                    raise CallFailed(shown, f"{type(e).__name__}: {e}") from e
        resp = answer.get("response") if isinstance(answer, dict) else None
        if not isinstance(resp, dict):
            raise CallFailed(shown, "the AdmissionReview has no response")
        if resp.get("uid") != body["request"]["uid"]:
            raise CallFailed(shown, "the response uid does not match the request uid")
        return resp


def _dial_error(e: aiohttp.ClientConnectorError) -> str:
    """Go's net/http wording: ``dial tcp 127.0.0.1:1: connect: connection refused``."""
    addr = f"{e.host}:{e.port}"
    os_err = e.os_error
    if getattr(os_err, "errno", None) == errno.ECONNREFUSED:
        return f"dial tcp {addr}: connect: connection refused"
    return f"dial tcp {addr}: {getattr(os_err, 'strerror', None) or os_err}"
