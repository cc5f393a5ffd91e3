"""RFC 6901 JSON pointers and RFC 6902 patch operations, as the webhook emits them. Pure."""

from __future__ import annotations

from typing import Any


def escape_token(token: str) -> str:
    """Escape one reference token: ``~`` -> ``~0`` first, then ``/`` -> ``~1`` (RFC 6901 §3).

    The order matters: escaping ``/`` first would turn ``~1`` into ``~01``.
    """
    return token.replace("~", "~0").replace("/", "~1")


def pointer(*tokens: str | int) -> str:
    """A JSON pointer from raw tokens: ``pointer("metadata", "labels", "a/b")``."""
    return "".join("/" + escape_token(str(t)) for t in tokens)


def add(path: str, value: Any) -> dict[str, Any]:
    return {"op": "add", "path": path, "value": value}


def replace(path: str, value: Any) -> dict[str, Any]:
    return {"op": "replace", "path": path, "value": value}


def remove(path: str) -> dict[str, Any]:
    return {"op": "remove", "path": path}
