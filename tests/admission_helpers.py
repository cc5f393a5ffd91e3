"""Builders for AdmissionReview bodies, and an independent RFC 6902 applier to check patches."""

from __future__ import annotations

import base64
import copy
import itertools
import json
from typing import Any

_uids = itertools.count(1)


def make_pod(
    *,
    namespace: str = "slurm-bridge",
    name: str = "web-0",
    scheduler: str | None = "default-scheduler",
    annotations: dict[str, Any] | None = None,
    labels: dict[str, Any] | None = None,
    tolerations: list[Any] | None = None,
    node: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    if tolerations is not None:
        spec["tolerations"] = tolerations
    if node is not None:
        spec["nodeName"] = node
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations is not None:
        meta["annotations"] = annotations
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def make_review(
    obj: dict[str, Any] | None,
    *,
    operation: str = "CREATE",
    old: dict[str, Any] | None = None,
    user: str = "alice",
    kind: str = "Pod",
    group: str = "",
    version: str = "v1",
    namespace: str | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    meta = (obj or old or {}).get("metadata", {})
    ns = namespace if namespace is not None else meta.get("namespace", "")
    request: dict[str, Any] = {
        "uid": uid or f"uid-{next(_uids)}",
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": kind.lower() + "s"},
        "operation": operation,
        "namespace": ns,
        "name": meta.get("name", ""),
        "userInfo": {"username": user, "groups": ["system:authenticated"]},
        "object": obj,
        "oldObject": old,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _walk(doc: Any, path: str) -> tuple[Any, str]:
    assert path.startswith("/"), path
    tokens = [_unescape(t) for t in path[1:].split("/")]
    parent = doc
    for t in tokens[:-1]:
        parent = parent[int(t)] if isinstance(parent, list) else parent[t]
    return parent, tokens[-1]


def apply_json_patch(doc: Any, patch: list[dict[str, Any]]) -> Any:
    """Apply add/replace/remove (RFC 6902) to a copy of ``doc``; strict about missing targets."""
    out = copy.deepcopy(doc)
    for op in patch:
        parent, last = _walk(out, op["path"])
        if op["op"] == "add":
            if isinstance(parent, list):
                idx = len(parent) if last == "-" else int(last)
                parent.insert(idx, copy.deepcopy(op["value"]))
            else:
                parent[last] = copy.deepcopy(op["value"])
        elif op["op"] == "replace":
            if isinstance(parent, list):
                parent[int(last)] = copy.deepcopy(op["value"])
            else:
                assert last in parent, f"replace of missing {op['path']}"
                parent[last] = copy.deepcopy(op["value"])
        elif op["op"] == "remove":
            if isinstance(parent, list):
                del parent[int(last)]
            else:
                del parent[last]
        else:
            raise AssertionError(f"unexpected op {op['op']}")
    return out


def decode_patch(review_response: dict[str, Any]) -> list[dict[str, Any]]:
    resp = review_response["response"]
    if "patch" not in resp:
        return []
    assert resp["patchType"] == "JSONPatch"
    patch: list[dict[str, Any]] = json.loads(base64.b64decode(resp["patch"]))
    return patch
