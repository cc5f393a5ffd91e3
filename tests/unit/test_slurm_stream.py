"""ArrayStream: a JSON document fed in chunks gives the same items and keys as json.loads."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bridge.errors import InvalidInput
from bridge.slurm.stream import ArrayStream

DOC: dict[str, Any] = {
    "jobs": [
        {"job_id": 1, "name": "ünïcode ✓", "nodes": "kube-node-[0-3]", "x": [1, {"y": None}]},
        {"job_id": 22, "admin_comment": '{"group":{"uid":"u"},"pods":["a/b"]}', "n": -1.5e3},
        {},
    ],
    "meta": {"slurm": {"release": "26.05.5"}},
    "errors": [],
    "last_update": 1234567,
    "flag": True,
}


def _stream(text: bytes, size: int) -> tuple[list[Any], dict[str, Any]]:
    s = ArrayStream("jobs")
    items: list[Any] = []
    for i in range(0, len(text), size):
        items += s.feed(text[i : i + size])
    items += s.close()
    return items, s.rest


@pytest.mark.parametrize("indent", [None, 2])
@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, 1 << 20])
def test_items_and_other_keys_match_a_whole_decode_at_any_chunk_size(
    indent: int | None, size: int
) -> None:
    text = json.dumps(DOC, indent=indent, ensure_ascii=False).encode()
    items, rest = _stream(text, size)
    assert items == DOC["jobs"]
    assert rest == {k: v for k, v in DOC.items() if k != "jobs"}


@pytest.mark.parametrize(
    ("doc", "items", "rest"),
    [
        (b'{"jobs": []}', [], {}),
        (b"{}", [], {}),
        (
            b'{"errors": [{"error_number": 5}], "jobs": [1, 2]}',
            [1, 2],
            {"errors": [{"error_number": 5}]},
        ),
        (b'{"jobs": {"not": "an array"}}', [], {"jobs": {"not": "an array"}}),
        (b' \n{"last_update": 12345}\n', [], {"last_update": 12345}),
    ],
)
def test_shapes(doc: bytes, items: list[Any], rest: dict[str, Any]) -> None:
    assert _stream(doc, 1) == (items, rest)


@pytest.mark.parametrize(
    "doc",
    [
        b'{"jobs": [{"job_id": 1}',  # cut short
        b'{"jobs": [1 2]}',  # missing comma
        b'["jobs"]',  # not an object
        b'{"jobs": [1]} trailing',
        b'{"jobs": [{"job_id": 1,]}',
        b"",
    ],
)
def test_broken_documents_are_refused_with_a_clear_error(doc: bytes) -> None:
    with pytest.raises(InvalidInput) as e:
        _stream(doc, 3)
    assert e.value.field == "response"
