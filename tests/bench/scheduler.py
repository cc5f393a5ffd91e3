"""Scheduler throughput, latency, gang time, idle REST rate and memory, against the REAL
Slurm sandbox (external nodes) and the sandbox API server, with the raw capacity of the
same two servers measured in the same run.

Processes: this one runs the sandbox API server (in-process, so creation and binding are
stamped where the API server stores them) and creates the pods; the scheduler runs as a
SUBPROCESS (:mod:`tests.bench.scheduler_child`: ``run_scheduler`` with a Slurm client that
counts its requests), so its RSS is its own; the raw baseline is another subprocess
(``--role raw``): the fastest plain loop, no bridge, doing ``POST job/allocate`` (external,
immediate: RUNNING when it answers) + ``GET job/{id}`` (its node) + ``POST binding`` per
pod with the same concurrency budget as the scheduler's ``workers``: what slurmrestd and
the API server can do here.

Phases:
1. raw: ``--pods`` pods (schedulerName ``raw-bench``) placed by the raw loop; its jobs are
   then cancelled;
2. singles: ``--pods`` single pods created as fast as possible (``--creators`` at once);
   pods/s = pods / (first created -> last bound); p50/p99 of created -> bound per pod;
   ``immediate_share``: the share of them started by ``job/allocate``; ``cpu_ms_per_pod``:
   the scheduler process's CPU over the phase, per pod;
2b. paced: ``--paced`` pods created at ``--rate``/s at free capacity: ``paced_p50_ms``,
   ``paced_p99_ms`` (created -> bound);
3. gang: a PodGroup of ``--gang`` pods: last member created -> all bound;
4. steady: every job so far cancelled, one blocker job takes every external node, then
   ``--pending`` pods whose jobs pend: ``pending_reasons_s`` until every one shows Slurm's
   reason, ``pending_cpu_ms_per_pod`` the scheduler's CPU meanwhile per pod; then the
   scheduler's slurmrestd requests are counted for ``--window`` seconds.
   ``refused_allocations``: immediate allocations Slurm refused from the blocker's start
   to the end of the window (each leaves a FAILED record);
5. wake-ups: the blocker ends, and Slurm starts queued jobs on its own; this process polls
   their states every 20 ms to stamp each start, and ``queued_start_to_bound_p50_ms`` /
   ``_p99_ms`` are Slurm's start (seen) -> the pods bound (at most ``--wake-sample`` jobs,
   ``--wake-window`` s). The scheduler notices at its poller's next tick: the configured
   ``slurmPollIntervalSeconds`` while jobs move, backing off to 1 s when idle.

Run: ``python -m tests.bench.scheduler [--pods 1000] [--gang 256] [--pending 2000]`` with a
sandbox big enough (e.g. ``slurm-bridge sandbox slurm up --external-nodes 64
--node-cpus 64``). Pods ask 1 CPU / 100Mi, shared (``exclusive: "false"``). The last line
is ONE JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import math
import os
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from bridge.config import parse_config
from bridge.errors import SlurmError
from bridge.kube.client import KubeClient
from bridge.kube.resources import PODGROUPS, PODS
from bridge.logging import configure_logging
from bridge.models import JobSpec
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import Allocated
from bridge.wellknown import LABEL_JOB_ID, LABEL_POD_GROUP, SLURMJOB_PREFIX
from sandbox.cluster import SandboxCluster
from sandbox.kubeapi import SANDBOX_TOKEN, SandboxApiServer
from scheduler.decide import parse_pending
from tests.bench.scheduler_child import (
    CPROFILE_ENV,
    LINE,
    report,
    run_as_the_scheduler,
    scheduler_child,
)
from tests.bench.slurm_cpu import daemon_cpu_seconds, per_pod_ms
from tests.clients import kube_for_host
from tests.integration.conftest import (
    SlurmSandbox,
    blocker_spec,
    load_sandbox,
    make_client,
    sandbox_config_data,
)
from tests.integration.identities import component_kubeconfig
from tests.waiting import eventually

NS = "slurm-bridge"
SCHEDULER_NAME = "slurm-bridge-scheduler"
RAW_SCHEDULER_NAME = "raw-bench"
SHARED = {SLURMJOB_PREFIX + "exclusive": "false"}
SCHEDULER_CHILD = Path(__file__).with_name("scheduler_child.py")  # the scheduler, as run


# --------------------------------------------------------------------------- figures
def percentile(xs: Iterable[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..1)."""
    s = sorted(xs)
    if not s:
        return float("nan")
    return s[max(0, math.ceil(q * len(s)) - 1)]


