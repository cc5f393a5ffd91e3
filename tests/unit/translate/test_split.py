"""split_top_level: commas inside parentheses stay with their item."""

from __future__ import annotations

import pytest

from bridge.translate.split import split_top_level


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("a,b", ["a", "b"]),
        ("env in (a,b),tier!=x", ["env in (a,b)", "tier!=x"]),
        ("gpu:a100:2(S:0-1),gpu:1(IDX:0,1)", ["gpu:a100:2(S:0-1)", "gpu:1(IDX:0,1)"]),
        ("a,,b, ", ["a", "b"]),
        ("", []),
    ],
)
def test_commas_outside_parentheses_split_and_blank_parts_go(text: str, parts: list[str]) -> None:
    assert split_top_level(text) == parts
