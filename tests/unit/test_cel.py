"""bridge.cel: compile once (cached), evaluate with variables, one error type."""

from __future__ import annotations

import pytest

from bridge.cel import compile_expression
from bridge.errors import CelError


def test_kubernetes_style_match_condition_evaluates_against_json_variables() -> None:
    expr = compile_expression(
        'request.userInfo.username.startsWith("system:serviceaccount:") && '
        '"system:nodes" in request.userInfo.groups && has(object.metadata.labels) && '
        'object.metadata.labels.exists(k, k == "app")'
    )
    request = {"userInfo": {"username": "system:serviceaccount:a:b", "groups": ["system:nodes"]}}
    assert expr.evaluate_bool(
        {"request": request, "object": {"metadata": {"labels": {"app": "x"}}}}
    )
    assert not expr.evaluate_bool({"request": request, "object": {"metadata": {"labels": {}}}})


def test_compiled_expressions_are_cached_by_source() -> None:
    assert compile_expression("1 == 1") is compile_expression("1 == 1")


@pytest.mark.parametrize(
    ("source", "why"),
    [
        ("1 +", "Syntax error"),
        ("object.?metadata", "unsupported syntax '.?'"),
        ('"A".lowerAscii() == "a"', "undeclared reference to 'lowerAscii'"),
        ("  ", "expression is empty"),
    ],
)
def test_invalid_or_unsupported_expression_is_a_compile_error_naming_why(
    source: str, why: str
) -> None:
    with pytest.raises(CelError) as e:
        compile_expression(source)
    assert e.value.phase == "compile"
    assert why in e.value.reason


def test_missing_field_and_non_bool_result_are_evaluation_errors() -> None:
    with pytest.raises(CelError, match="no such key: name") as e:
        compile_expression("object.metadata.name == 'x'").evaluate({"object": {"metadata": {}}})
    assert e.value.phase == "evaluate"
    with pytest.raises(CelError, match="expected a bool"):
        compile_expression("1 + 1").evaluate_bool({})
