"""Composition root of ``slurm-bridge scheduler --config FILE``: the only place that
builds real clients. Everything it wires is testable on its own."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
from collections.abc import Callable

import structlog

from bridge import loops
from bridge.clock import Clock, SystemClock
from bridge.config import BridgeConfig, load_config
from bridge.errors import BridgeError, ConfigError
from bridge.kube.client import KubeClient
from bridge.kube.leader import LeaderElector
from bridge.kube.resources import (
    DEVICE_TAINT_RULES,
    NAMESPACES,
    NODES,
    PODS,
    RESOURCE_CLAIMS,
    KubeObject,
    Resource,
    slim,
)
from bridge.kube.watch import Watcher, list_then_watch, served
from bridge.logging import configure_logging
from bridge.ops import component_ops
from bridge.slurm.client import SlurmClient
from bridge.workloads import Api, object_apis
from scheduler.cycle import Scheduler
from scheduler.dra import CLAIM_TEMPLATES, DEVICE_CLASSES, RESOURCE_SLICES
from scheduler.related import api_key, kept, resource

log = structlog.get_logger("scheduler.app")
LEASE_NAME = "slurm-bridge-scheduler"
# A workload kind's API the server does not serve (a CRD not installed, the built-in
# Workload API off) is looked for again this often (one discovery GET), and watched once
# it is served.
RELATED_DISCOVERY_SECONDS = 60.0


async def served_version(kube: KubeClient, api: Api) -> Resource | None:
    """The resource of ``api`` at the newest of its versions the server serves
    (discovery: 1.36's ``scheduling.k8s.io/v1alpha2``, 1.37's ``v1beta1``); None when it
    serves none."""
    for version in api.versions:
        res = resource(api, version)
        if await served(kube, res):
            return res
    return None


async def follow_related(
    sched: Scheduler, kube: KubeClient, api: Api, clock: Clock, synced: asyncio.Event
) -> None:
    """Keep the scheduler's copy of the objects of a workload kind's ``api``
    (:mod:`scheduler.related`) at the version served, for good. Not served (a CRD not
    installed): ``synced`` is set (there is nothing to wait for) and discovery is asked
    again every RELATED_DISCOVERY_SECONDS, the watch started once it is served; a watch
    whose initial list finds it gone (404) goes back to asking."""
    related = sched.state.related
    while True:
        res = await served_version(kube, api)
        related.served[api_key(api)] = res
        if res is not None:
            log.info("watching_kind_api", resource=res.plural, version=res.api_version)
            await list_then_watch(
                Watcher(kube, res, clock=clock, keep=kept),
                lambda ev: sched.on_related_event(api, ev.type, ev.object),
                synced=synced,
                keep_on_list_error=True,
                absent_ok=True,
                guard=sched.guard(f"scheduler-watch-{res.group or 'core'}-{res.plural}"),
            )
            related.served[api_key(api)] = None
        synced.set()
        await clock.sleep(RELATED_DISCOVERY_SECONDS)


def pod_field_selector(cfg: BridgeConfig) -> str:
    """Unscheduled pods routed to us (the namespace check is done on each event)."""
    return f"spec.schedulerName={cfg.scheduler_name},spec.nodeName="


async def run_scheduler(
    cfg: BridgeConfig,
    kube: KubeClient,
    slurm: SlurmClient,
    *,
    clock: Clock | None = None,
    ready: asyncio.Event | None = None,
    scheduler: Scheduler | None = None,
) -> None:
    """Run the scheduler's loops until cancelled (this is the leader's work)."""
    clock = clock or SystemClock()
    sched = scheduler or Scheduler(cfg, kube, slurm, clock)
    nodes_synced, ns_synced, pods_synced = asyncio.Event(), asyncio.Event(), asyncio.Event()
    async with asyncio.TaskGroup() as tg:
        # Slurm's nodes before any submit (excluded_nodes may only name nodes it knows),
        # and the sweep at once beside them: every job's state is the longest read of a
        # restart (slurmrestd's answer for the whole table, docs/benchmarks.md), and every
        # group of the initial list that may have a job waits for it. It runs beside the
        # initial lists and the workers; until it ends only groups that cannot have a job
        # yet are submitted (scheduler.slurm_state.SlurmState.may_create).
        nodes_read = tg.create_task(sched.refresh_slurm_nodes())
        tg.create_task(sched.sweep(pods_synced))
        tg.create_task(
            list_then_watch(
                Watcher(kube, NODES, clock=clock, keep=slim),
                lambda ev: sched.on_node_event(ev.type, ev.object),
                synced=nodes_synced,
                keep_on_list_error=True,
                guard=sched.guard("scheduler-watch-nodes"),
            )
        )
        if cfg.managed_namespace_selector is not None or cfg.uses_namespace_labels:
            tg.create_task(
                list_then_watch(
                    Watcher(kube, NAMESPACES, clock=clock),
                    lambda ev: sched.on_namespace_event(ev.type, ev.object),
                    synced=ns_synced,
                    keep_on_list_error=True,
                    guard=sched.guard("scheduler-watch-namespaces"),
                )
            )
        else:
            ns_synced.set()
        # DRA: what claims and devices exist, kept current (no list per DRA cycle or bind)
        dra = sched.dra.cache

        async def follow(res: Resource, on_event: Callable[[str, KubeObject], None]) -> None:
            # A resource the cluster may not serve (DRA before Kubernetes 1.34): the readers
            # keep reading the API (scheduler.dra) until its copy was listed whole.
            await list_then_watch(
                Watcher(kube, res, clock=clock),
                lambda ev: on_event(ev.type, ev.object),
                listed=lambda: dra.listed(res),
                keep_on_list_error=True,
                absent_ok=True,
                guard=sched.guard(f"scheduler-watch-{res.plural}"),
            )

        tg.create_task(follow(DEVICE_CLASSES, dra.on_class_event))
        tg.create_task(follow(RESOURCE_SLICES, dra.on_slice_event))
        tg.create_task(follow(RESOURCE_CLAIMS, sched.on_claim_event))
        tg.create_task(follow(CLAIM_TEMPLATES, sched.on_claim_template_event))
        # The objects the workload kinds read (their own, and related: a PodGroup's
        # Workload), kept current: the snapshot reads them in memory
        kinds_synced = []
        for api in object_apis():
            kinds_synced.append(asyncio.Event())
            tg.create_task(follow_related(sched, kube, api, clock, kinds_synced[-1]))
        # DeviceTaintRules only where discovery lists them (Kubernetes 1.37+); elsewhere
        # there are none to wait for
        if await served(kube, DEVICE_TAINT_RULES):
            tg.create_task(follow(DEVICE_TAINT_RULES, dra.on_taint_rule_event))
        else:
            dra.listed(DEVICE_TAINT_RULES)
        # The pods are listed beside the nodes (a pod event only groups the pod; whether it
        # is ours reads its namespace's labels); the workers, which translate groups
        # against the nodes, start once both node lists are in. One after the other, the
        # two lists added up at every restart (5,000 nodes, then 10,000 unbound pods).
        await ns_synced.wait()
        tg.create_task(
            list_then_watch(
                Watcher(
                    kube,
                    PODS,
                    field_selector=pod_field_selector(cfg),
                    clock=clock,
                    keep=sched.state.keep_pod,
                ),
                lambda ev: sched.on_pod_event(ev.type, ev.object),
                listed=sched.initial_pods_listed,
                synced=pods_synced,
                keep_on_list_error=True,
                guard=sched.guard("scheduler-watch-pods"),
            )
        )
        await nodes_synced.wait()
        await nodes_read
        for kind_synced in kinds_synced:  # a pod is grouped by the objects held
            await kind_synced.wait()
        tg.create_task(sched.queue.run_timers())
        tg.create_task(sched.polling.run_forever())
        tg.create_task(sched.polling.plans_forever(sched.guard("scheduler-plans")))
        for _ in range(cfg.scheduler.workers):
            tg.create_task(sched.worker())
        await pods_synced.wait()
        if ready is not None:
            ready.set()
        log.info("scheduler_running", workers=cfg.scheduler.workers)
        gauges = sched.guard("scheduler-gauges")
        while True:
            async with gauges:
                sched.update_gauges()
            await clock.sleep(5.0)


async def serve(cfg: BridgeConfig, *, identity: str) -> None:
    """Build the real clients, serve health/metrics, and schedule while leader."""
    clock = SystemClock()
    ready = asyncio.Event()
    kube = await KubeClient.from_config(cfg, clock=clock)
    async with kube, SlurmClient.from_config(cfg) as slurm:
        sched = Scheduler(cfg, kube, slurm, clock)
        elector = (
            LeaderElector.from_config(kube, cfg, name=LEASE_NAME, identity=identity, clock=clock)
            if cfg.leader_election
            else None
        )

        ops = component_ops(cfg, sched.metrics.registry, synced=ready.is_set, elector=elector)
        if cfg.health_port:
            await ops.start()

        async def work() -> None:
            try:
                await run_scheduler(cfg, kube, slurm, clock=clock, ready=ready, scheduler=sched)
            finally:
                ready.clear()

        try:
            if elector is not None:
                await elector.run(work)
            else:
                await work()
        finally:
            await ops.stop()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="slurm-bridge scheduler")
    parser.add_argument("--config", help="config file (YAML)")
    parser.add_argument(
        "--identity",
        default=f"{socket.gethostname()}-{os.getpid()}",
        help="leader election identity (default: hostname-pid)",
    )
    args = parser.parse_args(argv)
    try:
        cfg = load_config(args.config)
    except ConfigError as e:
        print(f"slurm-bridge scheduler: {e}")
        return 2
    configure_logging(cfg.log_level, cfg.log_format)

    async def runner() -> None:
        task = asyncio.ensure_future(serve(cfg, identity=args.identity))
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await task

    try:
        loops.run(runner())
    except BridgeError as e:
        log.error("scheduler_failed", error=str(e))
        return 1
    return 0