class Stamps:
    """When the in-process API server stored each pod, its first patch (the scheduler's
    link) and its binding (monotonic s)."""

    def __init__(self, api: SandboxApiServer) -> None:
        self.created: dict[str, float] = {}
        self.patched: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.bind_requests: Counter[str] = Counter()
        objects = api.api
        create, bind, patch = objects.create, objects.bind, objects.patch

        def stamped_create(rd: Any, namespace: str, body: Any, **kw: Any) -> Any:
            obj = create(rd, namespace, body, **kw)
            if rd.plural == "pods" and not kw.get("dry_run"):
                self.created[obj["metadata"]["name"]] = time.monotonic()
            return obj

        def stamped_patch(rd: Any, namespace: str, name: str, *a: Any, **kw: Any) -> Any:
            obj = patch(rd, namespace, name, *a, **kw)
            if rd.plural == "pods" and not kw.get("subresource") and not kw.get("dry_run"):
                self.patched.setdefault(name, time.monotonic())
            return obj

        def stamped_bind(namespace: str, name: str, binding: Any) -> Any:
            self.bind_requests[name] += 1
            obj = bind(namespace, name, binding)
            self.bound.setdefault(name, time.monotonic())
            return obj

        objects.create = stamped_create  # type: ignore[method-assign]
        objects.bind = stamped_bind  # type: ignore[method-assign]
        objects.patch = stamped_patch  # type: ignore[method-assign]

    def all_bound(self, names: list[str]) -> bool:
        return all(n in self.bound for n in names)

    def timeline(
        self, names: list[str], jobs: set[int], log: Path | None = None
    ) -> dict[str, float]:
        """One group's steps, ms after its last member was created: first and last link
        patch and binding (its Scheduled events follow the bindings), and from the
        scheduler's log (``log``: its JSON lines at info level, or None) when
        ``job_allocated`` and ``group_bound`` were logged and the link and binding steps'
        own times (``jobs``: the group's)."""
        zero = max(self.created[n] for n in names)
        out: dict[str, float] = {}
        for what, stamps in (("link", self.patched), ("bound", self.bound)):
            got = [stamps[n] for n in names if n in stamps]
            if got:
                out[f"first_{what}"] = round(1000 * (min(got) - zero), 1)
                out[f"last_{what}"] = round(1000 * (max(got) - zero), 1)
        if log is not None and log.exists():
            out |= logged_steps(log, jobs, zero)
        return out


