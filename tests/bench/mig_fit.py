"""Exact fit of MIG slices (``python -m tests.bench.fit --mig``): pods asking MIG slices of
several profiles, and whole GPUs, through a BUSY cluster of MIG nodes (more pods in flight
than devices, pods ending and new ones arriving), against REAL Slurm and the sandbox API
server, the scheduler in this process.

Each pod asks one device, in turn by ``--mix`` (default ``1g.10gb*3,2g.20gb*2,3g.40gb,
whole``): a MIG slice as the extended resource ``nvidia.com/mig-<profile>: 1``, or a whole
GPU as ``nvidia.com/gpu: 1`` (``scheduler.gresMapping`` types it ``gpu:<the layout's
whole type>``; with ``--untyped-whole`` it stays ``gpu``, and Slurm may give it a slice);
``exclusive: "false"`` so pods share a node. At most ``--mig-in-flight`` at once (default
twice the devices), each held ``--hold`` seconds (random up to) once bound, then ended
(its Slurm job cancelled, its pod finished).

What Slurm holds is checked two ways. SAMPLED while the pods run (every ``--sample`` s,
``GET /jobs/``: every running job's ``gres_detail``, one entry per node, with the indices
Slurm gave): each sample is one consistent view of slurmctld. And per JOB WINDOW: from the
bench's read of a bound pod's running job to its cancel's answer, the job surely held
what it read; the windows are replayed at each one's start, so every overlap is checked,
not only those a sample fell on. The
sandbox lays each MIG node's GPUs out as ``--mig-layout`` (sandbox/slurm/mig.py): device
index -> physical GPU and type; each profile's compute and memory slices come from
bridge/config.py ``NVIDIA_MIG_GPUS`` for ``--mig-gpu``. Output, ONE JSON line:

* ``slices_requested`` / ``slices_allocated``: MIG slices the pods asked, and those Slurm
  held for them (read from their job when bound, of the profile asked); the same for
  ``whole_gpus_*``; ``wrong_type``: pods whose job held another type than asked;
* ``counter_overcommits``: (sample or window start, GPU) pairs where the slices held on
  one physical GPU consume more compute or memory slices than it has (must be 0);
* ``double_allocations``: (node, index) devices seen held by two jobs at once (must be 0);
* ``layout_mismatches``: held devices whose type is not the layout's at that index (the
  benchmark's own check of its index -> GPU map; 0);
* ``wait_s`` (created -> bound: ``p50``, ``p99``), ``bound``, ``unbound`` (pods not bound
  within ``--limit`` s: counted and deleted, the run goes on), ``peak_devices_held``,
  ``samples``, ``job_windows``.

Sandbox: the one ``$SLURM_SANDBOX_MIG_ENV`` or ``$SLURM_SANDBOX_ENV`` names when it has
MIG nodes with a layout, else one of its own (``up --mig-nodes 3 --mig-layout
a100,3g.40gb+2g.20gb+1g.10gb*2``: per node a whole GPU and a GPU cut in four), in the
tests' sandbox dir + ``-migfit`` on the tests' ports + 70, stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import re
import secrets
import statistics
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bridge.config import MigGpu, nvidia_mig_gpu
from bridge.errors import ConfigError, KubeError, SlurmError
from bridge.kube.resources import PODS
from bridge.slurm.client import SlurmClient
from bridge.wellknown import LABEL_JOB_ID, slurmjob_annotation
from sandbox.cluster import SandboxCluster
from sandbox.slurm.launcher import ENV_FILE, parse_env_file
from sandbox.slurm.mig import MigLayout
from tests.bench.scheduler import percentile
from tests.bench.topology import scheduler_for
from tests.clients import list_jobs
from tests.integration.bridge_harness import Sandboxes
from tests.integration.conftest import SlurmSandbox, load_sandbox, make_client
from tests.mig_sandbox import ENV_MIG
from tests.topology_sandbox import own_sandbox
from tests.waiting import eventually

NS = "slurm-bridge"
WHOLE = "whole"
LAYOUT = "a100,3g.40gb+2g.20gb+1g.10gb*2"
GPU_MODEL = "A100-80GB"
MIX = "1g.10gb*3,2g.20gb*2,3g.40gb,whole"
PORT_OFFSET = 70
# one typed GRES of a gres_detail entry: gpu:1g.10gb:2(IDX:3-4) or gpu:1g.10gb(CNT:2)
_HELD = re.compile(r"(?P<name>[a-z]+)(?::(?P<type>[^:(),]+))?(?::(?P<n>\d+))?\((?P<what>[^)]*)\)")


@dataclass(frozen=True)
class Held:
    """Devices of one type a job holds on one node: their indices when Slurm names them."""

    type: str
    count: int
    indices: tuple[int, ...]


def parse_indices(text: str) -> tuple[int, ...]:
    """``0,2-3`` -> (0, 2, 3)."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return tuple(out)


