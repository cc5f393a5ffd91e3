"""Token provider: read on every request (rotation), user header only when configured."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.errors import SlurmUnauthorized
from bridge.slurm.token import HEADER_TOKEN, HEADER_USER, TokenProvider


def test_rotated_token_is_used_by_the_next_request(tmp_path: Path) -> None:
    f = tmp_path / "jwt"
    f.write_text("first\n")
    p = TokenProvider(f)
    assert p.headers() == {HEADER_TOKEN: "first"}
    f.write_text("second")
    assert p.headers() == {HEADER_TOKEN: "second"}


def test_user_name_header_only_when_configured(tmp_path: Path) -> None:
    f = tmp_path / "jwt"
    f.write_text("SLURM_JWT=tok")
    assert TokenProvider(f, "kube").headers() == {HEADER_TOKEN: "tok", HEADER_USER: "kube"}


@pytest.mark.parametrize("content", ["", "  \n", "a b"], ids=["empty", "blank", "two-words"])
def test_bad_token_file_is_unauthorized(tmp_path: Path, content: str) -> None:
    f = tmp_path / "jwt"
    f.write_text(content)
    with pytest.raises(SlurmUnauthorized, match="token file"):
        TokenProvider(f).headers()


def test_missing_token_file_is_unauthorized(tmp_path: Path) -> None:
    with pytest.raises(SlurmUnauthorized, match="cannot read"):
        TokenProvider(tmp_path / "nope").headers()
