"""Hostlist expand/compress: examples Slurm prints, junk, and round-trip properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.errors import InvalidInput
from bridge.slurm.hostlist import compress, expand


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        pytest.param(
            "kube-node-[0-3,7]",
            ["kube-node-0", "kube-node-1", "kube-node-2", "kube-node-3", "kube-node-7"],
            id="ranges-and-single",
        ),
        pytest.param("a[01-03]b", ["a01b", "a02b", "a03b"], id="zero-padded-with-suffix"),
        pytest.param(
            "x-[1-2]-[3-4]", ["x-1-3", "x-1-4", "x-2-3", "x-2-4"], id="two-brackets-last-fastest"
        ),
        pytest.param("a,b[1-2],c", ["a", "b1", "b2", "c"], id="comma-list-with-brackets"),
        pytest.param("n[08-10]", ["n08", "n09", "n10"], id="padding-kept-across-width"),
        pytest.param("node1", ["node1"], id="plain-name"),
        pytest.param("", [], id="empty"),
        pytest.param("(null)", [], id="slurm-null"),
    ],
)
def test_expand_gives_slurms_names_in_order(expr: str, names: list[str]) -> None:
    assert expand(expr) == names


@pytest.mark.parametrize(
    "junk",
    ["a[1-", "a]1", "a[[1]]", "a[3-1]", "a[x]", "a[1-2-3]", "a,,b", "a[]", "a b", "n[0-99999999]"],
    ids=[
        "unclosed",
        "stray-close",
        "nested",
        "descending",
        "letters",
        "double-dash",
        "empty-item",
        "empty-brackets",
        "space",
        "too-many",
    ],
)
def test_expand_rejects_junk_with_invalid_input(junk: str) -> None:
    with pytest.raises(InvalidInput):
        expand(junk)


@pytest.mark.parametrize(
    ("names", "expr"),
    [
        pytest.param(["n0", "n1", "n2", "n5"], "n[0-2,5]", id="run-and-single"),
        pytest.param(["n08", "n09", "n10"], "n[08-10]", id="zero-padded"),
        pytest.param(["a", "b"], "a,b", id="plain"),
        pytest.param(["n1"], "n1", id="one"),
    ],
)
def test_compress_folds_runs(names: list[str], expr: str) -> None:
    assert compress(names) == expr


_names = st.lists(
    st.builds(
        lambda p, n, w: f"{p}{str(n).zfill(w)}",
        st.sampled_from(["n", "kube-node-", "a1b", "x-"]),
        st.integers(0, 300),
        st.integers(0, 3),
    ),
    max_size=30,
)


@given(_names)
def test_expand_of_compress_gives_back_the_names(names: list[str]) -> None:
    assert expand(compress(names)) == names


@given(st.text(max_size=30))
def test_expand_never_crashes_on_junk(expr: str) -> None:
    """Junk raises InvalidInput (a ValueError) and nothing else; good input round-trips."""
    out: list[str] | None = None
    try:
        out = expand(expr)
    except InvalidInput:
        return
    assert all(isinstance(n, str) and n for n in out)
    assert expand(compress(out)) == out
