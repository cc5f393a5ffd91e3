"""The JWT never reaches a log line, an exception message/chain, or a repr."""

from __future__ import annotations

import logging
import traceback
from pathlib import Path

import pytest
import structlog
from aiohttp import web
from aiohttp.test_utils import TestServer

from bridge.errors import SlurmError
from bridge.logging import configure_logging
from bridge.slurm.client import SlurmClient
from bridge.slurm.token import TokenProvider
from tests.clients import list_jobs

SECRET = "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0LXBheWxvYWQ.U0VDUkVULVNJR05BVFVSRQ"


def _chain_text(e: BaseException) -> str:
    return "".join(traceback.format_exception(e)) + repr(e) + str(e)


@pytest.mark.parametrize(
    ("status", "body"),
    [
        pytest.param(
            511,
            {"errors": [{"error_number": 1007, "error": "Protocol authentication error"}]},
            id="511",
        ),
        pytest.param(401, None, id="401-plain"),
        pytest.param(500, None, id="500-plain"),
        pytest.param(
            422, {"errors": [{"error_number": 2000, "error": "Invalid partition"}]}, id="422"
        ),
    ],
)
async def test_token_is_in_no_log_exception_or_repr(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    status: int,
    body: object,
) -> None:
    seen: list[str] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        seen.append(request.headers.get("X-SLURM-USER-TOKEN", ""))
        if body is None:
            return web.Response(status=status, text="Authentication failure")
        return web.json_response(body, status=status)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    jwt = tmp_path / "jwt"
    jwt.write_text(SECRET + "\n")
    configure_logging("debug", "json")
    caplog.set_level(logging.DEBUG)
    async with TestServer(app) as server:
        token = TokenProvider(jwt, "slurm")
        client = SlurmClient(
            str(server.make_url("")), token, api_version="v0.0.45", retry_attempts=2
        )
        async with client:
            with pytest.raises(SlurmError) as e:
                await list_jobs(client)
        texts = [_chain_text(e.value), repr(token), str(token), repr(client)]
    assert seen
    assert seen[0] == SECRET
    out = capsys.readouterr()
    texts += [out.out, out.err, caplog.text]
    for text in texts:
        assert SECRET not in text
        assert "c2VjcmV0LXBheWxvYWQ" not in text
    structlog.reset_defaults()


async def test_unreachable_server_error_has_no_token(tmp_path: Path) -> None:
    jwt = tmp_path / "jwt"
    jwt.write_text(SECRET)
    async with SlurmClient(
        "http://127.0.0.1:9", TokenProvider(jwt), api_version="v0.0.45", retry_attempts=1
    ) as client:
        with pytest.raises(SlurmError) as e:
            await client.get_job(1)
    assert SECRET not in _chain_text(e.value)
    assert e.value.__context__ is None
    assert e.value.__cause__ is None


def test_unreadable_token_file_error_names_the_file_not_content(tmp_path: Path) -> None:
    bad = tmp_path / "jwt"
    bad.write_text(SECRET + " " + SECRET)  # two tokens: refused
    with pytest.raises(SlurmError) as e:
        TokenProvider(bad).headers()
    assert str(bad) in str(e.value)
    assert SECRET not in _chain_text(e.value)
