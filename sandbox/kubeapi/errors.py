"""Kubernetes ``Status`` errors raised inside the sandbox API server.

Handlers raise :class:`ApiError`; the server turns it into a ``Status`` body with the
same ``reason`` and ``code`` a real kube-apiserver sends.
"""

from __future__ import annotations

import re
from typing import Any

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class ApiError(Exception):
    """An error answer: HTTP ``code``, Kubernetes ``reason`` and a human ``message``."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
    ) -> None:
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        super().__init__(message)

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:  # omitempty: a webhook's denial may carry none
            body["reason"] = self.reason
        body["code"] = self.code
        if self.details is not None:
            body["details"] = self.details
        return body


def not_found(resource: str, name: str, group: str = "") -> ApiError:
    gr = f"{resource}.{group}" if group else resource
    return ApiError(
        404,
        "NotFound",
        f'{gr} "{name}" not found',
        details={"name": name, "group": group, "kind": resource},
    )


def already_exists(resource: str, name: str, group: str = "") -> ApiError:
    gr = f"{resource}.{group}" if group else resource
    return ApiError(
        409,
        "AlreadyExists",
        f'{gr} "{name}" already exists',
        details={"name": name, "group": group, "kind": resource},
    )


def conflict(resource: str, name: str, why: str, group: str = "") -> ApiError:
    gr = f"{resource}.{group}" if group else resource
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {gr} "{name}": {why}',
        details={"name": name, "group": group, "kind": resource},
    )


def invalid(kind: str, name: str, field: str, reason: str, group: str = "") -> ApiError:
    return ApiError(
        422,
        "Invalid",
        f'{kind} "{name}" is invalid: {field}: {reason}',
        details={
            "name": name,
            "group": group,
            "kind": kind,
            "causes": [{"reason": "FieldValueInvalid", "message": reason, "field": field}],
        },
    )


def check_dns_label(
    kind: str, obj: dict[str, Any], field: str, value: Any, group: str, *, subdomain: bool = False
) -> None:
    """``value`` (at ``field`` of ``obj``) is a DNS label (RFC 1123; ``subdomain``: a DNS
    subdomain, dot-separated labels up to 253 characters), else 422 as kube-apiserver
    words it (``Required value`` when empty)."""
    name = str((obj.get("metadata") or {}).get("name", ""))
    if not isinstance(value, str) or not value:
        raise invalid(kind, name, field, "Required value", group)
    what, chars, most = ("label", "'-'", 63) if not subdomain else ("subdomain", "'-' or '.'", 253)
    labels = value.split(".") if subdomain else [value]
    if len(value) > most or not all(len(p) <= 63 and _DNS_LABEL.match(p) for p in labels):
        raise invalid(
            kind,
            name,
            field,
            f'Invalid value: "{value}": a lowercase RFC 1123 {what} must consist of lower case '
            f"alphanumeric characters or {chars}, and must start and end with an alphanumeric "
            "character",
            group,
        )


def check_max_items(
    kind: str, obj: dict[str, Any], field: str, items: list[Any], most: int, group: str
) -> None:
    """At most ``most`` ``items`` at ``field`` of ``obj``, else 422 as kube-apiserver words it."""
    if len(items) > most:
        name = str((obj.get("metadata") or {}).get("name", ""))
        reason = f"Too many: {len(items)}: must have at most {most} items"
        raise invalid(kind, name, field, reason, group)


def invalid_fields(
    kind: str, group: str, name: str, causes: list[tuple[str, str, str]]
) -> ApiError:
    """422 listing several bad fields, as kube's ``NewInvalid``: ``causes`` are
    (field, reason, message) with message like ``Forbidden: ...``."""
    parts = [f"{f}: {m}" for f, _, m in causes]
    listed = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    qualified = f"{kind}.{group}" if group else kind
    return ApiError(
        422,
        "Invalid",
        f'{qualified} "{name}" is invalid: {listed}',
        details={
            "name": name,
            "group": group,
            "kind": kind,
            "causes": [{"reason": r, "message": m, "field": f} for f, r, m in causes],
        },
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)
