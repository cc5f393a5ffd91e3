"""The controller's managedNamespaceSelector check reads a pod's namespace labels through
the same cached, single-flight reader as the admission webhook (bridge.kube.namespaces),
against the sandbox API server: a matching namespace is managed, another or a missing one
is not, and each namespace is read once within the cache's lifetime."""

from __future__ import annotations

import asyncio
from typing import cast

from bridge.config import parse_config
from bridge.kube.resources import NAMESPACES
from bridge.slurm.client import SlurmClient
from controller.runtime import Controller
from sandbox.cluster import SandboxCluster
from sandbox.kubeapi import SANDBOX_TOKEN
from tests.clients import kube_for_host


async def test_the_controller_reads_each_namespaces_labels_once_for_the_selector() -> None:
    cfg = parse_config(
        {"managedNamespaces": ["listed"], "managedNamespaceSelector": {"matchLabels": {"t": "a"}}},
        env={},
    )
    async with (
        SandboxCluster(port=0) as srv,
        kube_for_host(srv.url, request_timeout=5, token=SANDBOX_TOKEN) as kube,
    ):
        await kube.create(NAMESPACES, {"metadata": {"name": "team-a", "labels": {"t": "a"}}})
        await kube.create(NAMESPACES, {"metadata": {"name": "team-b"}})
        ctl = Controller(cfg, cast(SlurmClient, None), kube)
        managed = ctl.ownership.namespace_managed
        assert await asyncio.gather(managed("team-a"), managed("team-a")) == [True, True]
        assert await managed("team-b") is False
        assert await managed("gone") is False
        assert await managed("listed") is True  # by name: never read
        assert await managed("team-a") is True
        assert ctl.ownership.namespaces.fetches == 3
