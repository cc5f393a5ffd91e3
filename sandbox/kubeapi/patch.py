"""The three patch formats of kube-apiserver: JSON merge patch (RFC 7386), JSON patch
(RFC 6902) and strategic merge patch (built-in types only).

Strategic merge knows the patch strategies of the fields the bridge and kubectl touch:
lists merged by key (containers by name, conditions by type, ...), primitive lists merged
as a union (finalizers), everything else replaced. Directives ``$patch``,
``$retainKeys``, ``$deleteFromPrimitiveList/<f>`` and ``$setElementOrder/<f>`` are honoured.
"""

from __future__ import annotations

from typing import Any

from bridge.fastjson import clone
from sandbox.kubeapi.errors import ApiError, bad_request

# list field name -> merge key ("" = primitive list merged as a set)
STRATEGIC_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
    "ephemeralContainerStatuses": "name",
    "conditions": "type",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "ownerReferences": "uid",
    "addresses": "type",
    "podIPs": "ip",
    "hostIPs": "ip",
    "hostAliases": "ip",
    "finalizers": "",
    "resourceClaims": "name",
}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return clone(patch)
    out = clone(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


# --- JSON patch -----------------------------------------------------------------------


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise bad_request(f"json patch: invalid path {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str], path: str) -> tuple[Any, str]:
    cur = doc
    for p in parts[:-1]:
        if isinstance(cur, dict) and p in cur:
            cur = cur[p]
        elif isinstance(cur, list) and p.isdigit() and int(p) < len(cur):
            cur = cur[int(p)]
        else:
            raise ApiError(422, "Invalid", f"json patch: path {path!r} does not exist")
    return cur, parts[-1]


def _get(doc: Any, path: str) -> Any:
    cur = doc
    for p in _pointer(path):
        if isinstance(cur, dict) and p in cur:
            cur = cur[p]
        elif isinstance(cur, list) and p.isdigit() and int(p) < len(cur):
            cur = cur[int(p)]
        else:
            raise ApiError(422, "Invalid", f"json patch: path {path!r} does not exist")
    return cur


def _add(doc: Any, path: str, value: Any) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent, last = _parent(doc, parts, path)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise ApiError(422, "Invalid", f"json patch: index out of range in {path!r}")
    else:
        raise ApiError(422, "Invalid", f"json patch: cannot add at {path!r}")
    return doc


def _remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        raise bad_request("json patch: cannot remove the root")
    parent, last = _parent(doc, parts, path)
    if isinstance(parent, dict) and last in parent:
        del parent[last]
    elif isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        del parent[int(last)]
    else:
        raise ApiError(422, "Invalid", f"json patch: path {path!r} does not exist")
    return doc


def json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902 add/remove/replace/move/copy/test."""
    if not isinstance(ops, list):
        raise bad_request("json patch: the body must be a JSON array of operations")
    doc = clone(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise bad_request(f"json patch: malformed operation {op!r}")
        kind, path = op["op"], op["path"]
        if kind == "add":
            doc = _add(doc, path, clone(op.get("value")))
        elif kind == "remove":
            doc = _remove(doc, path)
        elif kind == "replace":
            _get(doc, path)
            doc = _remove(doc, path) if _pointer(path) else doc
            doc = _add(doc, path, clone(op.get("value")))
        elif kind in ("move", "copy"):
            value = clone(_get(doc, op.get("from", "")))
            if kind == "move":
                doc = _remove(doc, op["from"])
            doc = _add(doc, path, value)
        elif kind == "test":
            if _get(doc, path) != op.get("value"):
                raise ApiError(422, "Invalid", f"json patch: test failed at {path!r}")
        else:
            raise bad_request(f"json patch: unknown operation {kind!r}")
    return doc


# --- strategic merge patch --------------------------------------------------------------


def _merge_keyed_list(orig: list[Any], patch: list[Any], key: str) -> list[Any]:
    out = [clone(x) for x in orig]
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            if isinstance(item, dict) and item.get("$patch") == "replace":
                continue
            out.append(clone(item))
            continue
        directive = item.get("$patch")
        idx = next(
            (i for i, x in enumerate(out) if isinstance(x, dict) and x.get(key) == item[key]),
            None,
        )
        if directive == "delete":
            if idx is not None:
                del out[idx]
            continue
        clean = {k: v for k, v in item.items() if k != "$patch"}
        if idx is None:
            out.append(strategic_merge({}, clean))
        else:
            out[idx] = strategic_merge(out[idx], clean)
    return out


def strategic_merge(target: Any, patch: Any) -> Any:
    """Apply a strategic merge patch to ``target`` (a built-in object)."""
    if not isinstance(patch, dict):
        return clone(patch)
    if patch.get("$patch") == "replace":
        return {k: clone(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return {}
    out: dict[str, Any] = clone(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    for k, v in patch.items():
        if k in ("$patch", "$retainKeys") or k.startswith("$setElementOrder/"):
            continue
        if k.startswith("$deleteFromPrimitiveList/"):
            field = k.split("/", 1)[1]
            if isinstance(out.get(field), list) and isinstance(v, list):
                out[field] = [x for x in out[field] if x not in v]
            continue
        if v is None:
            out.pop(k, None)
            continue
        cur = out.get(k)
        if isinstance(v, list) and k in STRATEGIC_KEYS:
            key = STRATEGIC_KEYS[k]
            base = cur if isinstance(cur, list) else []
            if any(isinstance(x, dict) and x.get("$patch") == "replace" for x in v):
                base = []
            if key == "":
                out[k] = base + [x for x in v if x not in base]
            else:
                out[k] = _merge_keyed_list(base, v, key)
        elif isinstance(v, dict):
            out[k] = strategic_merge(cur, v)
        else:
            out[k] = clone(v)
    if isinstance(retain, list):
        out = {k: v for k, v in out.items() if k in retain}
    return out
