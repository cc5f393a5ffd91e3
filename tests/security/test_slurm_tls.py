"""Slurm over TLS, against the REAL slurmrestd of the sandbox behind a loopback TLS proxy:
the right CA works, a wrong CA fails with a clear error that carries no token, and a plain
``http://`` URL to another host is logged as a warning when the client is built."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import structlog
import trustme

from bridge.config import parse_config
from bridge.errors import ConfigError, SlurmUnavailable
from bridge.slurm.client import SlurmClient
from bridge.slurm.tls import is_loopback_url, warn_if_plaintext
from bridge.slurm.token import TokenProvider
from tests.clients import api_version, slurm_diag
from tests.integration.conftest import SlurmSandbox, load_sandbox
from tests.security.tls_proxy import TlsProxy


@pytest.fixture(scope="module")
def sandbox() -> SlurmSandbox:
    return load_sandbox()


@pytest.fixture(scope="module")
def server_ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
async def proxy(sandbox: SlurmSandbox, server_ca: trustme.CA) -> AsyncIterator[TlsProxy]:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ca.issue_cert("localhost", "127.0.0.1").configure_cert(ctx)
    up = urlsplit(sandbox.rest_url)
    tls = TlsProxy(ctx, (up.hostname or "127.0.0.1", up.port or 6820))
    await tls.start()
    try:
        yield tls
    finally:
        await tls.close()


def ca_file(ca: trustme.CA, tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    ca.cert_pem.write_to_path(str(path))
    return path


def client(sb: SlurmSandbox, url: str, ca: Path | None) -> SlurmClient:
    return SlurmClient(url, TokenProvider(sb.jwt_file, sb.user), ca_file=ca, retry_attempts=1)


@pytest.mark.slurm
async def test_https_slurmrestd_with_the_right_ca_file_answers(
    sandbox: SlurmSandbox, proxy: TlsProxy, server_ca: trustme.CA, tmp_path: Path
) -> None:
    async with client(sandbox, proxy.url, ca_file(server_ca, tmp_path, "ca.pem")) as slurm:
        assert (await api_version(slurm)).startswith("v0.0.")
        assert await slurm_diag(slurm)  # needs the token: it crossed the TLS link
        assert await slurm.list_partitions()
    assert proxy.connections >= 1


@pytest.mark.slurm
@pytest.mark.parametrize("trust", ["wrong-ca", "system-store"])
async def test_https_slurmrestd_with_an_untrusted_certificate_fails_clearly_without_the_token(
    sandbox: SlurmSandbox, proxy: TlsProxy, tmp_path: Path, trust: str
) -> None:
    ca = ca_file(trustme.CA(), tmp_path, "other.pem") if trust == "wrong-ca" else None
    async with client(sandbox, proxy.url, ca) as slurm:
        with pytest.raises(SlurmUnavailable) as info:
            await slurm_diag(slurm)
    text = f"{info.value} {info.value!r} {info.value.args}"
    assert "not trusted" in text
    assert "certificate verify failed" in text or "issuer" in text
    assert "slurmCaFile" in text
    assert proxy.url in text
    token = sandbox.jwt_file.read_text().strip()
    assert token
    assert token not in text
    assert info.value.__context__ is None
    assert info.value.__cause__ is None


def test_an_unreadable_ca_file_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    with pytest.raises(ConfigError) as info:
        SlurmClient("https://slurm.example:6820", TokenProvider(tmp_path / "jwt"), ca_file=missing)
    assert info.value.key == "slurmCaFile"
    assert str(missing) in info.value.reason
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(ConfigError, match="slurmCaFile"):
        SlurmClient("https://slurm.example:6820", TokenProvider(tmp_path / "jwt"), ca_file=junk)


@pytest.mark.parametrize(
    ("url", "loopback"),
    [
        ("http://localhost:6820", True),
        ("http://127.0.0.1:6820", True),
        ("http://127.8.9.1:6820", True),
        ("http://[::1]:6820", True),
        ("http://slurm-restapi.slurm:6820", False),
        ("http://10.0.0.5:6820", False),
        ("http://localhost.evil.example:6820", False),
    ],
)
def test_loopback_urls_are_told_apart(url: str, loopback: bool) -> None:
    assert is_loopback_url(url) is loopback


def test_http_to_another_host_is_a_warning_when_the_client_is_built(tmp_path: Path) -> None:
    def built(url: str) -> list[dict[str, object]]:
        cfg = parse_config({"slurmRestApi": url, "slurmTokenFile": str(tmp_path / "jwt")}, env={})
        with structlog.testing.capture_logs() as logs:
            SlurmClient.from_config(cfg)
        return [e for e in logs if e["event"] == "slurm_plaintext_url"]

    (warning,) = built("http://slurm-restapi.slurm:6820")
    assert warning["log_level"] == "warning"
    assert warning["url"] == "http://slurm-restapi.slurm:6820"
    assert "https" in str(warning["reason"])
    assert built("http://127.0.0.1:6820") == []
    assert built("https://slurm-restapi.slurm:6820") == []
    assert warn_if_plaintext("https://slurm-restapi.slurm:6820") is False


def test_slurm_ca_file_is_a_config_key_with_an_env_override(tmp_path: Path) -> None:
    cfg = parse_config({}, env={"SLURM_BRIDGE_SLURM_CA_FILE": str(tmp_path / "ca.pem")})
    assert cfg.slurm_ca_file == tmp_path / "ca.pem"
    assert parse_config({}, env={}).slurm_ca_file is None


@pytest.mark.slurm
async def test_https_to_a_plain_http_slurmrestd_fails_the_handshake_clearly(
    sandbox: SlurmSandbox,
) -> None:
    plain = urlsplit(sandbox.rest_url)
    url = f"https://{plain.hostname}:{plain.port}"
    async with client(sandbox, url, None) as slurm:
        with pytest.raises(SlurmUnavailable) as info:
            await slurm_diag(slurm)
    assert f"TLS handshake with {url} failed" in str(info.value)
    token = sandbox.jwt_file.read_text().strip()
    assert token not in f"{info.value} {info.value!r}"
