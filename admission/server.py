"""The thin aiohttp layer over the pure ``mutate()`` / ``validate()`` functions.

Endpoints: ``POST /mutate``, ``POST /validate``, ``GET /healthz``, ``GET /readyz``. The plain-HTTP
ops listener (``GET /metrics`` and the health endpoints) is :class:`bridge.ops.OpsServer`.

Rules the server guarantees:

* a well-formed review always gets a well-formed AdmissionReview with the request's uid;
* a body that is not a v1 AdmissionReview gets 400 with a message naming the bad field;
* a body larger than ``admission.maxRequestBytes`` gets 413;
* an internal error -- a bug in mutate/validate, a failed namespace lookup, or
  ``admission.requestTimeoutSeconds`` running out -- is logged with the uid and answered by
  ``admission.failurePolicy``: ``Fail`` denies (code 500, "internal error"), ``Ignore``
  allows with no patch and a warning. The server itself never goes down for it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web

from admission.metrics import AdmissionMetrics
from admission.mutate import mutate
from admission.namespaces import NamespaceLabelSource
from admission.policy import AdmissionContext
from admission.review import AdmissionRequest, AdmissionResponse, parse_review
from admission.validate import validate
from bridge.errors import InvalidInput, KubeError
from bridge.logging import get_logger
from bridge.ops import add_health_routes, readiness

Reviewer = Callable[[AdmissionRequest, AdmissionContext], AdmissionResponse]


@dataclass
class WebhookDeps:
    """What the webhook app is built from (the composition root fills it in)."""

    ctx: AdmissionContext
    metrics: AdmissionMetrics = field(default_factory=AdmissionMetrics)
    namespaces: NamespaceLabelSource | None = None
    mutate: Reviewer = mutate
    validate: Reviewer = validate
    ready: Callable[[], bool] = lambda: True


def failure_response(req: AdmissionRequest, ctx: AdmissionContext, why: str) -> AdmissionResponse:
    """The verdict when the webhook cannot decide, per ``admission.failurePolicy``."""
    if ctx.config.admission.failure_policy == "Ignore":
        warning = f"slurm-bridge admission skipped: {why} (failurePolicy Ignore)"
        return AdmissionResponse(uid=req.uid, allowed=True, warnings=(warning,))
    return AdmissionResponse(
        uid=req.uid,
        allowed=False,
        code=500,
        reason="InternalError",
        message=f"slurm-bridge admission: {why} (failurePolicy Fail)",
    )


def _result(resp: AdmissionResponse, failed: bool) -> str:
    if failed:
        return "error"
    if not resp.allowed:
        return "denied"
    return "patched" if resp.patch else "allowed"


class _Handler:
    def __init__(self, deps: WebhookDeps, endpoint: str, review: Reviewer) -> None:
        self.deps = deps
        self.endpoint = endpoint
        self.review = review
        self.log = get_logger("admission")

    def _bad_request(self, message: str, started: float) -> web.Response:
        self.deps.metrics.observe(
            self.endpoint, "", "", "bad_request", time.perf_counter() - started
        )
        self.log.info("admission_bad_request", endpoint=self.endpoint, error=message)
        return web.json_response({"error": message}, status=400)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        settings = self.deps.ctx.config.admission
        try:
            async with asyncio.timeout(settings.request_timeout_seconds):
                body = await request.read()
        except TimeoutError:
            return self._bad_request("timed out reading the request body", started)
        except web.HTTPRequestEntityTooLarge:
            elapsed = time.perf_counter() - started
            self.deps.metrics.observe(self.endpoint, "", "", "too_large", elapsed)
            self.log.info("admission_request_too_large", endpoint=self.endpoint)
            raise
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError) as e:
            return self._bad_request(f"body is not valid JSON: {e}", started)
        try:
            req = parse_review(data)
        except InvalidInput as e:
            return self._bad_request(f"malformed AdmissionReview: {e.field}: {e.reason}", started)

        resp, failed = await self._decide(req, settings.request_timeout_seconds)
        try:
            payload = resp.to_review()
        except Exception:  # e.g. a patch that is not JSON-serialisable: a bug
            self.log.exception("admission_internal_error", endpoint=self.endpoint, uid=req.uid)
            resp, failed = failure_response(req, self.deps.ctx, "internal error"), True
            payload = resp.to_review()
        elapsed = time.perf_counter() - started
        result = _result(resp, failed)
        self.deps.metrics.observe(self.endpoint, req.kind.kind, req.operation, result, elapsed)
        log = self.log.info if result in ("denied", "error") else self.log.debug
        log(
            "admission_review",
            endpoint=self.endpoint,
            uid=req.uid,
            kind=req.kind.kind,
            operation=req.operation,
            namespace=req.namespace,
            name=req.name,
            user=req.user_info.username,
            result=result,
            message=resp.message or None,
            seconds=round(elapsed, 6),
        )
        return web.json_response(payload)

    async def _decide(
        self, req: AdmissionRequest, budget_seconds: float
    ) -> tuple[AdmissionResponse, bool]:
        ctx = self.deps.ctx
        try:
            async with asyncio.timeout(budget_seconds):
                if self.deps.namespaces is not None and ctx.needs_namespace_labels(req.namespace):
                    labels = await self.deps.namespaces.labels(req.namespace)
                    ctx = ctx.with_namespace_labels(labels)
            return self.review(req, ctx), False
        except TimeoutError:
            why = f"timed out after {budget_seconds:g}s"
        except KubeError as e:
            why = f"cannot read namespace {req.namespace}: {e}"
        except Exception:
            self.log.exception("admission_internal_error", endpoint=self.endpoint, uid=req.uid)
            why = "internal error"
        self.log.warning("admission_undecided", endpoint=self.endpoint, uid=req.uid, reason=why)
        return failure_response(req, ctx, why), True


def build_webhook_app(deps: WebhookDeps) -> web.Application:
    """The HTTPS app: /mutate, /validate, /healthz, /readyz."""
    app = web.Application(client_max_size=deps.ctx.config.admission.max_request_bytes)
    app.router.add_post("/mutate", _Handler(deps, "mutate", deps.mutate).handle)
    app.router.add_post("/validate", _Handler(deps, "validate", deps.validate).handle)
    add_health_routes(app, readiness(deps.ready))
    return app
