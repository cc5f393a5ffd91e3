"""Exact fit: gangs of several shapes as heterogeneous jobs vs sized by their largest
member, against REAL Slurm (GPU and CPU-only external nodes) and the sandbox API server,
the scheduler in this process with a Slurm client that counts its requests.

Each mode runs the same ``--gangs`` gangs, a mix in turn of:

* ``driver``: a PodGroup of a CPU driver (1 CPU) and two GPU workers;
* ``lws``: a LeaderWorkerSet group of a CPU leader and two GPU workers;
* ``uniform``: a PodGroup of three GPU pods (one shape: a plain job in every mode);

at most ``--in-flight`` at once (more than the cluster holds: gangs wait for each other),
each held ``--hold`` seconds (random up to) once bound, then ended (its Slurm job
cancelled, its pods finished). Modes:

* ``hetjob_exclusive`` / ``largest_exclusive``: ``scheduler.gangSizing`` hetjob or
  largest, exclusive placement (the default): a GPU pod asks every GPU of a node;
* ``hetjob_shared`` / ``largest_shared``: the same with ``exclusive: "false"``: a GPU pod
  asks part of a node (half its GPUs).

Output, the last line, ONE JSON object: ``gangs``; then, each an object keyed by mode:
``gpus_requested``
(the pods' GPU requests), ``gpus_allocated`` (what Slurm holds for the gangs while they
run: every component's ``gres_detail``), ``gpu_fit`` (allocated / requested: 1.00 in both
hetjob modes), ``cpus_requested``, ``cpus_allocated`` (the jobs' allocated CPUs),
``cpu_fit``, ``wait_s`` (created -> every pod bound: ``p50``, ``p99``),
``created_to_bound_ms`` (per pod, ``p50``) and ``slurm_calls_per_gang`` (every slurmrestd
request the scheduler made during the mode, polling included, over its gangs).

Sandbox: the one ``$SLURM_SANDBOX_ENV`` names (external nodes with GPUs), else one of its
own (``up --external-nodes 6 --node-gpus 4 --node-cpus 16``), in the tests' sandbox dir
+ ``-fit`` on the tests' ports + 60 (tests/topology_sandbox.py), stopped at the end.
Either way ``--cpu-nodes`` CPU-only external nodes are added for the run (``POST
/new/node/``, Kubernetes nodes of the same names) and deleted after.

Run: ``python -m tests.bench.fit [--gangs 120]``.

``--mig-layouts random --seed S`` runs every-layout MIG benchmark instead, in process
(tests/bench/mig_layouts.py): random valid MIG nodes of every model and publication form,
the packer, the GRES condition and Slurm-style jobs replayed; its last line is one JSON
object (``mig_nodes``, ``mig_packing_failures``, ``mig_givebacks``,
``counter_overcommits``, ``double_allocations``, ``packing_ms_p99`` ...).

``--mig`` runs the MIG benchmark instead (tests/bench/mig_fit.py): pods asking MIG slices
of several profiles and whole GPUs through a busy cluster of MIG nodes, checking from what
Slurm holds that no GPU's counters are overcommitted and no slice is held twice.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import os
import random
import re
import secrets
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from bridge.errors import SlurmError
from bridge.kube.resources import PODGROUPS, PODS
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import SlurmJob
from bridge.wellknown import LABEL_JOB_ID, LABEL_POD_GROUP, slurmjob_annotation
from sandbox.cluster import SandboxCluster
from sandbox.slurm.launcher import ENV_FILE
from tests.bench.mig_fit import add_mig_args, run_mig
from tests.bench.mig_layouts import run_random
from tests.bench.topology import cli, gang_bench_parser, scheduler_for
from tests.integration.bridge_harness import Sandboxes
from tests.integration.conftest import SlurmSandbox, load_sandbox, make_client
from tests.topology_sandbox import own_sandbox
from tests.waiting import eventually

NS = "slurm-bridge"
MODES = ("hetjob_exclusive", "hetjob_shared", "largest_exclusive", "largest_shared")
KINDS = ("driver", "lws", "uniform")
_GRES_COUNT = re.compile(r"(?:CNT:(\d+))|^[a-z]+(?::[^:(]+)?:(\d+)\(")


def gres_gpus(detail: tuple[str, ...]) -> int:
    """GPUs in a job's ``gres_detail`` (one entry per node): ``gpu(CNT:2)`` on external
    nodes, ``gpu:2(IDX:0-1)`` or ``gpu:a100:2(IDX:0-1)`` where slurmd has device files."""
    total = 0
    for entry in detail:
        for part in entry.split(","):
            if not part.startswith("gpu"):
                continue
            m = _GRES_COUNT.search(part)
            if m:
                total += int(m.group(1) or m.group(2))
    return total


def container(cpu: int, gpus: int) -> dict[str, Any]:
    res: dict[str, Any] = {"requests": {"cpu": str(cpu), "memory": "100Mi"}}
    if gpus:
        res["limits"] = {"nvidia.com/gpu": str(gpus)}
    return {"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": res}


def pod_spec(cpu: int, gpus: int) -> dict[str, Any]:
    return {"schedulerName": "slurm-bridge-scheduler", "containers": [container(cpu, gpus)]}


@contextlib.contextmanager
def fit_sandbox() -> Iterator[Path]:
    given = os.environ.get(ENV_FILE)
    if given and Path(given).is_file():
        yield Path(given)
        return
    with own_sandbox(
        os.environ,
        "-fit",
        60,
        ("--nodes", "1", "--external-nodes", "6", "--node-gpus", "4", "--node-cpus", "16"),
    ) as env_file:
        yield env_file


@contextlib.asynccontextmanager
async def cpu_nodes(slurm: SlurmClient, sb: SlurmSandbox, n: int) -> AsyncIterator[list[str]]:
    """``n`` CPU-only external nodes in the partition for the run."""
    names = [f"cpu-{secrets.token_hex(2)}-{i}" for i in range(n)]
    made: list[str] = []
    try:
        for name in names:
            await slurm.create_external_node(name, cpus=sb.node_cpus, memory_mib=sb.node_mem_mb)
            made.append(name)
            await slurm.add_node_to_partition(sb.partition, name)
        yield names
    finally:
        for name in made:
            with contextlib.suppress(SlurmError):
                await slurm.delete_node(name)


class Run:
    """One mode: the gangs, what they asked and what Slurm held for them."""

    def __init__(self, sb: Sandboxes, mode: str, gpus_per_node: int) -> None:
        self.sb, self.mode = sb, mode
        self.exclusive = mode.endswith("exclusive")
        # a GPU pod asks every GPU of a node (exclusive), or half of them (shared)
        self.gpus = gpus_per_node if self.exclusive else max(1, gpus_per_node // 2)
        self.worker_cpus = 4
        self.waits: list[float] = []
        self.pod_ms: list[float] = []
        self.asked = {"gpu": 0, "cpu": 0}
        self.held = {"gpu": 0, "cpu": 0}

    def annotations(self) -> dict[str, str]:
        return {} if self.exclusive else {slurmjob_annotation("exclusive"): "false"}

    async def podgroup(self, name: str, shapes: list[tuple[int, int]]) -> list[str]:
        await self.sb.kube.create(
            PODGROUPS,
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": name, "annotations": self.annotations()},
                "spec": {"minMember": len(shapes)},
            },
            NS,
        )
        names = []
        for k, (cpu, gpus) in enumerate(shapes):
            n = f"{name}-{k}"
            body = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": n, "labels": {LABEL_POD_GROUP: name}},
                "spec": pod_spec(cpu, gpus),
            }
            await self.sb.kube.create(PODS, body, NS)
            names.append(n)
        return names

    async def lws(self, name: str) -> list[str]:
        worker = pod_spec(self.worker_cpus, self.gpus)
        lws = {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": {"name": name, "namespace": NS, "annotations": self.annotations()},
            "spec": {
                "replicas": 1,
                "leaderWorkerTemplate": {
                    "size": 3,
                    "leaderTemplate": {"spec": pod_spec(1, 0)},
                    "workerTemplate": {"spec": copy.deepcopy(worker)},
                },
            },
        }
        return await self.sb.create_workload([lws])

    async def gang(self, i: int, hold: float, limit: float) -> None:
        kind = KINDS[i % len(KINDS)]
        name = f"{self.mode.replace('_', '-')}-{i}"
        gpu = (self.worker_cpus, self.gpus)
        started = time.monotonic()
        if kind == "driver":
            shapes = [(1, 0), gpu, gpu]
            names = await self.podgroup(name, shapes)
        elif kind == "lws":
            shapes = [(1, 0), gpu, gpu]
            names = await self.lws(name)
        else:
            shapes = [gpu, gpu, gpu]
            names = await self.podgroup(name, shapes)
        self.asked["cpu"] += sum(c for c, _ in shapes)
        self.asked["gpu"] += sum(g for _, g in shapes)
        seen: dict[str, float] = {}

        async def all_bound() -> list[dict[str, Any]] | None:
            pods = [await self.sb.get_pod(n) for n in names]
            now = time.monotonic()
            for p in pods:
                if (p.get("spec") or {}).get("nodeName"):
                    seen.setdefault(p["metadata"]["name"], now)
            return pods if len(seen) == len(names) else None

        pods = await eventually(all_bound, within=limit, what=f"gang {name} bound", every=0.05)
        self.waits.append(time.monotonic() - started)
        self.pod_ms += [(t - started) * 1000 for t in seen.values()]
        job_id = int(pods[0]["metadata"]["labels"][LABEL_JOB_ID])
        job = await self.sb.slurm.get_job(job_id)
        self.count_held(job)
        await asyncio.sleep(hold)
        with contextlib.suppress(SlurmError):
            await self.sb.slurm.cancel(job_id)
        for n in names:
            self.sb.api.finish_pod(NS, n)

    def count_held(self, job: SlurmJob) -> None:
        for c in job.components:
            self.held["gpu"] += gres_gpus(c.gres_detail)
            self.held["cpu"] += c.cpus or 0


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


async def run_mode(
    sb: SlurmSandbox, args: argparse.Namespace, mode: str, cpu_only: list[str]
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            SandboxCluster(nodes=[*sb.external_nodes, *cpu_only], kubelet=True) as api,
            scheduler_for(
                sb, api, Path(tmp), mode, scheduler={"gangSizing": mode.split("_")[0], "workers": 8}
            ) as (kube, counting),
            make_client(sb) as slurm,
        ):
            run = Run(Sandboxes(kube, slurm, api), mode, sb.node_gpus)
            slots = asyncio.Semaphore(args.in_flight)
            calls0 = sum(counting.calls.values())
            rng = random.Random(args.seed)
            holds = [rng.random() * args.hold for _ in range(args.gangs)]

            async def one(i: int) -> None:
                async with slots:
                    await run.gang(i, holds[i], args.limit)

            try:
                await asyncio.gather(*(one(i) for i in range(args.gangs)))
            finally:
                await Sandboxes(kube, slurm, api).cancel_jobs()
            calls = sum(counting.calls.values()) - calls0
    n = max(1, len(run.waits))
    return {
        "gpus_requested": run.asked["gpu"],
        "gpus_allocated": run.held["gpu"],
        "gpu_fit": round(run.held["gpu"] / max(1, run.asked["gpu"]), 2),
        "cpus_requested": run.asked["cpu"],
        "cpus_allocated": run.held["cpu"],
        "cpu_fit": round(run.held["cpu"] / max(1, run.asked["cpu"]), 2),
        "wait_s": {
            "p50": round(statistics.median(run.waits), 3) if run.waits else 0.0,
            "p99": round(_pct(run.waits, 0.99), 3),
        },
        "created_to_bound_ms": {
            "p50": round(statistics.median(run.pod_ms), 1) if run.pod_ms else 0.0
        },
        "slurm_calls_per_gang": round(calls / n, 1),
        "bound": len(run.waits),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.mig_layouts:
        return run_random(args.seed, args.mig_layout_nodes, args.mig_steps, args.mig_gpus)
    if args.mig:
        return await run_mig(args)
    with fit_sandbox() as env_file:
        sb = load_sandbox(env_file)
        if sb.node_gpus < 2:
            raise SystemExit(f"the sandbox behind {env_file} has no GPUs on its external nodes")
        async with make_client(sb) as slurm, cpu_nodes(slurm, sb, args.cpu_nodes) as cpu_only:
            modes = {m: await run_mode(sb, args, m, cpu_only) for m in MODES}
    report: dict[str, Any] = {"gangs": args.gangs}
    for key in (
        "gpus_requested",
        "gpus_allocated",
        "gpu_fit",
        "cpus_requested",
        "cpus_allocated",
        "cpu_fit",
        "wait_s",
        "created_to_bound_ms",
        "slurm_calls_per_gang",
        "bound",
    ):
        report[key] = {m: modes[m][key] for m in MODES}
    report["nodes"] = {
        "gpu": len(sb.external_nodes),
        "gpus_per_node": sb.node_gpus,
        "cpu_only": args.cpu_nodes,
    }
    return report


def parser() -> argparse.ArgumentParser:
    ap = gang_bench_parser(
        "tests.bench.fit",
        __doc__,
        gangs=(120, "gangs per mode (kinds in turn)"),
        in_flight=6,
        hold=1.0,
        seed=32,
    )
    ap.add_argument("--cpu-nodes", type=int, default=2, help="CPU-only external nodes added")
    add_mig_args(ap)
    g = ap.add_argument_group("--mig-layouts: every MIG layout a user can cut (in process)")
    g.add_argument(
        "--mig-layouts",
        choices=["random"],
        help="random valid MIG nodes (1-8 GPUs, every model, each publication form): the "
        "packer, the condition and Slurm-style jobs replayed (tests/bench/mig_layouts.py)",
    )
    g.add_argument("--mig-layout-nodes", type=int, default=60, help="nodes (--mig-layouts)")
    g.add_argument("--mig-steps", type=int, default=60, help="jobs arriving or ending per node")
    g.add_argument("--mig-gpus", type=int, default=0, help="GPUs per node (default 1-8 at random)")
    return ap


def main(argv: list[str] | None = None) -> int:
    return cli(parser(), run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
