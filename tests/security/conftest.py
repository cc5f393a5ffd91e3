"""A real admission webhook over HTTPS (trustme certificates), started per test; and the
real Slurm sandbox fixtures of tests/integration (forged labels, impersonation)."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trustme

from admission.app import AdmissionServer
from bridge.config import parse_config
from tests.integration.conftest import sandbox, slurm, track_jobs

__all__ = ["sandbox", "slurm", "start_webhook", "track_jobs", "webhook"]


class Webhook:
    def __init__(self, server: AdmissionServer, ca: trustme.CA) -> None:
        self.server = server
        self.ca = ca
        assert server.webhook_bound is not None
        self.port = server.webhook_bound
        self.url = f"https://localhost:{self.port}"
        self.metrics_url = f"http://127.0.0.1:{server.metrics_bound}/metrics"

    def client_ctx(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context()
        self.ca.configure_trust(ctx)
        return ctx


StartWebhook = Callable[..., Awaitable[Webhook]]


@pytest.fixture
async def start_webhook(tmp_path: Path) -> AsyncIterator[StartWebhook]:
    """``await start_webhook(key_type=..., **admission_settings)``: a running webhook."""
    servers: list[AdmissionServer] = []

    async def start(key_type: trustme.KeyType = trustme.KeyType.ECDSA, **admission: Any) -> Webhook:
        ca = trustme.CA(key_type=key_type)
        leaf = ca.issue_cert("localhost", "127.0.0.1", key_type=key_type)
        crt, key = tmp_path / f"tls{len(servers)}.crt", tmp_path / f"tls{len(servers)}.key"
        crt.write_bytes(b"".join(p.bytes() for p in leaf.cert_chain_pems))
        key.write_bytes(leaf.private_key_pem.bytes())
        cfg = parse_config(
            {
                "managedNamespaces": ["slurm-bridge"],
                "admission": {
                    "tlsCertFile": str(crt),
                    "tlsKeyFile": str(key),
                    "maxRequestBytes": 256 * 1024,
                    **admission,
                },
            },
            env={},
        )
        server = AdmissionServer(cfg, webhook_port=0, metrics_port=0, health_port=0)
        await server.start()
        servers.append(server)
        return Webhook(server, ca)

    yield start
    for server in servers:
        await server.stop()


@pytest.fixture
async def webhook(start_webhook: StartWebhook) -> Webhook:
    return await start_webhook()
