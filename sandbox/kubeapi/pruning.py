"""Structural-schema pruning of custom resources, as the real server does it: fields not
declared in the CRD's openAPIV3Schema are silently dropped, unless a node says
``x-kubernetes-preserve-unknown-fields: true`` or has ``additionalProperties``."""

from __future__ import annotations

from typing import Any

_ROOT_KEEP = ("apiVersion", "kind", "metadata")


def prune(value: Any, schema: dict[str, Any] | None) -> Any:
    """A copy of ``value`` without the fields ``schema`` does not declare."""
    if schema is None or schema.get("x-kubernetes-preserve-unknown-fields"):
        if isinstance(value, dict) and schema is not None and "properties" in schema:
            props = schema["properties"]
            return {k: prune(v, props.get(k)) if k in props else v for k, v in value.items()}
        return value
    if isinstance(value, dict):
        props = schema.get("properties")
        addl = schema.get("additionalProperties")
        if props is not None:
            return {k: prune(v, props[k]) for k, v in value.items() if k in props}
        if isinstance(addl, dict):
            return {k: prune(v, addl) for k, v in value.items()}
        if addl is True:
            return value
        return {} if schema.get("type") == "object" else value
    if isinstance(value, list):
        items = schema.get("items")
        return [prune(v, items) if isinstance(items, dict) else v for v in value]
    return value


def prune_object(obj: dict[str, Any], schema: dict[str, Any] | None) -> dict[str, Any]:
    """Prune a whole custom object; apiVersion, kind and metadata are always kept."""
    if schema is None:
        return obj
    props = schema.get("properties") or {}
    out = {k: v for k, v in obj.items() if k in _ROOT_KEEP}
    for k, v in obj.items():
        if k in _ROOT_KEEP:
            continue
        if k in props:
            out[k] = prune(v, props[k])
        elif schema.get("x-kubernetes-preserve-unknown-fields"):
            out[k] = v
    return out
