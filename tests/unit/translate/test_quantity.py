"""Kubernetes quantities: exact parsing, upward rounding, junk rejected by name."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.errors import InvalidInput
from bridge.translate.quantity import mebibytes, parse_quantity, whole_count, whole_cpus


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("1", Decimal(1), id="plain"),
        pytest.param("500m", Decimal("0.5"), id="milli"),
        pytest.param("3000m", Decimal(3), id="milli-whole"),
        pytest.param("1.5", Decimal("1.5"), id="fraction"),
        pytest.param(".5", Decimal("0.5"), id="leading-dot"),
        pytest.param("2.", Decimal(2), id="trailing-dot"),
        pytest.param("1k", Decimal(1000), id="kilo"),
        pytest.param("1Ki", Decimal(1024), id="kibi"),
        pytest.param("500Mi", Decimal(500 * 1024**2), id="mebi"),
        pytest.param("1Gi", Decimal(1024**3), id="gibi"),
        pytest.param("1G", Decimal(10**9), id="giga"),
        pytest.param("1E", Decimal(10**18), id="exa"),
        pytest.param("1Ei", Decimal(1024**6), id="exbi"),
        pytest.param("4e3", Decimal(4000), id="exponent"),
        pytest.param("4E3", Decimal(4000), id="exponent-upper"),
        pytest.param("12e-3", Decimal("0.012"), id="negative-exponent"),
        pytest.param("+2", Decimal(2), id="plus-sign"),
        pytest.param("-2", Decimal(-2), id="minus-sign"),
        pytest.param(" 2 ", Decimal(2), id="surrounding-space"),
    ],
)
def test_parse_quantity_accepts_kubernetes_grammar(text: str, expected: Decimal) -> None:
    assert parse_quantity(text, field="f") == expected


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("abc", id="letters"),
        pytest.param("1KB", id="wrong-suffix"),
        pytest.param("1ki", id="lowercase-binary"),
        pytest.param("1 Gi", id="inner-space"),
        pytest.param("1.2.3", id="two-dots"),
        pytest.param("Gi", id="suffix-only"),
        pytest.param("1e", id="exponent-without-digits"),
        pytest.param("1e99999", id="huge-exponent"),
        pytest.param("1" * 100, id="too-long"),
        pytest.param("0x10", id="hex"),
        pytest.param("NaN", id="nan"),
        pytest.param("inf", id="infinity"),
    ],
)
def test_parse_quantity_rejects_junk_naming_the_field(text: str) -> None:
    with pytest.raises(InvalidInput) as e:
        parse_quantity(text, field="spec.containers[0].resources.limits.cpu", obj="Pod a/b")
    assert e.value.field == "spec.containers[0].resources.limits.cpu"
    assert e.value.obj == "Pod a/b"
    assert e.value.reason


@pytest.mark.parametrize(
    ("text", "cpus"),
    [("500m", 1), ("1", 1), ("1001m", 2), ("3000m", 3), ("0", 0), ("2.5", 3)],
    ids=["half-up", "one", "just-over", "three", "zero", "fraction-up"],
)
def test_whole_cpus_rounds_up(text: str, cpus: int) -> None:
    assert whole_cpus(text, field="f") == cpus


@pytest.mark.parametrize(
    ("text", "mib"),
    [("500Mi", 500), ("1Gi", 1024), ("1G", 954), ("1", 1), ("1048577", 2), ("0", 0)],
    ids=["mebi", "gibi", "giga-up", "one-byte-up", "just-over", "zero"],
)
def test_mebibytes_rounds_up(text: str, mib: int) -> None:
    assert mebibytes(text, field="f") == mib


def test_negative_resources_are_rejected() -> None:
    with pytest.raises(InvalidInput, match="negative"):
        whole_cpus("-1", field="f")
    with pytest.raises(InvalidInput, match="negative"):
        mebibytes("-1Mi", field="f")


@pytest.mark.parametrize(
    ("text", "ok"),
    [("2", 2), ("2000m", 2), ("0", 0)],
    ids=["int", "milli-whole", "zero"],
)
def test_whole_count_accepts_integers(text: str, ok: int) -> None:
    assert whole_count(text, field="f") == ok


def test_whole_count_rejects_fractions() -> None:
    with pytest.raises(InvalidInput, match="whole number") as e:
        whole_count("500m", field="limits.nvidia.com/gpu")
    assert e.value.field == "limits.nvidia.com/gpu"


@given(st.text(max_size=40))
def test_any_string_parses_or_raises_invalid_input(text: str) -> None:
    error: InvalidInput | None = None
    try:
        parse_quantity(text, field="f")
    except InvalidInput as e:
        error = e
    assert error is None or (error.field == "f" and error.reason)


@given(
    st.decimals(allow_nan=False, allow_infinity=False, min_value=0, max_value=10**6, places=3),
    st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi"]),
)
def test_well_formed_quantities_round_trip(number: Decimal, suffix: str) -> None:
    text = f"{number:f}{suffix}"
    assert parse_quantity(text, field="f") >= 0
