"""The thin aiohttp layer over the pure ``mutate()`` / ``validate()`` functions.

Endpoints: ``POST /mutate``, ``POST /validate``, ``POST /validate-placement`` (the
Slurm-node guard, :mod:`admission.placement`), ``GET /healthz``, ``GET /readyz``. The plain-HTTP
ops listener (``GET /metrics`` and the health endpoints) is :class:`bridge.ops.OpsServer`.

Rules the server guarantees:

* a well-formed review always gets a well-formed AdmissionReview with the request's uid;
* a Content-Type other than ``application/json`` gets 415;
* a body that is not a v1 AdmissionReview (not JSON, not UTF-8, nested deeper than
  :data:`~admission.review.MAX_JSON_DEPTH`, a bad field) gets 400 with a message naming it;
* a body larger than ``admission.maxRequestBytes`` gets 413; one not read completely within
  ``admission.requestTimeoutSeconds`` gets 408;
* a denial and its log line are bounded (:func:`admission.review.deny`), whatever the
  request holds;
* an internal error -- a bug in mutate/validate, a failed namespace or node lookup, or
  ``admission.requestTimeoutSeconds`` running out -- is logged with the uid and answered by
  ``admission.failurePolicy``: ``Fail`` denies (code 500, "internal error"), ``Ignore``
  allows with no patch and a warning. The server itself never goes down for it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from aiohttp import web

from admission.metrics import AdmissionMetrics
from admission.mutate import mutate
from admission.placement import node_to_look_up, validate_placement
from admission.policy import AdmissionContext
from admission.review import AdmissionRequest, AdmissionResponse, clip, decode_review
from admission.validate import validate
from bridge.errors import InvalidInput, KubeError
from bridge.kube.namespaces import NamespaceLabelSource
from bridge.logging import get_logger
from bridge.ops import add_health_routes, readiness

Reviewer = Callable[[AdmissionRequest, AdmissionContext], AdmissionResponse]


class NodeKindSource(Protocol):
    """Why a node is a Slurm node (``""``: it is not, or does not exist), by name."""

    async def get(self, name: str) -> str: ...


JSON_CONTENT_TYPE = "application/json"
# the longest message a log line of the webhook carries (a denial is bounded already)
LOG_MESSAGE_CHARS = 2000
# A user name in a log line, at most (the review refuses one over 1,024 characters).
LOG_USER_CHARS = 256


@dataclass
class WebhookDeps:
    """What the webhook app is built from (the composition root fills it in)."""

    ctx: AdmissionContext
    metrics: AdmissionMetrics = field(default_factory=AdmissionMetrics)
    namespaces: NamespaceLabelSource | None = None
    nodes: NodeKindSource | None = None
    mutate: Reviewer = mutate
    validate: Reviewer = validate
    validate_placement: Reviewer = validate_placement
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

    def _refuse(self, status: int, result: str, message: str, started: float) -> web.Response:
        """A request that is not a review we can read: 400, 408, 413 or 415."""
        self.deps.metrics.observe(self.endpoint, "", "", result, time.perf_counter() - started)
        message = clip(message, LOG_MESSAGE_CHARS)
        self.log.info("admission_bad_request", endpoint=self.endpoint, status=status, error=message)
        response = web.json_response({"error": message}, status=status)
        if status in (408, 413):
            response.force_close()  # the rest of the body was not read: the stream is spent
        return response

    async def handle(self, request: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        settings = self.deps.ctx.config.admission
        if request.content_type != JSON_CONTENT_TYPE:
            got = clip(request.headers.get("Content-Type", "(none)"), 100)
            message = f"Content-Type must be {JSON_CONTENT_TYPE}, got {got}"
            return self._refuse(415, "unsupported_media", message, started)
        try:
            async with asyncio.timeout(settings.request_timeout_seconds):
                body = await request.read()
        except TimeoutError:
            return self._refuse(408, "bad_request", "timed out reading the request body", started)
        except web.HTTPRequestEntityTooLarge:
            limit = settings.max_request_bytes
            message = f"body larger than admission.maxRequestBytes ({limit} bytes)"
            return self._refuse(413, "too_large", message, started)
        try:
            req = decode_review(body)
        except InvalidInput as e:
            message = f"malformed AdmissionReview: {e.field}: {e.reason}"
            return self._refuse(400, "bad_request", message, started)

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
            user=clip(req.user_info.username, LOG_USER_CHARS),
            result=result,
            message=clip(resp.message, LOG_MESSAGE_CHARS) or None,
            seconds=round(elapsed, 6),
        )
        return web.json_response(payload)

    async def _decide(
        self, req: AdmissionRequest, budget_seconds: float
    ) -> tuple[AdmissionResponse, bool]:
        ctx = self.deps.ctx
        reading = f"namespace {req.namespace}"
        try:
            async with asyncio.timeout(budget_seconds):
                if self.endpoint == "placement":
                    node = node_to_look_up(req, ctx) if self.deps.nodes is not None else None
                    if node is not None and self.deps.nodes is not None:
                        reading = f"node {clip(node, 253)}"
                        ctx = ctx.with_slurm_node(node, await self.deps.nodes.get(node))
                elif self.deps.namespaces is not None and ctx.needs_namespace_labels(req.namespace):
                    labels = await self.deps.namespaces.labels(req.namespace)
                    ctx = ctx.with_namespace_labels(labels)
            return self.review(req, ctx), False
        except TimeoutError:
            why = f"timed out after {budget_seconds:g}s"
        except KubeError as e:
            why = f"cannot read {reading}: {e}"
        except Exception:
            self.log.exception("admission_internal_error", endpoint=self.endpoint, uid=req.uid)
            why = "internal error"
        self.log.warning("admission_undecided", endpoint=self.endpoint, uid=req.uid, reason=why)
        return failure_response(req, ctx, why), True


def build_webhook_app(deps: WebhookDeps) -> web.Application:
    """The HTTPS app: /mutate, /validate, /validate-placement, /healthz, /readyz."""
    app = web.Application(client_max_size=deps.ctx.config.admission.max_request_bytes)
    app.router.add_post("/mutate", _Handler(deps, "mutate", deps.mutate).handle)
    app.router.add_post("/validate", _Handler(deps, "validate", deps.validate).handle)
    placement = _Handler(deps, "placement", deps.validate_placement)
    app.router.add_post("/validate-placement", placement.handle)
    add_health_routes(app, readiness(deps.ready))
    return app