def logged_steps(log: Path, jobs: set[int], zero: float) -> dict[str, float]:
    """``job_allocated`` and ``group_bound`` of the job ``jobs`` names in the scheduler's
    JSON log, ms after ``zero`` (monotonic; the log stamps wall time)."""
    wall_minus_mono = time.time() - time.monotonic()
    found: dict[str, dict[str, Any]] = {}
    for line in log.read_text(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            rec = json.loads(line)
            if rec.get("event") in ("job_allocated", "group_bound") and rec.get("job_id") in jobs:
                found[rec["event"]] = rec
    out: dict[str, float] = {}
    for event, rec in found.items():
        wall = datetime.fromisoformat(rec["timestamp"].replace("Z", "+00:00")).timestamp()
        out[event] = round(1000 * (wall - wall_minus_mono - zero), 1)
        for k in ("link_s", "bind_s"):
            if k in rec:
                out[k.replace("_s", "_ms")] = round(1000 * rec[k], 1)
    return out


def process_cpu(pid: int) -> float:
    """A process's CPU seconds so far (user + system; /proc, clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def request_kind(e: Any) -> str:
    """A logged request as ``METHOD [watch ]resource[/subresource] status`` (names
    dropped)."""
    parts = e.path.strip("/").split("/")
    at = 2 if parts[0] == "api" else 3  # after /api/v1 or /apis/group/v1
    if parts[at : at + 1] == ["namespaces"] and len(parts) > at + 2:
        at += 2
    kind = "/".join(parts[at::2])  # resource, then its subresource (names dropped)
    watch = "watch " if "watch=" in e.query else ""
    return f"{e.method} {watch}{kind} {e.status}"


def not_served(e: Any) -> bool:
    """A discovery GET of an API group/version the server does not serve (404): how the
    scheduler learns that a workload kind's API (JobSet, LWS ...) is not installed, not a
    refusal."""
    parts = e.path.strip("/").split("/")
    return e.method == "GET" and e.status == 404 and len(parts) <= (2 if parts[0] == "api" else 3)


def bench_pod(
    name: str,
    *,
    scheduler: str = SCHEDULER_NAME,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": labels or {},
            "annotations": dict(SHARED if annotations is None else annotations),
        },
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "1", "memory": "100Mi"}},
                }
            ],
        },
    }


async def bounded(n: int, items: Iterable[Any], fn: Callable[[Any], Awaitable[Any]]) -> list[Any]:
    """``fn`` over ``items``, at most ``n`` at a time, results in order."""
    sem = asyncio.Semaphore(n)

    async def one(item: Any) -> Any:
        async with sem:
            return await fn(item)

    return list(await asyncio.gather(*(one(i) for i in items)))


async def until(what: str, check: Callable[[], bool], limit: float, every: float = 0.01) -> None:
    await eventually(check, within=limit, what=what, every=every)


# --------------------------------------------------------------------------- children
async def raw_child(kubeconfig: Path, concurrency: int) -> None:
    """The raw capacity: allocate (immediate) + its node (``GET /resources/{id}``, the
    cheapest read that names it) + bind per pod, ``concurrency`` at a time, no bridge."""
    sb = load_sandbox()
    kube = await KubeClient.connect(kubeconfig=kubeconfig, request_timeout=30)
    async with kube, make_client(sb) as slurm:
        pods = [
            p
            for p in (await kube.list_pods(NS)).items
            if p["spec"].get("schedulerName") == RAW_SCHEDULER_NAME
            and not p["spec"].get("nodeName")
        ]
        job_ids: list[int] = []
        latencies: list[float] = []
        gets = 0

        async def place(p: dict[str, Any]) -> None:
            nonlocal gets
            name = p["metadata"]["name"]
            spec = JobSpec(
                name=name,
                partition=sb.partition,
                min_nodes=1,
                max_nodes=1,
                tasks=1,
                memory_per_node_mib=100,
                exclusive=False,
                admin_comment=f"raw-bench {NS}/{name}",
            )
            started = time.monotonic()
            got = await slurm.allocate(spec)
            if not isinstance(got, Allocated):
                raise RuntimeError(f"raw: Slurm refused to start {name} at once: {got}")
            job_id = got.job_id
            job_ids.append(job_id)
            while True:  # RUNNING when allocate answers: one read, in practice
                gets += 1
                nodes = [r.node for r in await slurm.get_job_resources(job_id)]
                if nodes:
                    break
                await asyncio.sleep(0.05)
            await kube.bind_pod(NS, name, p["metadata"]["uid"], nodes[0])
            latencies.append(time.monotonic() - started)

        started = time.monotonic()
        await bounded(concurrency, pods, place)
        elapsed = time.monotonic() - started
        report(
            pods=len(pods),
            seconds=elapsed,
            raw_pods_per_s=len(pods) / elapsed if elapsed else 0.0,
            gets=gets,
            p50_ms=percentile(latencies, 0.5) * 1000,
            job_ids=job_ids,
        )


# --------------------------------------------------------------------------- parent
@dataclass
class Child:
    proc: asyncio.subprocess.Process
    last: dict[str, Any] = field(default_factory=dict)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    reader: asyncio.Task[None] | None = None

    async def read(self) -> None:
        assert self.proc.stdout is not None
        async for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip()
            if line.startswith(LINE):
                self.last = json.loads(line[len(LINE) :])
                self.ready.set()

    def calls(self) -> int:
        return sum(self.last.get("calls", {}).values())

    def rss_mb(self) -> tuple[float, float]:
        """(current, peak) resident memory of the child, MB."""
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        kb = {
            k: int(v.split()[0])
            for k, v in (line.split(":", 1) for line in status.splitlines() if ":" in line)
            if k in ("VmRSS", "VmHWM")
        }
        return kb["VmRSS"] / 1024, kb["VmHWM"] / 1024


@contextlib.asynccontextmanager
async def child(
    *args: str,
    env: dict[str, str] | None = None,
    module: str = "tests.bench.scheduler",
    script: Path | None = None,
    python: Path | None = None,
    stderr: Path | None = None,
) -> AsyncIterator[Child]:
    """``python -m module *args``, or ``python -P script *args`` (``-P``: the modules it
    imports come from ``python``'s install, not the script's directory); ``python``: this
    interpreter unless another tree's is named. Its stderr is appended to the file
    ``stderr`` if set."""
    run = ["-P", str(script)] if script is not None else ["-m", module]
    with contextlib.ExitStack() as files:
        err = files.enter_context(stderr.open("ab")) if stderr is not None else None
        proc = await asyncio.create_subprocess_exec(
            str(python or sys.executable),
            *run,
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
            env={**os.environ, **(env or {})},
        )
    c = Child(proc)
    c.reader = asyncio.create_task(c.read())
    try:
        yield c
    finally:
        if proc.returncode is None:
            proc.terminate()
        with contextlib.suppress(ProcessLookupError):
            await asyncio.wait_for(proc.wait(), 10)
        c.reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await c.reader


async def wait_child(c: Child, what: str, limit: float) -> dict[str, Any]:
    waits = {asyncio.ensure_future(c.ready.wait()), asyncio.ensure_future(c.proc.wait())}
    await asyncio.wait(waits, timeout=limit, return_when=asyncio.FIRST_COMPLETED)
    for w in waits:
        w.cancel()
    if not c.ready.is_set():
        raise RuntimeError(f"{what} failed (exit {c.proc.returncode}) or timed out")
    return c.last


def per_call(before: dict[str, Any], after: dict[str, Any], pods: int) -> dict[str, Any]:
    """The scheduler's CPU per pod and mean slurmrestd latency per endpoint between two
    reports."""
    calls = Counter(after["calls"]) - Counter(before["calls"])
    secs = {k: after["seconds"][k] - before["seconds"].get(k, 0.0) for k in calls}
    return {
        "cpu_ms_per_pod": round(1000 * (after["cpu"] - before["cpu"]) / max(pods, 1), 2),
        "slurm_calls": dict(calls),
        "slurm_mean_ms": {k: round(1000 * secs[k] / n, 1) for k, n in calls.items() if n},
    }


@contextlib.asynccontextmanager
async def cprofiled(out: Path | None, proc: asyncio.subprocess.Process) -> AsyncIterator[None]:
    """The child's cProfile (:func:`tests.bench.scheduler_child.cprofile_on_signals`) on
    while inside, written to ``out`` at the end."""
    if out is None:
        yield
        return
    proc.send_signal(signal.SIGUSR1)
    try:
        yield
    finally:
        proc.send_signal(signal.SIGUSR2)
        await eventually(out.exists, within=30, what="the profile written")


@contextlib.asynccontextmanager
async def py_spy(out: Path | None, pid: int) -> AsyncIterator[None]:
    """Sample ``pid`` with py-spy (raw collapsed stacks into ``out``) while inside."""
    if out is None:
        yield
        return
    spy = await asyncio.create_subprocess_exec(
        "py-spy", "record", "--pid", str(pid), "--format", "raw", "-o", str(out),
        "--nonblocking", "--rate", "200", stdout=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):  # it ended already (cannot attach)
            spy.send_signal(2)  # SIGINT: py-spy writes its file and exits
        await asyncio.wait_for(spy.wait(), 30)


def scheduler_config(
    sb: SlurmSandbox, kubeconfig: Path, workers: int, poll: float
) -> dict[str, Any]:
    return sandbox_config_data(
        sb,
        kubeconfig=str(kubeconfig),
        slurmPollIntervalSeconds=poll,
        # the start-up sweep lists every job Slurm still holds (completed ones too)
        slurmRequestTimeoutSeconds=60,
        logLevel="warning",
        scheduler={"workers": workers},
        # the scale bench holds jobs with the priority annotation (tests/bench/scale.py)
        defaultNamespacePolicy={"allowPodPriority": True},
    )


async def cancel_all(slurm: SlurmClient, job_ids: Iterable[int]) -> None:
    async def cancel(j: int) -> None:
        with contextlib.suppress(SlurmError):
            await slurm.cancel(j)

    await bounded(32, sorted(set(job_ids)), cancel)


async def create_pods(kube: KubeClient, pods: list[dict[str, Any]], creators: int) -> None:
    await bounded(creators, pods, lambda p: kube.create(PODS, p, NS))


def job_ids_of(api: SandboxApiServer, names: Iterable[str] | None = None) -> set[int]:
    """Job ids from every pod's job-id label (what the scheduler submitted); ``names``:
    only these pods'."""
    out: set[int] = set()
    rd = api.api.resolve("", "v1", "pods")
    only = None if names is None else set(names)
    for p in api.api.list(rd, NS).get("items", []):
        if only is not None and p["metadata"]["name"] not in only:
            continue
        label = (p["metadata"].get("labels") or {}).get(LABEL_JOB_ID)
        if label:
            out.add(int(label))
    return out


def pending_message(api: SandboxApiServer, name: str) -> str:
    rd = api.api.resolve("", "v1", "pods")
    pod = api.api.get(rd, NS, name)
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return str(c.get("message") or "")
    return ""


def slurm_reason(api: SandboxApiServer, name: str) -> str:
    """Slurm's pending reason the pod shows ("" none yet, or not pending), without the
    notes after it (the topology request, the expected start: scheduler.decide)."""
    parsed = parse_pending(pending_message(api, name))
    return parsed[1] if parsed is not None and parsed[1] != "None" else ""


async def run(args: argparse.Namespace) -> dict[str, Any]:
    sb = load_sandbox()
    capacity = len(sb.external_nodes) * sb.node_cpus
    need = args.pods + args.paced + args.gang  # each gang's jobs go before the next
    if need > capacity:
        raise SystemExit(
            f"{args.pods} + {args.paced} pods + a gang of {args.gang} need {need} CPUs; the "
            f"sandbox has {capacity} ({len(sb.external_nodes)} external nodes x "
            f"{sb.node_cpus}): slurm-bridge sandbox slurm up --external-nodes 64 --node-cpus 64"
        )
    out: dict[str, Any] = {
        "pods": args.pods,
        "gang": args.gang,
        "workers": args.workers,
        "external_nodes": len(sb.external_nodes),
        "scheduler": "subprocess",
    }
    jobs: set[int] = set()
    with tempfile.TemporaryDirectory(prefix="sched-bench-") as tmp:
        # the bare server: what 87f2bfe's bench ran (its controllers came later)
        server = SandboxCluster if args.api_server == "cluster" else SandboxApiServer
        api = server(nodes=list(sb.external_nodes), history_size=500_000)
        async with (
            api,
            kube_for_host(api.url, request_timeout=60, token=SANDBOX_TOKEN) as kube,
            make_client(sb) as slurm,
        ):
            stamps = Stamps(api)
            kubeconfig = api.write_kubeconfig(Path(tmp) / "kubeconfig")
            try:
                # 1. raw capacity
                raw_pods = [
                    bench_pod(f"raw-{i}", scheduler=RAW_SCHEDULER_NAME) for i in range(args.pods)
                ]
                await create_pods(kube, raw_pods, args.creators)
                async with child("--role", "raw", "--kubeconfig", str(kubeconfig),
                                 "--workers", str(args.workers)) as raw_proc:  # fmt: skip
                    raw = await wait_child(raw_proc, "the raw loop", args.limit)
                jobs.update(raw["job_ids"])
                out["raw_pods_per_s"] = round(raw["raw_pods_per_s"], 1)
                out["raw_get_calls"] = raw["gets"]
                # allocate -> RUNNING -> bound per pod: what the two servers take
                out["raw_p50_ms"] = round(raw["p50_ms"], 1)
                await cancel_all(slurm, raw["job_ids"])

                # 2..4 with the scheduler running
                # the scheduler as the chart's ServiceAccount, with the chart's RBAC
                cfg_path = Path(tmp) / "scheduler.yaml"
                sched_kc = Path(tmp) / "scheduler.kubeconfig"
                cfg = scheduler_config(sb, sched_kc, args.workers, args.poll)
                if args.scheduler_python is not None:
                    # an older tree's scheduler may not know the key; no pod here asks a
                    # priority
                    cfg.pop("defaultNamespacePolicy", None)
                if args.scheduler_log is not None:
                    cfg |= {"logLevel": "info", "logFormat": "json"}
                if args.scheduler_identity == "chart":
                    await component_kubeconfig(
                        kube, parse_config(cfg, env={}), "scheduler", sched_kc, args.scheduler_chart
                    )
                else:  # the admin's (system:masters), as 87f2bfe's bench ran it
                    cfg["kubeconfig"] = str(kubeconfig)
                cfg_path.write_text(json.dumps(cfg))
                prof_env = {CPROFILE_ENV: str(args.cprofile.resolve())} if args.cprofile else {}
                async with child(
                    "--config",
                    str(cfg_path),
                    env=prof_env,
                    script=SCHEDULER_CHILD,
                    python=args.scheduler_python,
                    stderr=args.scheduler_log,
                ) as sched:
                    await wait_child(sched, "the scheduler", 60)
                    before, own = dict(sched.last), os.times()
                    daemons = daemon_cpu_seconds(sb.sandbox_dir / "sid-root")
                    async with (
                        py_spy(args.py_spy, sched.proc.pid),
                        cprofiled(args.cprofile, sched.proc),
                    ):
                        await singles(args, api, kube, stamps, out)
                    own_cpu = sum(os.times()[:2]) - sum(own[:2])
                    out["singles_slurm_cpu_ms_per_pod"] = per_pod_ms(
                        daemons, daemon_cpu_seconds(sb.sandbox_dir / "sid-root"), args.pods
                    )
                    reported = sched.last.get("t")
                    await until(
                        "one more report from the scheduler",
                        lambda: sched.last.get("t") != reported,
                        10,
                    )
                    out["singles_scheduler"] = per_call(before, sched.last, args.pods)
                    out["cpu_ms_per_pod"] = out["singles_scheduler"]["cpu_ms_per_pod"]
                    out["immediate_share"] = round(
                        (sched.last["allocated"] - before["allocated"]) / max(args.pods, 1), 3
                    )
                    out["singles_api_server_cpu_ms_per_pod"] = round(
                        1000 * own_cpu / max(args.pods, 1), 2
                    )
                    jobs |= job_ids_of(api)
                    await paced(args, kube, stamps, out)
                    jobs |= job_ids_of(api)
                    await gang(args, api, kube, slurm, stamps, out, sched.proc.pid)
                    jobs |= job_ids_of(api)
                    blocker = await steady(args, api, kube, slurm, sb, sched, out, jobs)
                    await wakeups(args, api, slurm, stamps, blocker, out)
                    rss, peak = sched.rss_mb()
                    out["rss_mb"] = round(rss, 1)
                    out["rss_peak_mb"] = round(peak, 1)
                    jobs |= job_ids_of(api)
            finally:
                jobs |= job_ids_of(api)
                await cancel_all(slurm, jobs)
    out["raw_ratio"] = round(out["pods_per_s"] / out["raw_pods_per_s"], 2)
    keys = [
        "pods_per_s",
        "p50_ms",
        "p99_ms",
        "raw_pods_per_s",
        "raw_ratio",
        "steady_rest_calls_per_s",
        "rss_mb",
        "paced_p50_ms",
        "paced_p99_ms",
        "raw_p50_ms",
        f"gang_{args.gang}_s",
        "cpu_ms_per_pod",
        "immediate_share",
        "refused_allocations",
        "queued_start_to_bound_p50_ms",
        "queued_start_to_bound_p99_ms",
    ]
    keys = [k for k in keys if k in out]  # no gang / no paced pods: no such figure
    return {k: out[k] for k in keys} | {k: v for k, v in out.items() if k not in keys}


async def singles(
    args: argparse.Namespace,
    api: SandboxApiServer,
    kube: KubeClient,
    stamps: Stamps,
    out: dict[str, Any],
) -> None:
    names = [f"s-{i}" for i in range(args.pods)]
    await create_pods(kube, [bench_pod(n) for n in names], args.creators)
    await until("every single pod bound", lambda: all(n in stamps.bound for n in names), args.limit)
    first = min(stamps.created[n] for n in names)
    last = max(stamps.bound[n] for n in names)
    lat = [(stamps.bound[n] - stamps.created[n]) * 1000 for n in names]
    out["pods_per_s"] = round(len(names) / (last - first), 1)
    out["p50_ms"] = round(percentile(lat, 0.5), 1)
    out["p99_ms"] = round(percentile(lat, 0.99), 1)
    out["bound"] = sum(1 for n in names if n in stamps.bound)
    out["bind_requests"] = sum(stamps.bind_requests[n] for n in names)


async def paced(
    args: argparse.Namespace, kube: KubeClient, stamps: Stamps, out: dict[str, Any]
) -> None:
    """Latency at free capacity: ``--paced`` pods created at ``--rate`` per second (below
    the throughput, so no queue builds up)."""
    if not args.paced:
        return
    names = [f"q-{i}" for i in range(args.paced)]
    start = time.monotonic()
    for i, n in enumerate(names):
        await asyncio.sleep(max(0.0, start + i / args.rate - time.monotonic()))
        await kube.create(PODS, bench_pod(n), NS)
    await until("every paced pod bound", lambda: all(n in stamps.bound for n in names), args.limit)
    lat = [(stamps.bound[n] - stamps.created[n]) * 1000 for n in names]
    out["paced_pods"] = args.paced
    out["paced_rate_per_s"] = args.rate
    out["paced_p50_ms"] = round(percentile(lat, 0.5), 1)
    out["paced_p99_ms"] = round(percentile(lat, 0.99), 1)


async def gang(
    args: argparse.Namespace,
    api: SandboxApiServer,
    kube: KubeClient,
    slurm: SlurmClient,
    stamps: Stamps,
    out: dict[str, Any],
    scheduler_pid: int,
) -> None:
    """``--gang-reps`` PodGroups of ``--gang`` pods, one after another (a fresh group each;
    its jobs cancelled before the next): ``gang_N_s`` is the median of their times (last
    member created -> all bound; one gang is too short a figure to compare alone), the
    times in ``gang_N_reps_s``, and one gang's timeline in ``gang_timeline_ms``."""
    if not args.gang:
        return
    times: list[float] = []
    bound: list[int] = []  # pods bound, per gang
    steps: list[dict[str, float]] = []  # each gang's link and bind stamps
    requests: list[dict[str, int]] = []  # each gang's requests to the API server
    pauses: list[int] = []  # the scheduler's CPU (ms) between two gangs
    for rep in range(args.gang_reps):
        group = "gang" if rep == 0 else f"gang{rep}"
        await kube.create(
            PODGROUPS,
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": group, "annotations": dict(SHARED)},
                "spec": {"minMember": args.gang},
            },
            NS,
        )
        names = [f"{group}-{i}" for i in range(args.gang)]
        pods = [bench_pod(n, labels={LABEL_POD_GROUP: group}, annotations={}) for n in names]
        if rep == 0:  # requests refused before the gang (the last 10,000 requests)
            out["refused_requests"] = dict(
                Counter(
                    request_kind(e)
                    for e in api.request_log.entries()
                    if e.status >= 400 and not not_served(e)
                )
            )
        api.request_log.clear()
        cpu0 = (process_cpu(os.getpid()), process_cpu(scheduler_pid))
        await create_pods(kube, pods, args.creators)
        await until("every gang pod bound", functools.partial(stamps.all_bound, names), args.limit)
        cpu1 = (process_cpu(os.getpid()), process_cpu(scheduler_pid))
        last_member = max(stamps.created[n] for n in names)
        times.append(round(max(stamps.bound[n] for n in names) - last_member, 3))
        steps.append(
            stamps.timeline(names, set())
            | {  # CPU from the first creation to the last binding, ms
                "bench_cpu": round(1000 * (cpu1[0] - cpu0[0])),
                "scheduler_cpu": round(1000 * (cpu1[1] - cpu0[1])),
            }
        )
        # the requests while each gang ran (its own, and anything else meanwhile)
        requests.append(dict(Counter(request_kind(e) for e in api.request_log.entries())))
        bound.append(sum(1 for n in names if n in stamps.bound))
        if rep == args.gang_reps // 2:
            await asyncio.sleep(0.1)  # the scheduler's log line written
            out["gang_timeline_ms"] = stamps.timeline(
                names, job_ids_of(api, names), args.scheduler_log
            )
        if rep + 1 < args.gang_reps:
            # the next gang finds the room this one took, and a scheduler gone quiet
            paused = process_cpu(scheduler_pid)
            await cancel_all(slurm, job_ids_of(api, names))
            await asyncio.sleep(args.gang_pause)
            # what the cancelled gang left the scheduler doing before the next one
            pauses.append(round(1000 * (process_cpu(scheduler_pid) - paused)))
    out[f"gang_{args.gang}_s"] = round(statistics.median(times), 3)
    out[f"gang_{args.gang}_reps_s"] = times
    out["gang_reps_timeline_ms"] = steps
    out["gang_requests"] = requests
    out["gang_pause_scheduler_cpu_ms"] = pauses
    out["gang_bound"] = min(bound)  # of each gang (all of them: --gang)


