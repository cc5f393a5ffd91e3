"""Helpers for the controller's end-to-end tests: play the scheduler's part (submit one
placeholder job, label + finalize + bind the pods) and run the controller as a task."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from bridge.config import BridgeConfig, parse_config
from bridge.kube.client import KubeClient
from bridge.kube.events import EventRecorder
from bridge.kube.resources import PODS
from bridge.models import GroupId, JobSpec
from bridge.slurm.client import SlurmClient
from bridge.translate import admin_comment
from bridge.wellknown import ANNOTATION_SLURM_NODE, FINALIZER, LABEL_JOB_ID
from controller.runtime import Controller, SlurmReadObserver
from sandbox.cluster import SandboxCluster
from sandbox.kubeapi import SANDBOX_TOKEN
from tests.clients import kube_for_host
from tests.integration.conftest import SlurmSandbox, sandbox_config_data
from tests.integration.identities import component_kube
from tests.waiting import eventually

NS = "slurm-bridge"


def controller_config(sb: SlurmSandbox, mcs_label: str, **over: Any) -> BridgeConfig:
    data = sandbox_config_data(
        sb,
        mcsLabel=mcs_label,
        slurmPollIntervalSeconds=0.1,
        slurmResyncIntervalSeconds=0.5,
        slurmRequestTimeoutSeconds=5,
    )
    data.update(over)
    return parse_config(data, env={})


def unique_mcs() -> str:
    """Each test its own mcs label: the sweep never touches another test's jobs."""
    return "ctl" + secrets.token_hex(3)


async def place_group(
    kube: KubeClient,
    slurm: SlurmClient,
    sb: SlurmSandbox,
    mcs: str,
    names: list[str],
    node: str,
    track: Callable[[int], int],
    *,
    bind: bool = True,
    **spec_fields: Any,
) -> int:
    """Create pods, submit ONE job for them (``spec_fields``: more JobSpec fields, e.g.
    ``priority=0`` for a held job), label/finalize them and, with ``bind``, annotate and
    bind them (without: as the scheduler leaves the pods of a job that waits)."""
    uids = []
    for name in names:
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "schedulerName": "slurm-bridge-scheduler",
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "c", "image": "busybox"}],
            },
        }
        uids.append((await kube.create(PODS, pod, NS))["metadata"]["uid"])
    group = (
        GroupId(kind="Pod", namespace=NS, name=names[0], uid=uids[0])
        if len(names) == 1
        else GroupId(kind="PodGroup", namespace=NS, name=names[0], uid="pg-" + uids[0])
    )
    spec = JobSpec(
        name=f"ctl-{names[0]}",
        partition=sb.partition,
        min_nodes=1,
        tasks=len(names),
        exclusive=False,
        mcs_label=mcs,
        admin_comment=admin_comment(group, [f"{NS}/{n}" for n in names], mcs),
        **spec_fields,
    )
    job_id = track(await slurm.submit(spec))
    for name, uid in zip(names, uids, strict=True):
        link: dict[str, Any] = {"labels": {LABEL_JOB_ID: str(job_id)}, "finalizers": [FINALIZER]}
        if bind:
            link["annotations"] = {ANNOTATION_SLURM_NODE: node}
        await kube.patch_pod(NS, name, {"metadata": link}, patch_type="merge")
        if bind:
            await kube.bind_pod(NS, name, uid, node)
    return job_id


async def wait_for(
    check: Callable[[], Awaitable[bool]], *, within: float = 30.0, what: str = "condition"
) -> None:
    """Poll ``check`` until true; fail naming ``what`` after ``within`` seconds."""
    await eventually(check, within=within, what=what)


@contextlib.asynccontextmanager
async def running_controller(
    cfg: BridgeConfig,
    kube: KubeClient,
    slurm: SlurmClient | None = None,
    *,
    slurm_observer: SlurmReadObserver | None = None,
) -> AsyncIterator[Controller]:
    """The controller as the chart's controller ServiceAccount, with the chart's RBAC
    (``kube``, the admin's client, applies it and mints the token)."""
    own = slurm is None
    client = slurm or SlurmClient.from_config(cfg)
    ckube = await component_kube(kube, cfg, "controller")
    ctl = Controller(
        cfg,
        client,
        ckube,
        events=EventRecorder(ckube, "slurm-bridge-controller"),
        slurm_observer=slurm_observer,
    )
    task = asyncio.create_task(ctl.run())
    try:
        await wait_for(lambda: _synced(ctl, task), what="controller synced")
        yield ctl
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await ckube.close()
        if own:
            await client.close()


async def _synced(ctl: Controller, task: asyncio.Task[None]) -> bool:
    if task.done():
        task.result()
    return ctl.synced.is_set()


@contextlib.asynccontextmanager
async def sandbox_kube(sb: SlurmSandbox) -> AsyncIterator[tuple[SandboxCluster, KubeClient]]:
    async with (
        SandboxCluster(nodes=list(sb.external_nodes), kubelet=True, bookmark_interval=0.5) as srv,
        kube_for_host(srv.url, request_timeout=5, token=SANDBOX_TOKEN) as kube,
    ):
        yield srv, kube
