"""JSON on the hot paths, in one place: orjson (C) encodes and decodes 3-10x faster than
:mod:`json`, and every request of the scheduler, the controller and the sandbox API server
goes through one of these (py-spy: :mod:`json` was 9% of the scheduler's CPU in a burst).

- :func:`loads` takes ``bytes`` or ``str``; bad input raises a :class:`ValueError`
  (orjson's error is a :class:`json.JSONDecodeError`), as :func:`json.loads` does.
- :func:`dumps` returns compact UTF-8 ``bytes``. Only JSON types are accepted (``str`` keys;
  tuples become arrays); anything else raises :class:`TypeError`.
- :func:`canonical` is a comparable key of a JSON tree: keys sorted at every level,
  anything not JSON as its ``str``.
- :func:`clone` deep-copies a JSON tree (dicts, lists, scalars), ~10x faster than
  :func:`copy.deepcopy`; a tree that is not pure JSON falls back to ``deepcopy``.
"""

from __future__ import annotations

import copy
from typing import Any, TypeVar

import orjson

T = TypeVar("T")
# clone(): what orjson would turn into something else (a datetime into a string, a
# dataclass into a dict, a str subclass into a str) raises instead, and is deep-copied.
_EXACT = (
    orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    return orjson.loads(data)


def dumps(obj: Any) -> bytes:
    return orjson.dumps(obj)


def canonical(obj: Any) -> str:
    """``json.dumps(obj, sort_keys=True, default=str)``, compact, in a tenth of the time
    (a pod's placement fields are keyed so on every translation)."""
    option = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
    return orjson.dumps(obj, option=option, default=str).decode()


def clone(obj: T) -> T:
    """A deep copy of the JSON tree ``obj`` (an independent copy: nothing is shared).
    Tuples inside it come back as lists."""
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    try:
        out: T = orjson.loads(orjson.dumps(obj, option=_EXACT))
    except TypeError:  # not pure JSON (a datetime, a set, a non-str key): keep every type
        return copy.deepcopy(obj)
    if type(out) is not type(obj):  # a tuple at the top comes back a list
        return copy.deepcopy(obj)
    return out
