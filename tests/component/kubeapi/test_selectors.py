"""Property tests of the selector parsers (pure functions, no server)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sandbox.kubeapi.errors import ApiError
from sandbox.kubeapi.selectors import (
    labels_match,
    parse_field_selector,
    parse_label_selector,
)

KEYS = st.sampled_from(["app", "tier", "example.com/role", "a-b_c.d"])
VALS = st.text(alphabet="abcxyz019-_.", min_size=0, max_size=6).filter(
    lambda v: not v or (v[0].isalnum() and v[-1].isalnum())
)
LABELS = st.dictionaries(KEYS, VALS.filter(bool), max_size=4)


@given(LABELS, KEYS, st.lists(VALS.filter(bool), min_size=1, max_size=3))
def test_in_and_notin_are_complements(labels: dict[str, str], key: str, vals: list[str]) -> None:
    obj = {"metadata": {"labels": labels}}
    inside = labels_match(parse_label_selector(f"{key} in ({','.join(vals)})"), obj)
    outside = labels_match(parse_label_selector(f"{key} notin ({', '.join(vals)})"), obj)
    assert inside != outside


@given(LABELS, KEYS, VALS)
def test_equals_and_not_equals_are_complements(labels: dict[str, str], key: str, val: str) -> None:
    obj = {"metadata": {"labels": labels}}
    eq = labels_match(parse_label_selector(f"{key}={val}"), obj)
    ne = labels_match(parse_label_selector(f"{key}!={val}"), obj)
    assert eq != ne
    assert eq == (labels.get(key) == val)


@given(LABELS, KEYS)
def test_exists_and_not_exists_are_complements(labels: dict[str, str], key: str) -> None:
    obj = {"metadata": {"labels": labels}}
    assert labels_match(parse_label_selector(key), obj) == (key in labels)
    assert labels_match(parse_label_selector(f"!{key}"), obj) == (key not in labels)


@given(st.text(max_size=30))
def test_label_selector_parser_never_crashes(text: str) -> None:
    code = 400
    try:
        parse_label_selector(text)
    except ApiError as e:
        code = e.code
    assert code == 400


@pytest.mark.parametrize(
    "selector",
    [
        pytest.param("a in (b", id="unclosed"),
        pytest.param("a b", id="two-words"),
        pytest.param("=b", id="no-key"),
        pytest.param("a in b", id="in-without-parens"),
    ],
)
def test_malformed_label_selectors_are_400(selector: str) -> None:
    with pytest.raises(ApiError) as e:
        parse_label_selector(selector)
    assert e.value.code == 400


def test_field_selector_names_the_unsupported_field() -> None:
    with pytest.raises(ApiError) as e:
        parse_field_selector("spec.bogus=1", frozenset({"metadata.name"}))
    assert "spec.bogus" in e.value.message
