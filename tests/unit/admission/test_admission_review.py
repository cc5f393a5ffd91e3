"""AdmissionReview envelope: malformed bodies name the bad field; responses are well-formed."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from admission.review import AdmissionResponse, deny, parse_review
from bridge.errors import InvalidInput
from tests.admission_helpers import make_pod, make_review


def _without(d: dict[str, Any], *path: str) -> dict[str, Any]:
    out = json.loads(json.dumps(d))
    cur = out
    for p in path[:-1]:
        cur = cur[p]
    del cur[path[-1]]
    return out


GOOD = make_review(make_pod(), uid="u-1")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param([], "<body>", id="not-an-object"),
        pytest.param(
            {**GOOD, "apiVersion": "admission.k8s.io/v1beta1"}, "apiVersion", id="v1beta1"
        ),
        pytest.param({**GOOD, "kind": "Pod"}, "kind", id="wrong-kind"),
        pytest.param(_without(GOOD, "request"), "request", id="no-request"),
        pytest.param(_without(GOOD, "request", "uid"), "request.uid", id="no-uid"),
        pytest.param(
            {**GOOD, "request": {**GOOD["request"], "uid": ""}}, "request.uid", id="empty-uid"
        ),
        pytest.param(
            {**GOOD, "request": {**GOOD["request"], "operation": "PATCH"}},
            "request.operation",
            id="unknown-operation",
        ),
        pytest.param(_without(GOOD, "request", "kind"), "request.kind", id="no-kind"),
        pytest.param(
            {**GOOD, "request": {**GOOD["request"], "object": [1]}},
            "request.object",
            id="object-list",
        ),
    ],
)
def test_malformed_review_names_the_field(body: object, field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        parse_review(body)
    assert err.value.field == field
    assert err.value.reason


def test_response_echoes_uid_and_encodes_patch_base64() -> None:
    patch = ({"op": "add", "path": "/spec/x", "value": 1},)
    out = AdmissionResponse(uid="u-9", allowed=True, patch=patch).to_review()
    assert out["apiVersion"] == "admission.k8s.io/v1"
    assert out["kind"] == "AdmissionReview"
    assert out["response"]["uid"] == "u-9"
    assert out["response"]["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(out["response"]["patch"])) == list(patch)


def test_denial_lists_every_error_with_field_and_reason() -> None:
    errs = [InvalidInput("a", "bad a"), InvalidInput("b", "bad b")]
    out = deny("u", "Pod ns/p", errs).to_review()["response"]
    assert out["allowed"] is False
    assert out["status"]["message"] == "Pod ns/p: 2 errors: a: bad a; b: bad b"
    assert out["status"]["details"]["causes"] == [
        {"type": "FieldValueInvalid", "field": "a", "message": "bad a"},
        {"type": "FieldValueInvalid", "field": "b", "message": "bad b"},
    ]
