"""AdmissionReview v1 (admission.k8s.io/v1): typed request, response builders. Pure.

The API server sends ``{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
"request": {...}}`` and expects the same envelope back with ``response.uid`` equal to
``request.uid``. Only the fields the webhook uses are modelled; the rest is ignored.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bridge.errors import InvalidInput

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"

Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class GroupVersionKind(_Model):
    group: str = ""
    version: str = ""
    kind: str


class UserInfo(_Model):
    username: str = ""
    groups: tuple[str, ...] = ()


class AdmissionRequest(_Model):
    """``request`` of an AdmissionReview: what is being admitted, by whom."""

    uid: str = Field(min_length=1)
    kind: GroupVersionKind
    operation: Operation
    namespace: str = ""
    name: str = ""
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


def deny(uid: str, obj: str, errors: Sequence[InvalidInput]) -> AdmissionResponse:
    """Deny with EVERY error in one message; each names its field and the reason."""
    parts = [f"{e.field}: {e.reason}" for e in errors]
    n = len(parts)
    head = f"{obj}: " if obj else ""
    message = f"{head}{n} error{'s' if n != 1 else ''}: " + "; ".join(parts)
    return AdmissionResponse(
        uid=uid,
        allowed=False,
        message=message,
        code=422,
        reason="Invalid",
        causes=tuple((e.field, e.reason) for e in errors),
    )


def parse_review(body: object) -> AdmissionRequest:
    """Parse a decoded AdmissionReview body, or raise InvalidInput naming the bad field."""
    if not isinstance(body, dict):
        raise InvalidInput("<body>", "must be a JSON object (an AdmissionReview)")
    if body.get("apiVersion") != API_VERSION:
        raise InvalidInput("apiVersion", f"must be {API_VERSION!r}, got {body.get('apiVersion')!r}")
    if body.get("kind") != KIND:
        raise InvalidInput("kind", f"must be {KIND!r}, got {body.get('kind')!r}")
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
