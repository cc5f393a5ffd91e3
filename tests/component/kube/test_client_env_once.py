"""The Kubernetes client reads the proxy environment once, never per request (aiohttp's
trust_env reads it and ~/.netrc in a thread for every request)."""

from __future__ import annotations

import pytest

from tests.clients import kube_for_host


@pytest.mark.parametrize(
    ("env", "host", "proxy"),
    [
        pytest.param({}, "http://10.1.2.3:6443", None, id="no-proxy-env"),
        pytest.param(
            {"HTTP_PROXY": "http://proxy.example:3128"},
            "http://10.1.2.3:6443",
            "http://proxy.example:3128",
            id="proxy-read-once",
        ),
        pytest.param(
            {"HTTP_PROXY": "http://proxy.example:3128", "NO_PROXY": "10.1.2.3"},
            "http://10.1.2.3:6443",
            None,
            id="no-proxy-for-the-api-server",
        ),
    ],
)
async def test_proxy_env_is_read_once_and_no_request_reads_it_again(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], host: str, proxy: str | None
) -> None:
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    async with kube_for_host(host, request_timeout=5) as kube:
        rest = kube._api.rest_client
        assert rest.proxy == proxy
        assert rest.pool_manager.trust_env is False
