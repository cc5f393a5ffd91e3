"""Dynamic admission: the sandbox calls the webhooks of Mutating/ValidatingWebhookConfigurations
like kube-apiserver does, on CREATE.

For each create of a namespaced object, the configurations stored under
``admissionregistration.k8s.io/v1`` are read; every webhook whose ``rules`` (apiGroups,
apiVersions, resources, operations, scope; ``*`` wildcards), ``namespaceSelector`` and
``objectSelector`` match is called with an ``admission.k8s.io/v1`` AdmissionReview over
HTTPS, verified with the webhook's ``caBundle``, within ``timeoutSeconds`` (default 10).
Mutating webhooks run first (configurations by name, webhooks in order; a ``JSONPatch`` is
applied), then validating ones. A denial answers with the webhook's ``status.code``
(default 400) and ``admission webhook "<name>" denied the request: <message>``; a webhook
that cannot be called fails the request (500) with ``failurePolicy: Fail`` (the default)
and is skipped with ``Ignore``.

Deviations from kube-apiserver (sandbox scope): only ``clientConfig.url`` is called (a
``service`` reference cannot be resolved without a cluster network: such a webhook counts
as uncallable); only CREATE is sent (UPDATE/DELETE/CONNECT requests skip webhooks);
``reinvocationPolicy`` is ignored (each mutating webhook runs once); the object a webhook
sees has a uid the stored object does not keep (the create runs again after admission).
"""

from __future__ import annotations

import base64
import json
import ssl
import uuid
from collections.abc import Mapping
from typing import Any

import aiohttp
from pydantic import ValidationError

from bridge.config import LabelSelector
from bridge.sandbox.kubeapi.errors import ApiError
from bridge.sandbox.kubeapi.identity import UserInfo
from bridge.sandbox.kubeapi.patch import json_patch
from bridge.sandbox.kubeapi.resources import ResourceDef
from bridge.sandbox.kubeapi.store import Obj, Store

GROUP = "admissionregistration.k8s.io"
MUTATING_KEY = (GROUP, "mutatingwebhookconfigurations")
VALIDATING_KEY = (GROUP, "validatingwebhookconfigurations")
NS_KEY = ("", "namespaces")
DEFAULT_TIMEOUT_SECONDS = 10


def _listed(values: Any, want: str) -> bool:
    return isinstance(values, list) and ("*" in values or want in values)


def rule_matches(rule: Mapping[str, Any], rd: ResourceDef, operation: str) -> bool:
    """One ``rules[]`` entry against a request (subresources are never matched here)."""
    scope = rule.get("scope") or "*"
    if scope == "Namespaced" and not rd.namespaced:
        return False
    if scope == "Cluster" and rd.namespaced:
        return False
    return (
        _listed(rule.get("apiGroups"), rd.group)
        and _listed(rule.get("apiVersions"), rd.version)
        and _listed(rule.get("resources"), rd.plural)
        and _listed(rule.get("operations"), operation)
    )


def _selector_matches(selector: Any, labels: Mapping[str, str], where: str) -> bool:
    if not selector:
        return True
    try:
        return LabelSelector.model_validate(selector).matches(labels)
    except ValidationError as e:
        raise ApiError(500, "InternalError", f"webhook {where} is not a valid selector: {e}") from e


def webhook_matches(
    hook: Mapping[str, Any],
    rd: ResourceDef,
    operation: str,
    obj: Obj,
    namespace_labels: Mapping[str, str],
) -> bool:
    if not any(rule_matches(r, rd, operation) for r in hook.get("rules") or []):
        return False
    if rd.namespaced and not _selector_matches(
        hook.get("namespaceSelector"), namespace_labels, "namespaceSelector"
    ):
        return False
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return _selector_matches(hook.get("objectSelector"), labels, "objectSelector")


def review_request(
    rd: ResourceDef, operation: str, namespace: str, obj: Obj, user: UserInfo
) -> Obj:
    md = obj.get("metadata") or {}
    gvk = {"group": rd.group, "version": rd.version, "kind": rd.kind}
    gvr = {"group": rd.group, "version": rd.version, "resource": rd.plural}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": md.get("name", ""),
            "namespace": namespace,
            "operation": operation,
            "userInfo": user.as_dict(),
            "object": obj,
            "oldObject": None,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


