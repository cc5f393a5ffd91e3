"""bridge.fastjson: the JSON the hot paths use behaves as the stdlib's where it matters."""

from __future__ import annotations

import copy
import datetime as dt
import json

import pytest

from bridge import fastjson


def test_loads_reads_bytes_and_str_like_json_loads() -> None:
    doc = '{"a": [1, 2.5, "é", null, true], "b": {"c": "d"}}'
    assert fastjson.loads(doc) == json.loads(doc)
    assert fastjson.loads(doc.encode()) == json.loads(doc)


def test_loads_bad_input_raises_a_value_error_as_json_loads_does() -> None:
    with pytest.raises(ValueError):
        fastjson.loads(b'{"a": ')


def test_dumps_is_compact_utf8_json_that_json_loads_reads_back() -> None:
    obj = {"name": "pod-é", "n": [1, 2], "t": (3, 4)}
    out = fastjson.dumps(obj)
    assert isinstance(out, bytes)
    assert json.loads(out) == {"name": "pod-é", "n": [1, 2], "t": [3, 4]}
    assert b" " not in out


def test_dumps_refuses_what_is_not_json() -> None:
    with pytest.raises(TypeError):
        fastjson.dumps({1: "non-str key"})


@pytest.mark.parametrize(
    "tree",
    [
        {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c"}]}},
        [{"a": 1}, [2, 3], "x", None],
        "plain",
        7,
        None,
    ],
)
def test_clone_is_an_equal_and_independent_copy(tree: object) -> None:
    out = fastjson.clone(tree)
    assert out == tree
    if isinstance(tree, (dict, list)):
        assert out is not tree
        original = copy.deepcopy(tree)
        if isinstance(out, dict):
            out["metadata"]["labels"]["a"] = "changed"
        else:
            out[0]["a"] = "changed"
        assert tree == original


def test_clone_of_a_tree_that_is_not_pure_json_keeps_every_type() -> None:
    when = dt.datetime(2026, 11, 24, tzinfo=dt.UTC)
    tree = {"when": when, "ids": {1, 2}, "pair": (1, 2)}
    out = fastjson.clone(tree)
    assert out == tree
    assert out["when"] == when
    assert isinstance(out["ids"], set)
    assert isinstance(out["pair"], tuple)


def test_clone_keeps_a_datetime_a_datetime() -> None:
    when = dt.datetime(2026, 11, 24, tzinfo=dt.UTC)
    assert fastjson.clone({"when": when}) == {"when": when}


def test_clone_of_a_top_level_tuple_stays_a_tuple() -> None:
    assert fastjson.clone((1, [2])) == (1, [2])
    assert isinstance(fastjson.clone((1, [2])), tuple)


def test_canonical_is_the_same_key_whatever_the_order_at_any_level() -> None:
    a = {
        "tolerations": [{"key": "k", "effect": "NoSchedule"}],
        "nodeSelector": {"b": "2", "a": "1"},
    }
    b = {
        "nodeSelector": {"a": "1", "b": "2"},
        "tolerations": [{"effect": "NoSchedule", "key": "k"}],
    }
    assert fastjson.canonical(a) == fastjson.canonical(b)
    assert json.loads(fastjson.canonical(a)) == a
    assert fastjson.canonical({"x": [1]}) != fastjson.canonical({"x": [2]})


def test_canonical_takes_what_is_not_json_as_its_text() -> None:
    when = dt.datetime(2026, 11, 24, tzinfo=dt.UTC)
    assert json.loads(fastjson.canonical({"s": {3}, 1: when})) == {
        "1": when.isoformat(),
        "s": "{3}",
    }
