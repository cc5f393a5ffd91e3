"""CI smoke of the CEL budget benchmark (tests/bench/cel_budget.py): a few claims of each
shape through the scheduler's DRA path. It checks the report's shape and the figures that
are properties, not speeds: the largest selectors a 1.36 API server accepts are refused
over the budget naming the expression, a selector whose matching runs past it too, and a
MIG profile's claims are all resolved."""

from __future__ import annotations

import pytest

from bridge.translate.selectors import BUDGET
from tests.bench.cel_budget import parser, run

pytestmark = [pytest.mark.bench]


@pytest.mark.parametrize(
    ("shape", "nodes", "refused"),
    [("largest", 2, True), ("matching", 300, True), ("typical", 20, False)],
)
async def test_cel_benchmark_refuses_over_budget_selectors_naming_them_and_resolves_the_rest(
    shape: str, nodes: int, refused: bool
) -> None:
    args = parser().parse_args(
        ["--claims", "4", "--nodes", str(nodes), "--rounds", "2", "--shape", shape]
    )
    report = await run(args)
    assert list(report)[:5] == ["claims", "shape", "refused", "resolved", "lag_ms"]
    assert (report["refused"], report["resolved"]) == ((4, 0) if refused else (0, 4))
    if refused:
        assert f"budget of {BUDGET} units" in report["reason"]
        assert "spec.devices.requests[0].exactly.selectors[0].cel.expression" in report["reason"]
    assert report["lag_ms"]["max"] >= report["lag_ms"]["p50"] >= 0
    assert report["group_ms"]["max"] >= report["group_ms"]["p50"] >= 0