def held_gpus(entry: str) -> tuple[Held, ...]:
    """The GPUs in one node's ``gres_detail`` entry: ``gpu:a100:1(IDX:0),gpu:1g.10gb:2(IDX:
    3-4)``; a count without indices (``gpu:1g.10gb(CNT:2)``) has none. A type the job
    holds none of (``gpu:h100:0(IDX:)``, an untyped request on a node of several types) is
    left out."""
    out: list[Held] = []
    for m in _HELD.finditer(entry):
        if m.group("name") != "gpu":
            continue
        what = m.group("what")
        if what.startswith("CNT:"):
            out.append(Held(m.group("type") or "", int(what[4:]), ()))
        elif what.startswith("IDX:") and what not in ("IDX:", "IDX:N/A"):
            idx = parse_indices(what[4:])
            out.append(Held(m.group("type") or "", int(m.group("n") or len(idx)), idx))
    return tuple(out)


@dataclass
class Ledger:
    """What Slurm held, sample by sample, checked against the nodes' physical GPUs."""

    layout: MigLayout
    gpu: MigGpu
    samples: int = 0
    overcommits: int = 0
    mismatches: int = 0
    peak: int = 0
    doubles: set[tuple[str, int, frozenset[int]]] = field(default_factory=set)

    def counters(self, kind: str) -> tuple[int, int]:
        """(compute, memory) slices a device of ``kind`` takes of its GPU: all of them for a
        whole GPU."""
        if kind in {p.name for p in self.gpu.profiles}:
            p = self.gpu.profile(kind)
            return p.compute, p.memory
        return self.gpu.compute, self.gpu.memory

    def sample(self, held: Mapping[int, Mapping[str, tuple[Held, ...]]]) -> None:
        """One snapshot: job id -> node -> what it holds there."""
        self.samples += 1
        devices = self.layout.devices
        owners: dict[tuple[str, int], set[int]] = {}
        for job_id, nodes in held.items():
            for node, items in nodes.items():
                for h in items:
                    for i in h.indices:
                        owners.setdefault((node, i), set()).add(job_id)
                        if i >= len(devices) or devices[i].type != h.type:
                            self.mismatches += 1
        self.peak = max(self.peak, len(owners))
        use: dict[tuple[str, int], list[int]] = {}
        for (node, i), jobs in owners.items():
            if len(jobs) > 1:
                self.doubles.add((node, i, frozenset(jobs)))
            if i >= len(devices):
                continue
            c, m = self.counters(devices[i].type)
            u = use.setdefault((node, devices[i].gpu), [0, 0])
            u[0] += c * len(jobs)
            u[1] += m * len(jobs)
        self.overcommits += sum(
            1 for c, m in use.values() if c > self.gpu.compute or m > self.gpu.memory
        )


@dataclass(frozen=True)
class Window:
    """What one job surely held, and when: from the bench's read of its running record
    (``gres_detail``) to its cancel's answer (monotonic seconds)."""

    job_id: int
    start: float
    end: float
    held: Mapping[str, tuple[Held, ...]]


def replay(ledger: Ledger, windows: list[Window]) -> None:
    """Feed ``ledger`` what every job held at each moment one began: every overlap of two
    windows is seen, not only those a sample fell on."""
    for w in windows:
        ledger.sample({o.job_id: o.held for o in windows if o.start <= w.start < o.end})


def mig_env_file(environ: Mapping[str, str]) -> Path | None:
    """The env file of a sandbox the environment names that has MIG nodes with a layout."""
    for given in (environ.get(ENV_MIG), environ.get(ENV_FILE)):
        if given and Path(given).is_file():
            env = parse_env_file(Path(given).read_text())
            if env.get("SLURM_MIG_NODES") and env.get("SLURM_MIG_LAYOUT"):
                return Path(given)
    return None