async def steady(
    args: argparse.Namespace,
    api: SandboxApiServer,
    kube: KubeClient,
    slurm: SlurmClient,
    sb: SlurmSandbox,
    sched: Child,
    out: dict[str, Any],
    jobs: set[int],
) -> int:
    """Returns the blocker's job id."""
    out["pending_pods"] = args.pending
    await cancel_all(slurm, jobs)
    blocker = await slurm.submit(blocker_spec(sb, "bench-blocker"))
    jobs.add(blocker)
    refused0 = sched.last.get("refused", 0.0)
    deadline = time.monotonic() + 60
    while (await slurm.get_job(blocker)).state.primary != "RUNNING":
        if time.monotonic() > deadline:
            raise TimeoutError("the blocker job never started")
        await asyncio.sleep(0.1)
    names = [f"p-{i}" for i in range(args.pending)]
    cpu0, started = process_cpu(sched.proc.pid), time.monotonic()
    await create_pods(kube, [bench_pod(n) for n in names], args.creators)

    def all_pending() -> bool:
        return all(slurm_reason(api, n) for n in names)

    await until("every pending pod to show Slurm's reason", all_pending, args.limit, every=0.2)
    # the pending pods' own path: created -> each shows Slurm's reason (its job submitted,
    # followed, read, the pod linked and told), and the scheduler's CPU over it
    out["pending_reasons_s"] = round(time.monotonic() - started, 1)
    out["pending_cpu_ms_per_pod"] = round(
        1000 * (process_cpu(sched.proc.pid) - cpu0) / max(args.pending, 1), 2
    )
    reasons = Counter(slurm_reason(api, n) for n in names)
    out["pending_reasons"] = dict(reasons)
    await asyncio.sleep(args.settle)  # the poller's first-ticks reason refreshes end
    c0, t0 = sched.calls(), sched.last.get("t", 0.0)
    await asyncio.sleep(args.window)
    c1, t1 = sched.calls(), sched.last.get("t", 0.0)
    out["steady_rest_calls_per_s"] = round((c1 - c0) / (t1 - t0), 2) if t1 > t0 else None
    out["steady_window_s"] = round(t1 - t0, 1)
    out["refused_allocations"] = int(sched.last.get("refused", 0.0) - refused0)
    out["scheduler_calls_by_endpoint"] = sched.last.get("calls", {})
    return blocker


