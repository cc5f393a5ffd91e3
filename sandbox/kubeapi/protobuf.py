"""Just enough of Kubernetes' protobuf encoding to read what kubectl's typed generators
send (``kubectl create namespace|configmap|secret|serviceaccount``): the ``k8s\\x00``
envelope, ``runtime.Unknown`` and those few kinds. Anything else is a 415, as before.
"""

from __future__ import annotations

import base64
from typing import Any

from sandbox.kubeapi.errors import ApiError

MAGIC = b"k8s\x00"
PROTOBUF = "application/vnd.kubernetes.protobuf"

# A schema maps field number -> (json name, type); a type is a scalar name, a nested
# schema (dict), or ("repeated", type).
Schema = dict[int, tuple[str, Any]]

_OBJECT_META: Schema = {
    1: ("name", "string"),
    2: ("generateName", "string"),
    3: ("namespace", "string"),
    5: ("uid", "string"),
    6: ("resourceVersion", "string"),
    11: ("labels", "map_ss"),
    12: ("annotations", "map_ss"),
    14: ("finalizers", ("repeated", "string")),
}
_LOCAL_REF: Schema = {1: ("name", "string")}
_KINDS: dict[str, Schema] = {
    "Namespace": {
        1: ("metadata", _OBJECT_META),
        2: ("spec", {1: ("finalizers", ("repeated", "string"))}),
    },
    "ConfigMap": {
        1: ("metadata", _OBJECT_META),
        2: ("data", "map_ss"),
        3: ("binaryData", "map_sb"),
        4: ("immutable", "bool"),
    },
    "Secret": {
        1: ("metadata", _OBJECT_META),
        2: ("data", "map_sb"),
        3: ("type", "string"),
        4: ("stringData", "map_ss"),
        5: ("immutable", "bool"),
    },
    "ServiceAccount": {
        1: ("metadata", _OBJECT_META),
        3: ("imagePullSecrets", ("repeated", _LOCAL_REF)),
        4: ("automountServiceAccountToken", "bool"),
    },
}


def _unsupported(why: str) -> ApiError:
    return ApiError(
        415, "UnsupportedMediaType", f"the body of the request was in an unknown format: {why}"
    )


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if i >= len(buf):
            raise _unsupported("truncated protobuf varint")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def fields(buf: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) of one message; value is int or bytes."""
    out: list[tuple[int, int, Any]] = []
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            val, i = _varint(buf, i)
            out.append((num, wire, val))
        elif wire == 2:
            n, i = _varint(buf, i)
            out.append((num, wire, buf[i : i + n]))
            i += n
        elif wire == 1:
            out.append((num, wire, buf[i : i + 8]))
            i += 8
        elif wire == 5:
            out.append((num, wire, buf[i : i + 4]))
            i += 4
        else:
            raise _unsupported(f"protobuf wire type {wire}")
    return out


def _scalar(typ: str, val: Any) -> Any:
    if typ == "string":
        return bytes(val).decode()
    if typ == "bytes":
        return base64.b64encode(bytes(val)).decode()
    if typ == "bool":
        return bool(val)
    return int(val)


def decode_message(buf: bytes, schema: Schema) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for num, _, val in fields(buf):
        if num not in schema:
            continue
        name, typ = schema[num]
        if typ in ("map_ss", "map_sb"):
            entry = {n: v for n, _, v in fields(val)}
            key = bytes(entry.get(1, b"")).decode()
            raw = bytes(entry.get(2, b""))
            obj.setdefault(name, {})[key] = (
                raw.decode() if typ == "map_ss" else base64.b64encode(raw).decode()
            )
        elif isinstance(typ, tuple):
            inner = typ[1]
            item = decode_message(val, inner) if isinstance(inner, dict) else _scalar(inner, val)
            obj.setdefault(name, []).append(item)
        elif isinstance(typ, dict):
            obj[name] = decode_message(val, typ)
        elif typ != "string" or val:  # empty strings are omitted, as in JSON
            obj[name] = _scalar(typ, val)
    return obj


def decode(body: bytes) -> dict[str, Any]:
    """A JSON-shaped object from a Kubernetes protobuf body (the kinds above only)."""
    if not body.startswith(MAGIC):
        raise _unsupported("protobuf body without the k8s envelope")
    unknown = {n: v for n, _, v in fields(body[len(MAGIC) :])}
    type_meta = {n: bytes(v).decode() for n, _, v in fields(unknown.get(1, b""))}
    api_version, kind = type_meta.get(1, ""), type_meta.get(2, "")
    schema = _KINDS.get(kind)
    if schema is None or api_version != "v1":
        raise _unsupported(f"protobuf is only understood for core/v1 {sorted(_KINDS)}")
    obj = decode_message(unknown.get(2, b""), schema)
    obj["apiVersion"] = api_version
    obj["kind"] = kind
    return obj
