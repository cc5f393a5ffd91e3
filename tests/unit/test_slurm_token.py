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


def test_same_size_rewrite_is_picked_up_once_the_cached_read_is_a_second_old(
    tmp_path: Path,
) -> None:
    from bridge.slurm.token import MAX_AGE_SECONDS
    from tests.fake_clock import FakeClock

    f = tmp_path / "jwt"
    f.write_text("aaaa")
    clock = FakeClock()
    p = TokenProvider(f, clock=clock)
    assert p.headers() == {HEADER_TOKEN: "aaaa"}
    f.write_text("bbbb")  # same size; the file's times may not have moved (coarse ticks)
    clock.advance(MAX_AGE_SECONDS)
    assert p.headers() == {HEADER_TOKEN: "bbbb"}


def test_unreadable_token_file_after_a_good_read_still_fails(tmp_path: Path) -> None:
    f = tmp_path / "jwt"
    f.write_text("tok")
    p = TokenProvider(f)
    assert p.headers() == {HEADER_TOKEN: "tok"}
    f.unlink()
    with pytest.raises(SlurmUnauthorized):
        p.headers()