@contextlib.contextmanager
def mig_fit_sandbox(args: argparse.Namespace) -> Iterator[Path]:
    given = mig_env_file(os.environ)
    if given is not None:
        yield given
        return
    up: tuple[str, ...] = ("--nodes", "1", "--external-nodes", "0", "--node-gpus", "0")
    up += ("--mig-nodes", str(args.mig_nodes), "--mig-layout", args.mig_layout)
    up += ("--mig-gpu", args.mig_gpu)
    with own_sandbox(os.environ, "-migfit", PORT_OFFSET, up) as env_file:
        yield env_file


def parse_mix(text: str) -> list[str]:
    """``1g.10gb*3,whole`` -> ['1g.10gb', '1g.10gb', '1g.10gb', 'whole']."""
    out: list[str] = []
    for part in text.split(","):
        kind, _, n = part.strip().partition("*")
        if not kind or (n and not n.isdigit()):
            raise ConfigError("mix", f"{part!r} is not <profile or whole>[*N]")
        out += [kind] * int(n or 1)
    return out


def slice_pod(name: str, kind: str) -> dict[str, Any]:
    resource = "nvidia.com/gpu" if kind == WHOLE else f"nvidia.com/mig-{kind}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": {slurmjob_annotation("exclusive"): "false"}},
        "spec": {
            "schedulerName": "slurm-bridge-scheduler",
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "100Mi"},
                        "limits": {resource: "1"},
                    },
                }
            ],
        },
    }


class Run:
    """The pods, what they asked and what Slurm held for them."""

    def __init__(self, sb: Sandboxes, whole_type: str) -> None:
        self.sb, self.whole_type = sb, whole_type
        self.waits: list[float] = []
        self.asked: dict[str, int] = {}
        self.got: dict[str, int] = {}
        self.wrong_type = 0
        self.unbound = 0
        self.windows: list[Window] = []

    async def pod(self, i: int, kind: str, hold: float, limit: float) -> None:
        name = f"mig-{secrets.token_hex(2)}-{i}"
        started = time.monotonic()
        await self.sb.kube.create(PODS, slice_pod(name, kind), NS)
        self.asked[kind] = self.asked.get(kind, 0) + 1

        async def bound() -> dict[str, Any] | None:
            p = await self.sb.get_pod(name)
            return p if (p.get("spec") or {}).get("nodeName") else None

        try:
            p = await eventually(bound, within=limit, what=f"pod {name} bound", every=0.05)
        except AssertionError:  # never bound within --limit: counted, and deleted
            self.unbound += 1
            with contextlib.suppress(KubeError):
                await self.sb.kube.delete_pod(NS, name)
            return
        self.waits.append(time.monotonic() - started)
        job = await self.sb.slurm.get_job(int(p["metadata"]["labels"][LABEL_JOB_ID]))
        read = time.monotonic()
        want = self.whole_type if kind == WHOLE else kind
        for entry in job.gres_detail:
            for h in held_gpus(entry):
                if h.type == want:
                    self.got[kind] = self.got.get(kind, 0) + h.count
                else:
                    self.wrong_type += 1
        await asyncio.sleep(hold)
        with contextlib.suppress(SlurmError):
            await self.sb.slurm.cancel(job.job_id)
        held = {n: held_gpus(e) for n, e in zip(job.nodes, job.gres_detail, strict=False)}
        self.windows.append(Window(job.job_id, read, time.monotonic(), held))
        self.sb.api.finish_pod(NS, name)


async def sampler(slurm: SlurmClient, ledger: Ledger, every: float, stop: asyncio.Event) -> None:
    """Every ``every`` s, what each running job of the partition holds, per node."""
    while not stop.is_set():
        jobs = (await list_jobs(slurm)).jobs
        held: dict[int, dict[str, tuple[Held, ...]]] = {}
        for j in jobs:
            if j.state.primary != "RUNNING" or not j.gres_detail:
                continue
            held[j.job_id] = {
                node: held_gpus(entry) for node, entry in zip(j.nodes, j.gres_detail, strict=False)
            }
        ledger.sample(held)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every)


async def run_mig(args: argparse.Namespace) -> dict[str, Any]:
    kinds = parse_mix(args.mix)
    with mig_fit_sandbox(args) as env_file:
        env = parse_env_file(env_file.read_text())
        layout = MigLayout.parse(env["SLURM_MIG_LAYOUT"])
        model = nvidia_mig_gpu(env.get("SLURM_MIG_GPU") or GPU_MODEL)
        whole = [d.type for d in layout.devices if d.whole]
        if WHOLE in kinds and not whole:
            raise ConfigError("mix", f"asks whole GPUs, the layout {layout} has none")
        sb = load_sandbox(env_file)
        in_flight = args.in_flight_mig or 2 * len(layout.devices) * len(sb.external_nodes)
        report = await run_pods(
            sb, args, in_flight, kinds, layout, model, whole[0] if whole else ""
        )
    report["nodes"] = {
        "mig_nodes": len(sb.external_nodes),
        "layout": str(layout),
        "gpu": model.model,
        "devices_per_node": len(layout.devices),
    }
    return report