async def wakeups(
    args: argparse.Namespace,
    api: SandboxApiServer,
    slurm: SlurmClient,
    stamps: Stamps,
    blocker: int,
    out: dict[str, Any],
) -> None:
    """Slurm starts queued jobs on its own once the blocker ends: its start (seen here by a
    20 ms poll of their states) -> their pods bound."""
    rd = api.api.resolve("", "v1", "pods")
    by_job: dict[int, list[str]] = {}
    for p in api.api.list(rd, NS).get("items", []):
        label = (p["metadata"].get("labels") or {}).get(LABEL_JOB_ID)
        if label and not (p.get("spec") or {}).get("nodeName"):
            by_job.setdefault(int(label), []).append(p["metadata"]["name"])
    await slurm.cancel(blocker)
    started: dict[int, float] = {}
    deadline = time.monotonic() + args.wake_window
    while time.monotonic() < deadline and len(started) < min(args.wake_sample, len(by_job)):
        states = await slurm.list_job_states(sorted(by_job.keys() - started.keys()))
        seen = time.monotonic()
        for st in states:
            if st.state.primary == "RUNNING":
                started.setdefault(st.job_id, seen)
        await asyncio.sleep(0.02)
    names = {n: started[j] for j in started for n in by_job[j]}
    await until(
        "the started jobs' pods bound", lambda: all(n in stamps.bound for n in names), args.limit
    )
    lat = [(stamps.bound[n] - t) * 1000 for n, t in names.items()]
    out["queued_started_jobs"] = len(started)
    out["queued_start_to_bound_p50_ms"] = round(percentile(lat, 0.5), 1)
    out["queued_start_to_bound_p99_ms"] = round(percentile(lat, 0.99), 1)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m tests.bench.scheduler", description=__doc__)
    ap.add_argument("--pods", type=int, default=1000, help="single pods (and raw pods)")
    ap.add_argument("--gang", type=int, default=256, help="PodGroup size (0: no gang)")
    ap.add_argument(
        "--gang-reps", type=int, default=5, help="gangs, one after another (gang_N_s: median)"
    )
    ap.add_argument(
        "--gang-pause", type=float, default=1.0, help="wait after a gang's jobs are cancelled (s)"
    )
    ap.add_argument("--paced", type=int, default=100, help="pods created at --rate (latency)")
    ap.add_argument("--rate", type=float, default=50.0, help="creations/s of the paced pods")
    ap.add_argument("--pending", type=int, default=2000, help="pending pods at steady state")
    ap.add_argument("--workers", type=int, default=16, help="scheduler.workers = raw concurrency")
    ap.add_argument("--creators", type=int, default=32, help="concurrent pod creations")
    ap.add_argument("--poll", type=float, default=0.25, help="slurmPollIntervalSeconds")
    ap.add_argument("--window", type=float, default=10.0, help="steady-state window (s)")
    ap.add_argument("--settle", type=float, default=3.0, help="wait before the window (s)")
    ap.add_argument("--wake-sample", type=int, default=200, help="queued jobs whose start is timed")
    ap.add_argument("--wake-window", type=float, default=30.0, help="wake-up phase at most (s)")
    ap.add_argument("--limit", type=float, default=600.0, help="give up after (s) per phase")
    ap.add_argument("--py-spy", type=Path, help="profile the scheduler in phase 2 into FILE")
    ap.add_argument(
        "--cprofile", type=Path, help="cProfile (CPU clock) the scheduler in phase 2 into FILE"
    )
    ap.add_argument(
        "--scheduler-python",
        type=Path,
        help="run the scheduler of the tree this interpreter is installed from (another "
        "commit's venv: tests.bench.paired's base side); default: this checkout's",
    )
    ap.add_argument(
        "--scheduler-chart",
        type=Path,
        help="the chart whose RBAC the scheduler runs with (that of the tree "
        "--scheduler-python comes from: tests.bench.paired's base side); default: this "
        "checkout's",
    )
    ap.add_argument(
        "--scheduler-log",
        type=Path,
        help="the scheduler's log, at info level in JSON, into FILE (and the gang's timeline)",
    )
    ap.add_argument(
        "--scheduler-identity",
        choices=["chart", "admin"],
        default="chart",
        help="the scheduler's identity: the chart's ServiceAccount and RBAC (default), or "
        "the admin's (system:masters: what 87f2bfe's bench ran)",
    )
    ap.add_argument(
        "--api-server",
        choices=["cluster", "bare"],
        default="cluster",
        help="the sandbox API server with its controllers (default) or bare (no namespace "
        "controller, garbage collector or ResourceClaim controller: 87f2bfe's bench)",
    )
    ap.add_argument("--role", choices=["main", "scheduler", "raw"], default="main")
    ap.add_argument("--config", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--kubeconfig", type=Path, help=argparse.SUPPRESS)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    configure_logging("warning", "console")
    if args.role == "scheduler":  # older callers' name for tests.bench.scheduler_child
        run_as_the_scheduler(scheduler_child(args.config))
    elif args.role == "raw":
        asyncio.run(raw_child(args.kubeconfig, args.workers))
    else:
        print(json.dumps(asyncio.run(run(args))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
