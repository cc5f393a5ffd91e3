"""The scheduler watches every workload kind's API at the version the server serves
(discovery: 1.36's scheduling.k8s.io/v1alpha2, 1.37's v1beta1 and v1alpha3), and copes
with an API not served (a CRD not installed): nothing to wait for, no crash, no busy
loop, and the watch starts once the CRD comes (scheduler.app.follow_related)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

import scheduler.app
from bridge.clock import SystemClock
from bridge.config import parse_config
from bridge.kube.client import KubeClient
from bridge.kube.resources import Resource
from bridge.slurm.client import SlurmClient
from bridge.workloads import Api
from bridge.workloads.builtin import COMPOSITES, PODGROUPS
from sandbox.cluster import SandboxCluster
from sandbox.kubeapi import SANDBOX_TOKEN
from scheduler.app import follow_related
from scheduler.cycle import Scheduler
from tests.clients import kube_for_host
from tests.waiting import eventually

from .helpers import NS
from .test_crds import _crd as widgets_crd

CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "", False)
WIDGETS = Api("example.com", ("v1",), "widgets", "Widget")
SERVED = {"1.36": ("v1alpha2", None), "1.37": ("v1beta1", "v1alpha3")}


@pytest.fixture
async def kube(srv: SandboxCluster) -> AsyncIterator[KubeClient]:
    async with kube_for_host(srv.url, token=SANDBOX_TOKEN, request_timeout=10) as k:
        yield k


def _scheduler(kube: KubeClient) -> Scheduler:
    cfg = parse_config({"managedNamespaces": [NS]}, env={})
    return Scheduler(cfg, kube, cast(SlurmClient, None), SystemClock())


async def _following(sched: Scheduler, kube: KubeClient, *apis: Api) -> list[asyncio.Task[None]]:
    """Follow ``apis`` until each was listed or found not served."""
    tasks, synced = [], []
    for api in apis:
        synced.append(asyncio.Event())
        tasks.append(
            asyncio.create_task(follow_related(sched, kube, api, SystemClock(), synced[-1]))
        )
    await asyncio.wait_for(asyncio.gather(*(s.wait() for s in synced)), 10)
    return tasks


async def _stop(tasks: list[asyncio.Task[None]]) -> None:
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_the_builtin_scheduling_apis_are_watched_at_the_version_served(
    kube: KubeClient, kube_version: str
) -> None:
    sched = _scheduler(kube)
    tasks = await _following(sched, kube, PODGROUPS, COMPOSITES)
    try:
        related = sched.state.related
        podgroups, composites = related.resource(PODGROUPS), related.resource(COMPOSITES)
        assert podgroups is not None
        found = (podgroups.version, composites.version if composites is not None else None)
        assert found == SERVED[kube_version]
    finally:
        await _stop(tasks)


@pytest.mark.parametrize("kube_version", ["1.36"], indirect=True)
async def test_an_api_not_served_is_nothing_to_wait_for_and_watched_once_its_crd_comes(
    kube: KubeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scheduler.app, "RELATED_DISCOVERY_SECONDS", 0.1)
    sched = _scheduler(kube)
    tasks = await _following(sched, kube, WIDGETS)  # synced at once: nothing to wait for
    try:
        assert sched.state.related.resource(WIDGETS) is None
        await kube.create(CRDS, widgets_crd())
        widgets = Resource("example.com", "v1", "widgets", "Widget", True, builtin=False)
        body = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
        await kube.create(widgets, body, NS)

        async def held() -> Any:
            return sched.state.related.get(WIDGETS, NS, "w")

        await eventually(held, within=10, what="the widget in the scheduler's copy")
        assert sched.state.related.resource(WIDGETS) == widgets
    finally:
        await _stop(tasks)
