"""The bridge's components as the chart's ServiceAccounts on the sandbox API server.

Every end-to-end test runs the scheduler, the controller and the admission webhook with
the RBAC ``helm template`` renders (``sandbox.chart_rbac``) and a TokenRequest token,
never as the admin: a verb the chart lacks fails the test that needs it.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal

from bridge.config import BridgeConfig
from bridge.kube.client import KubeClient
from sandbox import chart_rbac
from tests.clients import kube_for_host

Component = Literal["scheduler", "controller", "admission"]


@functools.cache
def chart_identities(
    leader_election: bool, lease_namespace: str, chart: Path | None = None
) -> chart_rbac.ChartIdentities:
    """The chart's ServiceAccounts and RBAC (rendered once per process and setting);
    ``chart``: another tree's chart (default: this one's)."""
    return chart_rbac.render(
        leader_election=leader_election, lease_namespace=lease_namespace, chart=chart
    )


def identities_for(cfg: BridgeConfig, chart: Path | None = None) -> chart_rbac.ChartIdentities:
    return chart_identities(cfg.leader_election, cfg.leader_election_namespace, chart)


async def component_token(admin: KubeClient, cfg: BridgeConfig, component: Component) -> str:
    """The chart's RBAC applied through ``admin``; a token of ``component``'s ServiceAccount."""
    ids = identities_for(cfg)
    await chart_rbac.apply(admin, ids)
    ns, name = ids.service_accounts[component]
    return await chart_rbac.service_account_token(admin, ns, name)


async def component_kube(admin: KubeClient, cfg: BridgeConfig, component: Component) -> KubeClient:
    """A client of the same server as ``admin``, authenticated as ``component``."""
    token = await component_token(admin, cfg, component)
    return kube_for_host(
        str(admin.configuration.host), token=token, request_timeout=cfg.kube_request_timeout_seconds
    )


async def component_kubeconfig(
    admin: KubeClient,
    cfg: BridgeConfig,
    component: Component,
    path: Path,
    chart: Path | None = None,
) -> Path:
    """A kubeconfig file for ``component`` (for a subprocess); ``chart``: the RBAC of
    another tree's chart (an older commit's scheduler, benchmarked)."""
    cluster = {"server": str(admin.configuration.host)}
    return await chart_rbac.component_kubeconfig(
        admin, identities_for(cfg, chart), component, cluster, path
    )
