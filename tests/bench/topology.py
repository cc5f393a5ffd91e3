"""Topology-aware gangs through a busy cluster, with and without the request, against REAL
Slurm (a tree:2x4 sandbox: two leaf switches of four external nodes) and the sandbox API
server, the scheduler in this process with a Slurm client that counts its requests.

Each mode runs ``--gangs`` PodGroups of random size 2-4 (one pod per node), at most
``--in-flight`` of them at once, each held ``--hold`` seconds (random up to) once bound,
then ended (its Slurm job cancelled, its pods finished). Meanwhile a background loop keeps
``--background`` one-node jobs of other Slurm users on random nodes for random spells, so
free nodes are scattered over both leaves. Modes, same random seed:

* ``required``: the PodGroup carries ``kueue.x-k8s.io/podset-required-topology`` of a level
  mapped to ``switch`` (required_switches=1, a day's wait): it must never straddle;
* ``none``: no request (the baseline: Slurm's best fit, which straddles when it must).

Output, the last line, ONE JSON object: ``gangs`` (per mode), ``straddling_required``
(gangs bound under two leaf switches: must be 0), ``straddling_none``, ``wait_s_p50``
(created -> all bound) per mode, ``slurm_calls_per_gang`` per mode (every slurmrestd
request the scheduler made during the mode, polling included, over its gangs).

Sandbox: ``$SLURM_SANDBOX_TOPOLOGY_ENV``, or ``$SLURM_SANDBOX_ENV`` when it names a tree:2x4
sandbox; else one of its own, started and stopped here in its own dir and ports
(tests/topology_sandbox.py).

Run: ``python -m tests.bench.topology [--gangs 100]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from bridge.clock import SystemClock
from bridge.config import parse_config
from bridge.errors import SlurmError
from bridge.kube.client import KubeClient
from bridge.kube.resources import PODGROUPS, PODS
from bridge.logging import configure_logging
from bridge.models import JobSpec
from bridge.slurm.client import SlurmClient
from bridge.wellknown import ANNOTATION_KUEUE_REQUIRED_TOPOLOGY, LABEL_JOB_ID, LABEL_POD_GROUP
from sandbox.cluster import SandboxCluster
from scheduler.app import run_scheduler
from scheduler.cycle import Scheduler
from tests.bench.scheduler_child import CountingSlurmClient
from tests.integration.conftest import SlurmSandbox, load_sandbox, make_client, sandbox_config_data
from tests.topology_sandbox import leaf_of, topology_sandbox
from tests.waiting import eventually

NS = "slurm-bridge"
RACK = "network.example.com/rack"
MODES = ("required", "none")


def gang_plan(n: int, seed: int) -> list[tuple[int, float]]:
    """(size, hold seconds fraction) of each gang: the same for every mode."""
    rng = random.Random(seed)
    return [(rng.randint(2, 4), rng.random()) for _ in range(n)]


def pod(name: str, group: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {LABEL_POD_GROUP: group}},
        "spec": {
            "schedulerName": "slurm-bridge-scheduler",
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "1", "memory": "100Mi"}},
                }
            ],
        },
    }


async def background(sb: SlurmSandbox, jobs: int, seed: int, stop: asyncio.Event) -> None:
    """Keep ``jobs`` one-node jobs of "other users" on random nodes for random spells."""
    rng = random.Random(seed + 1)
    held: list[tuple[int, float]] = []
    async with make_client(sb) as slurm:
        try:
            while not stop.is_set():
                now = time.monotonic()
                for job_id, until in [h for h in held if h[1] <= now]:
                    held.remove((job_id, until))
                    with contextlib.suppress(SlurmError):
                        await slurm.cancel(job_id)
                while len(held) < jobs:
                    keep = rng.choice(sb.external_nodes)
                    spec = JobSpec(
                        name="background",
                        partition=sb.partition,
                        min_nodes=1,
                        tasks=1,
                        excluded_nodes=tuple(n for n in sb.external_nodes if n != keep),
                    )
                    with contextlib.suppress(SlurmError):
                        held.append((await slurm.submit(spec), now + rng.uniform(1.0, 4.0)))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 0.25)
        finally:
            for job_id, _ in held:
                with contextlib.suppress(SlurmError):
                    await slurm.cancel(job_id)


class Run:
    """One mode: the scheduler against the sandbox API server and real Slurm."""

    def __init__(self, kube: KubeClient, api: SandboxCluster, slurm: SlurmClient, mode: str):
        self.kube, self.api, self.slurm, self.mode = kube, api, slurm, mode
        self.waits: list[float] = []
        self.straddling = 0

    async def gang(self, i: int, size: int, hold: float, limit: float) -> None:
        name = f"{self.mode}-{i}"
        ann = {ANNOTATION_KUEUE_REQUIRED_TOPOLOGY: RACK} if self.mode == "required" else {}
        await self.kube.create(
            PODGROUPS,
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": name, "annotations": ann},
                "spec": {"minMember": size},
            },
            NS,
        )
        names = [f"{name}-{k}" for k in range(size)]
        started = time.monotonic()
        for n in names:
            await self.kube.create(PODS, pod(n, name), NS)

        async def all_bound() -> list[dict[str, Any]] | None:
            pods = [await self.kube.get_pod(NS, n) for n in names]
            return pods if all((p.get("spec") or {}).get("nodeName") for p in pods) else None

        pods = await eventually(all_bound, within=limit, what=f"gang {name} bound", every=0.05)
        self.waits.append(time.monotonic() - started)
        if len({leaf_of(p["spec"]["nodeName"]) for p in pods}) > 1:
            self.straddling += 1
        await asyncio.sleep(hold)
        job_id = int(pods[0]["metadata"]["labels"][LABEL_JOB_ID])
        with contextlib.suppress(SlurmError):
            await self.slurm.cancel(job_id)
        for n in names:
            self.api.finish_pod(NS, n)


@contextlib.asynccontextmanager
async def scheduler_for(
    sb: SlurmSandbox, api: SandboxCluster, tmp: Path, mode: str, **config: Any
) -> AsyncIterator[tuple[KubeClient, CountingSlurmClient]]:
    """The scheduler of one benchmark mode in this loop, with a request-counting Slurm
    client; ``config``: keys to set (default: this benchmark's topology levels)."""
    cfg = parse_config(
        sandbox_config_data(
            sb,
            kubeconfig=str(api.write_kubeconfig(tmp / f"kubeconfig-{mode}")),
            slurmPollIntervalSeconds=0.25,
            **(config or {"topology": {"levels": {RACK: "switch"}}}),
        ),
        env={},
    )
    async with (
        await KubeClient.from_config(cfg) as kube,
        CountingSlurmClient.from_config(cfg) as slurm,
    ):
        sched = Scheduler(cfg, kube, slurm, SystemClock())
        ready = asyncio.Event()
        task = asyncio.create_task(run_scheduler(cfg, kube, slurm, ready=ready, scheduler=sched))
        try:
            await asyncio.wait_for(ready.wait(), 30)
            yield kube, slurm
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def run_mode(sb: SlurmSandbox, args: argparse.Namespace, mode: str) -> dict[str, Any]:
    stop = asyncio.Event()
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            SandboxCluster(nodes=list(sb.external_nodes), kubelet=True) as api,
            scheduler_for(sb, api, Path(tmp), mode) as (kube, counting),
            make_client(sb) as slurm,
        ):
            bg = asyncio.create_task(background(sb, args.background, args.seed, stop))
            run = Run(kube, api, slurm, mode)
            slots = asyncio.Semaphore(args.in_flight)
            calls0 = sum(counting.calls.values())

            async def one(i: int, size: int, frac: float) -> None:
                async with slots:
                    await run.gang(i, size, frac * args.hold, args.limit)

            try:
                plan = gang_plan(args.gangs, args.seed)
                await asyncio.gather(*(one(i, s, f) for i, (s, f) in enumerate(plan)))
            finally:
                stop.set()
                await bg
            calls = sum(counting.calls.values()) - calls0
    return {
        "gangs": len(run.waits),
        "straddling": run.straddling,
        "wait_s_p50": round(statistics.median(run.waits), 3),
        "slurm_calls_per_gang": round(calls / max(1, len(run.waits)), 1),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with topology_sandbox() as env_file:
        sb = load_sandbox(env_file)
        modes = {m: await run_mode(sb, args, m) for m in MODES}
    return {
        "gangs": args.gangs,
        "straddling_required": modes["required"]["straddling"],
        "straddling_none": modes["none"]["straddling"],
        "wait_s_p50": {m: modes[m]["wait_s_p50"] for m in MODES},
        "slurm_calls_per_gang": {m: modes[m]["slurm_calls_per_gang"] for m in MODES},
        "bound": {m: modes[m]["gangs"] for m in MODES},
        "topology": "tree:2x4",
    }


def gang_bench_parser(
    module: str,
    doc: str | None,
    *,
    gangs: tuple[int, str],
    in_flight: int,
    hold: float,
    seed: int,
) -> argparse.ArgumentParser:
    """The options every gang benchmark takes (``gangs``: default and help); a bench adds
    its own."""
    ap = argparse.ArgumentParser(prog=f"python -m {module}", description=doc)
    ap.add_argument("--gangs", type=int, default=gangs[0], help=gangs[1])
    ap.add_argument("--in-flight", type=int, default=in_flight, help="gangs at once")
    ap.add_argument("--hold", type=float, default=hold, help="max seconds a bound gang holds")
    ap.add_argument("--seed", type=int, default=seed)
    ap.add_argument("--limit", type=float, default=300.0, help="give up on a gang after (s)")
    return ap


def parser() -> argparse.ArgumentParser:
    ap = gang_bench_parser(
        "tests.bench.topology",
        __doc__,
        gangs=(100, "gangs per mode (sizes 2-4)"),
        in_flight=3,
        hold=2.0,
        seed=27,
    )
    ap.add_argument("--background", type=int, default=2, help="one-node jobs of others")
    return ap


def main(argv: list[str] | None = None) -> int:
    return cli(parser(), run, argv)


def cli(
    ap: argparse.ArgumentParser,
    body: Callable[[argparse.Namespace], Awaitable[dict[str, Any]]],
    argv: list[str] | None,
) -> int:
    """A benchmark's command line: parse, run quietly, print the one JSON line."""
    args = ap.parse_args(argv)
    configure_logging("warning", "console")
    print(json.dumps(asyncio.run(body(args))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
