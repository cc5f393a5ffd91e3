"""The admission limits as pure functions: bounded label values, a bounded denial, and the
body decoder that refuses what would recurse or not decode (no server needed)."""

from __future__ import annotations

import json

import pytest

from admission.metrics import OTHER, AdmissionMetrics, bounded
from admission.review import (
    MAX_DENY_ERRORS,
    MAX_ERROR_CHARS,
    MAX_JSON_DEPTH,
    decode_review,
    deny,
)
from bridge.errors import InvalidInput
from tests.admission_helpers import make_pod, make_review


def test_20000_made_up_kinds_add_one_metric_series() -> None:
    metrics = AdmissionMetrics()
    metrics.observe("validate", "Pod", "CREATE", "allowed", 0.001)
    before = len(metrics.exposition())
    for i in range(20_000):
        metrics.observe("validate", f"Kind{i}", f"OP{i}", f"r{i}", 0.001)
    text = metrics.exposition().decode()
    assert len(text) - before < 2_000
    assert f'kind="{OTHER}",operation="{OTHER}",result="{OTHER}"' in text
    assert "Kind1" not in text


def test_bounded_keeps_known_values_and_the_empty_one() -> None:
    allowed = frozenset({"Pod"})
    assert [bounded(v, allowed) for v in ("Pod", "", "pod", "x" * 1000)] == [
        "Pod",
        "",
        OTHER,
        OTHER,
    ]


def test_a_denial_of_thousands_of_long_errors_stays_small_and_says_how_many() -> None:
    errors = [InvalidInput(f"metadata.annotations[k{i}]", "x" * 10_000) for i in range(5_000)]
    resp = deny("u", "Pod ns/p", errors)
    assert resp.message.startswith("Pod ns/p: 5000 errors: metadata.annotations[k0]: xxx")
    assert resp.message.endswith(f"; ... and {5_000 - MAX_DENY_ERRORS} more")
    assert len(resp.causes) == MAX_DENY_ERRORS
    assert all(len(reason) == MAX_ERROR_CHARS for _, reason in resp.causes)
    assert len(resp.message) < MAX_DENY_ERRORS * 2 * (MAX_ERROR_CHARS + 2) + 100


def test_a_short_denial_is_unchanged() -> None:
    resp = deny("u", "Pod ns/p", [InvalidInput("f", "bad")])
    assert resp.message == "Pod ns/p: 1 error: f: bad"
    assert resp.causes == (("f", "bad"),)


def nested(levels: int) -> bytes:
    review = json.dumps(make_review(make_pod(annotations={"x": "HOLE"}))).encode()
    return review.replace(b'"HOLE"', b"[" * levels + b"]" * levels)


@pytest.mark.parametrize("levels", [MAX_JSON_DEPTH, 1_023, 1_024, 50_000, 100_000])
def test_bodies_nested_too_deep_are_invalid_input_naming_the_body(levels: int) -> None:
    with pytest.raises(InvalidInput) as info:
        decode_review(nested(levels))
    assert info.value.field == "<body>"


def test_a_body_within_the_depth_limit_decodes() -> None:
    assert decode_review(nested(MAX_JSON_DEPTH - 6)).kind.kind == "Pod"


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (b"\xff", "<body>"),
        (b"[]", "<body>"),
        (b'{"apiVersion": "' + b"v" * 100_000 + b'"}', "apiVersion"),
        (json.dumps({**make_review(None), "kind": ["x"] * 10_000}).encode(), "kind"),
    ],
)
def test_undecodable_or_wrong_bodies_name_the_field_and_stay_short(raw: bytes, field: str) -> None:
    with pytest.raises(InvalidInput) as info:
        decode_review(raw)
    assert info.value.field == field
    assert len(info.value.reason) < 200
