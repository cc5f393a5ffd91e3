"""AdmissionReview v1 (admission.k8s.io/v1): typed request, response builders. Pure.

The API server sends ``{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
"request": {...}}`` and expects the same envelope back with ``response.uid`` equal to
``request.uid``. Only the fields the webhook uses are modelled; the rest is ignored.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bridge import fastjson
from bridge.errors import InvalidInput

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
# A denial lists this many errors, then "... and N more"; each error is cut to
# MAX_ERROR_CHARS (a reason may quote a value the user wrote).
MAX_DENY_ERRORS = 20
MAX_ERROR_CHARS = 300
# Nesting levels of a review body (objects and arrays). Kubernetes objects stay far below
# (a JobSet's pod template with managedFields is ~25); orjson itself stops at 1,024.
MAX_JSON_DEPTH = 100

Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
# What the API server sends in a review's uid (a UUID), namespace (a DNS-1123 label) and
# name (a DNS-1123 subdomain at most): anything else is not from an API server, and is
# refused before it reaches a log, an answer or a namespace lookup (a 2 MiB uid used to
# write a 2.5 MB log line; a 2 MiB namespace came back in the answer).
MAX_UID_CHARS = 128
MAX_NAME_CHARS = 253
MAX_USER_CHARS = 1024
_UID = r"^[\x21-\x7e]+$"
_NAMESPACE = r"^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)?$"
_NAME = r"^[\x21-\x7e]*$"
_SUBRESOURCE = r"^[a-z]*$"


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class GroupVersionKind(_Model):
    group: str = ""
    version: str = ""
    kind: str


class UserInfo(_Model):
    username: str = Field(default="", max_length=MAX_USER_CHARS)
    groups: tuple[str, ...] = ()


class AdmissionRequest(_Model):
    """``request`` of an AdmissionReview: what is being admitted, by whom."""

    uid: str = Field(min_length=1, max_length=MAX_UID_CHARS, pattern=_UID)
    kind: GroupVersionKind
    operation: Operation
    # "" for the resource itself; "resize" for pods/resize (in-place resize, 1.33+) ...
    sub_resource: str = Field(default="", alias="subResource", max_length=63, pattern=_SUBRESOURCE)
    namespace: str = Field(default="", pattern=_NAMESPACE)
    name: str = Field(default="", max_length=MAX_NAME_CHARS, pattern=_NAME)
    object: dict[str, Any] | None = None
    old_object: dict[str, Any] | None = Field(default=None, alias="oldObject")
    user_info: UserInfo = Field(default_factory=UserInfo, alias="userInfo")
    dry_run: bool = Field(default=False, alias="dryRun")


@dataclass(frozen=True)
class AdmissionResponse:
    """The webhook's verdict. ``patch`` is a JSONPatch (list of operations), not yet base64."""

    uid: str
    allowed: bool
    message: str = ""
    code: int = 200
    reason: str = ""
    causes: tuple[tuple[str, str], ...] = ()  # (field, message) per error
    patch: tuple[Mapping[str, Any], ...] = ()
    warnings: tuple[str, ...] = field(default=())

    def to_review(self) -> dict[str, Any]:
        """The AdmissionReview envelope to send back."""
        resp: dict[str, Any] = {"uid": self.uid, "allowed": self.allowed}
        if not self.allowed or self.message:
            status: dict[str, Any] = {"code": self.code}
            if self.message:
                status["message"] = self.message
            if self.reason:
                status["reason"] = self.reason
            if self.causes:
                status["details"] = {
                    "causes": [
                        {"type": "FieldValueInvalid", "field": f, "message": m}
                        for f, m in self.causes
                    ]
                }
            resp["status"] = status
        if self.patch:
            raw = json.dumps(list(self.patch), separators=(",", ":")).encode()
            resp["patch"] = base64.b64encode(raw).decode()
            resp["patchType"] = "JSONPatch"
        if self.warnings:
            resp["warnings"] = list(self.warnings)
        return {"apiVersion": API_VERSION, "kind": KIND, "response": resp}


def allow(uid: str, *, patch: Sequence[Mapping[str, Any]] = ()) -> AdmissionResponse:
    return AdmissionResponse(uid=uid, allowed=True, patch=tuple(patch))


def clip(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """``text``, cut to ``limit`` characters (the cut marked with ``...``)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def deny(uid: str, obj: str, errors: Sequence[InvalidInput]) -> AdmissionResponse:
    """Deny with the errors in one message; each names its field and the reason.

    The message is bounded whatever the request holds: the first :data:`MAX_DENY_ERRORS`
    errors (each cut to :data:`MAX_ERROR_CHARS`), then ``... and N more``."""
    n = len(errors)
    shown = [(clip(e.field), clip(e.reason)) for e in errors[:MAX_DENY_ERRORS]]
    parts = [f"{f}: {r}" for f, r in shown]
    if n > len(shown):
        parts.append(f"... and {n - len(shown)} more")
    head = f"{clip(obj)}: " if obj else ""
    message = f"{head}{n} error{'s' if n != 1 else ''}: " + "; ".join(parts)
    return AdmissionResponse(
        uid=uid, allowed=False, message=message, code=422, reason="Invalid", causes=tuple(shown)
    )


def _deeper_than(value: dict[str, Any] | list[Any], limit: int) -> bool:
    """True when ``value`` nests objects/arrays more than ``limit`` levels (iterative:
    no recursion on untrusted input)."""
    stack: list[tuple[dict[str, Any] | list[Any], int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children: Iterable[Any] = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


def decode_review(body: bytes) -> AdmissionRequest:
    """Decode and parse a raw AdmissionReview body, or raise InvalidInput naming the fault:
    not JSON (or not UTF-8), nested deeper than :data:`MAX_JSON_DEPTH`, or malformed."""
    try:
        data = fastjson.loads(body)
    except ValueError as e:  # orjson: bad JSON, bad UTF-8, over 1,024 levels
        raise InvalidInput("<body>", f"is not valid JSON: {e}") from None
    if isinstance(data, dict | list) and _deeper_than(data, MAX_JSON_DEPTH):
        raise InvalidInput("<body>", f"nests objects/arrays deeper than {MAX_JSON_DEPTH} levels")
    return parse_review(data)


def parse_review(body: object) -> AdmissionRequest:
    """Parse a decoded AdmissionReview body, or raise InvalidInput naming the bad field."""
    if not isinstance(body, dict):
        raise InvalidInput("<body>", "must be a JSON object (an AdmissionReview)")
    if body.get("apiVersion") != API_VERSION:
        got = clip(repr(body.get("apiVersion")), 80)
        raise InvalidInput("apiVersion", f"must be {API_VERSION!r}, got {got}")
    if body.get("kind") != KIND:
        raise InvalidInput("kind", f"must be {KIND!r}, got {clip(repr(body.get('kind')), 80)}")
    request = body.get("request")
    if not isinstance(request, dict):
        raise InvalidInput("request", "missing or not an object")
    try:
        return AdmissionRequest.model_validate(request)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InvalidInput(f"request.{where}" if where else "request", first["msg"]) from None


def object_name(req: AdmissionRequest) -> str:
    """``Pod ns/name`` for messages (``generateName`` when the name is not set yet)."""
    obj = req.object or req.old_object or {}
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    name = req.name or meta.get("name") or ""
    if not name and isinstance(meta.get("generateName"), str):
        name = f"{meta['generateName']}*"
    ns = req.namespace or meta.get("namespace") or ""
    ident = f"{ns}/{name}" if ns else str(name)
    return f"{req.kind.kind} {ident}".strip()