async def run_pods(
    sb: SlurmSandbox,
    args: argparse.Namespace,
    in_flight: int,
    kinds: list[str],
    layout: MigLayout,
    model: MigGpu,
    whole_type: str,
) -> dict[str, Any]:
    ledger = Ledger(layout, model)
    # whole GPUs typed: untyped, Slurm may give a whole-GPU pod a MIG slice
    typed = whole_type and not args.untyped_whole
    mapping = {"nvidia.com/gpu": f"gpu:{whole_type}"} if typed else {}
    config = {"scheduler": {"workers": 8, "gresMapping": mapping}}
    stop = asyncio.Event()
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            SandboxCluster(nodes=list(sb.external_nodes), kubelet=True) as api,
            scheduler_for(sb, api, Path(tmp), "mig", **config) as (kube, _counting),
            make_client(sb) as slurm,
        ):
            run = Run(Sandboxes(kube, slurm, api), whole_type)
            slots = asyncio.Semaphore(in_flight)
            rng = random.Random(args.seed)
            plan = [(kinds[i % len(kinds)], rng.random() * args.hold) for i in range(args.pods)]
            rng.shuffle(plan)
            watch = asyncio.create_task(sampler(slurm, ledger, args.sample, stop))

            async def one(i: int) -> None:
                async with slots:
                    await run.pod(i, *plan[i], args.limit)

            try:
                await asyncio.gather(*(one(i) for i in range(args.pods)))
            finally:
                stop.set()
                try:
                    await watch
                finally:
                    await Sandboxes(kube, slurm, api).cancel_jobs()
    windows = Ledger(layout, model)
    replay(windows, run.windows)
    mig_kinds = [k for k in run.asked if k != WHOLE]
    by_profile = {
        k: {"requested": run.asked.get(k, 0), "allocated": run.got.get(k, 0)}
        for k in sorted(run.asked)
    }
    return {
        "mode": "mig",
        "pods": args.pods,
        "in_flight": in_flight,
        "slices_requested": sum(run.asked[k] for k in mig_kinds),
        "slices_allocated": sum(run.got.get(k, 0) for k in mig_kinds),
        "whole_gpus_requested": run.asked.get(WHOLE, 0),
        "whole_gpus_allocated": run.got.get(WHOLE, 0),
        "wrong_type": run.wrong_type,
        "counter_overcommits": ledger.overcommits + windows.overcommits,
        "double_allocations": len(ledger.doubles | windows.doubles),
        "layout_mismatches": ledger.mismatches + windows.mismatches,
        "wait_s": {
            "p50": round(statistics.median(run.waits), 3) if run.waits else 0.0,
            "p99": round(percentile(run.waits, 0.99), 3) if run.waits else 0.0,
        },
        "bound": len(run.waits),
        "unbound": run.unbound,
        "samples": ledger.samples,
        "job_windows": len(run.windows),
        "peak_devices_held": ledger.peak,
        "by_profile": by_profile,
    }


def add_mig_args(ap: argparse.ArgumentParser) -> None:
    g = ap.add_argument_group("--mig: MIG slices through a busy cluster")
    g.add_argument("--mig", action="store_true", help="run the MIG benchmark instead of gangs")
    g.add_argument("--pods", type=int, default=120, help="pods, one device each (--mig)")
    g.add_argument("--mix", default=MIX, help=f"what the pods ask in turn (default {MIX})")
    g.add_argument("--mig-in-flight", dest="in_flight_mig", type=int, default=0,
                   help="pods at once (default: twice the devices)")  # fmt: skip
    g.add_argument("--mig-nodes", type=int, default=3, help="MIG nodes of its own sandbox")
    g.add_argument("--mig-layout", default=LAYOUT, help=f"their GPUs (default {LAYOUT})")
    g.add_argument("--mig-gpu", default=GPU_MODEL, help=f"their GPU model (default {GPU_MODEL})")
    g.add_argument(
        "--untyped-whole",
        action="store_true",
        help="leave nvidia.com/gpu untyped (gpu): shows Slurm giving whole-GPU pods slices",
    )
    g.add_argument("--sample", type=float, default=0.25, help="seconds between samples")