class WebhookCaller:
    """Calls the stored webhook configurations (see the module docstring)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _hooks(self, key: tuple[str, str]) -> list[Mapping[str, Any]]:
        configs = sorted(self.store.list(key), key=lambda c: str(c["metadata"]["name"]))
        return [h for c in configs for h in c.get("webhooks") or [] if isinstance(h, dict)]

    def active(self) -> bool:
        return bool(self.store.list(MUTATING_KEY) or self.store.list(VALIDATING_KEY))

    def _namespace_labels(self, namespace: str) -> dict[str, str]:
        ns = self.store.get(NS_KEY, "", namespace) if namespace else None
        return dict(((ns or {}).get("metadata") or {}).get("labels") or {})

    async def mutate(
        self, rd: ResourceDef, operation: str, namespace: str, obj: Obj, user: UserInfo
    ) -> Obj:
        labels = self._namespace_labels(namespace)
        for hook in self._hooks(MUTATING_KEY):
            if webhook_matches(hook, rd, operation, obj, labels):
                resp = await self._call(hook, review_request(rd, operation, namespace, obj, user))
                if resp is None:
                    continue
                patch = resp.get("patch")
                if patch:
                    if resp.get("patchType", "JSONPatch") != "JSONPatch":
                        raise self._failure(hook, f"unsupported patchType {resp['patchType']}")
                    try:
                        ops = json.loads(base64.b64decode(patch))
                    except ValueError as e:
                        raise self._failure(hook, f"undecodable patch: {e}") from e
                    obj = json_patch(obj, ops)
        return obj

    async def validate(
        self, rd: ResourceDef, operation: str, namespace: str, obj: Obj, user: UserInfo
    ) -> None:
        labels = self._namespace_labels(namespace)
        for hook in self._hooks(VALIDATING_KEY):
            if webhook_matches(hook, rd, operation, obj, labels):
                await self._call(hook, review_request(rd, operation, namespace, obj, user))

    @staticmethod
    def _failure(hook: Mapping[str, Any], why: str) -> ApiError:
        return ApiError(
            500,
            "InternalError",
            f'Internal error occurred: failed calling webhook "{hook.get("name")}": {why}',
        )

    async def _call(self, hook: Mapping[str, Any], review: Obj) -> Obj | None:
        """The webhook's response; None when it failed and failurePolicy is Ignore.
        Raises ApiError on a denial, or on a failure with failurePolicy Fail."""
        name = str(hook.get("name") or "")
        fail = (hook.get("failurePolicy") or "Fail") == "Fail"
        try:
            resp = await self._post(hook, review)
        except ApiError:
            if fail:
                raise
            return None
        if resp.get("allowed"):
            return resp
        status = resp.get("status") or {}
        code = int(status.get("code") or 400)
        message = str(status.get("message") or "")
        return_reason = str(status.get("reason") or ("BadRequest" if code == 400 else "Forbidden"))
        raise ApiError(
            code, return_reason, f'admission webhook "{name}" denied the request: {message}'
        )

    async def _post(self, hook: Mapping[str, Any], review: Obj) -> Obj:
        cc = hook.get("clientConfig") or {}
        url = cc.get("url")
        if not url:
            raise self._failure(hook, "only clientConfig.url can be called in the sandbox")
        ctx: ssl.SSLContext | None = None
        if str(url).startswith("https://"):
            ctx = ssl.create_default_context()
            if cc.get("caBundle"):
                try:
                    ctx.load_verify_locations(cadata=base64.b64decode(cc["caBundle"]).decode())
                except (ValueError, ssl.SSLError) as e:
                    raise self._failure(hook, f"bad caBundle: {e}") from e
        timeout = aiohttp.ClientTimeout(
            total=float(hook.get("timeoutSeconds") or DEFAULT_TIMEOUT_SECONDS)
        )
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.post(str(url), json=review, ssl=ctx if ctx is not None else True) as r,
            ):
                body = await r.json(content_type=None)
                if r.status != 200:
                    raise self._failure(hook, f"HTTP {r.status}")
        except (aiohttp.ClientError, TimeoutError, ValueError) as e:
            raise self._failure(hook, f"{type(e).__name__}: {e}") from e
        resp = body.get("response") if isinstance(body, dict) else None
        if not isinstance(resp, dict):
            raise self._failure(hook, "the AdmissionReview has no response")
        if resp.get("uid") != review["request"]["uid"]:
            raise self._failure(hook, "the response uid does not match the request uid")
        return resp
