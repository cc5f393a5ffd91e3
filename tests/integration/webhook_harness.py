"""The real admission server behind the webhook configurations ``helm template`` renders
from the chart, beside the bridge on the sandbox API server (the webhook-down suite and
``tests.bench.path``)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import trustme

from admission.app import AdmissionServer, kube_node_kinds
from admission.server import NodeKindSource
from bridge.clock import SystemClock
from bridge.config import parse_config
from bridge.errors import KubeError
from bridge.kube.resources import NAMESPACES
from sandbox import chart_webhooks
from tests.integration.bridge_harness import NS, Bridge, running_bridge
from tests.integration.conftest import SlurmSandbox, sandbox_config_data


class Webhook:
    """The real admission server on one fixed port, which can be stopped and started."""

    def __init__(self, sandbox: SlurmSandbox, chart: chart_webhooks.ChartWebhooks, d: Path):
        ca = trustme.CA()
        cert = ca.issue_cert(chart.service_host)
        cert.private_key_pem.write_to_path(str(d / "tls.key"))
        cert.cert_chain_pems[0].write_to_path(str(d / "tls.crt"))
        self.ca_pem = ca.cert_pem.bytes().decode()
        self.cfg = parse_config(
            sandbox_config_data(
                sandbox,
                admission={
                    "bindAddress": "127.0.0.1",
                    "tlsCertFile": str(d / "tls.crt"),
                    "tlsKeyFile": str(d / "tls.key"),
                    "bridgeUsernames": chart.bridge_usernames,
                },
            )
        )
        self.port = 0
        self.server: AdmissionServer | None = None
        # the Slurm-node guard's node lookups, once the API server is up
        self.nodes: NodeKindSource | None = None

    async def start(self) -> None:
        # ops on free ports: the defaults (8080/8081) are shared by everything on the machine
        self.server = AdmissionServer(
            self.cfg, nodes=self.nodes, webhook_port=self.port, metrics_port=0, health_port=0
        )
        await self.server.start()
        assert self.server.webhook_bound is not None
        self.port = self.server.webhook_bound

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop()
            self.server = None


@contextlib.asynccontextmanager
async def bridge_behind_chart_webhooks(
    sandbox: SlurmSandbox, tmp_path: Path, **over: Any
) -> AsyncIterator[tuple[Bridge, Webhook]]:
    """``over``: config keys of the bridge to change (see ``running_bridge``)."""
    chart = chart_webhooks.render([NS])
    hook = Webhook(sandbox, chart, tmp_path)
    await hook.start()
    try:
        async with running_bridge(sandbox, tmp_path, controller=True, **over) as b:
            hook.nodes = kube_node_kinds(b.kube, SystemClock(), 0)
            if hook.server is not None:
                hook.server.deps.nodes = hook.nodes
            with contextlib.suppress(KubeError):  # the API server may have made it already
                await b.kube.create(NAMESPACES, {"metadata": {"name": NS}})
            await chart_webhooks.install(b.kube, chart.for_sandbox(hook.port, hook.ca_pem))
            yield b, hook
    finally:
        await hook.stop()
