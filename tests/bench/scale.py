"""Scale: thousands of Slurm nodes, tens of thousands of pods and jobs (issue #14), against
the REAL Slurm sandbox and the sandbox API server.

Set-up: the Slurm sandbox has ``--nodes`` ``State=EXTERNAL`` nodes (``slurm-bridge sandbox
slurm up --external-nodes 5000``) and its job table holds at least ``--finished`` finished
jobs (cancelled fillers, added here when missing); the sandbox API server (in this
process, so every write is counted where it is stored) holds the matching Ready Nodes.
The scheduler and the controller each run as their own SUBPROCESS (the scheduler as
:mod:`tests.bench.scheduler_child`, the controller as ``--role controller`` here),
both reporting their CPU time and slurmrestd requests every 0.2 s.

Phases:
1. wave 1: ``--wave1`` single pods (1 CPU, shared), all bound: scheduler CPU ms per pod;
2. wave 2: ``--wave2`` more, all bound: the same; ``per_pod_cost_ratio`` = 2 over 1;
   ``kube_writes_per_pod`` (patches, bindings, status, events by both components per bound
   pod) and ``sandbox_api_cpu_ms_per_pod`` (this process: the API server, plus creating
   the pods) over both waves;
3. steady: ``--pending`` pods whose jobs Slurm holds (``priority: 0``); once each shows
   Slurm's reason, every slurmrestd request of each component is counted for ``--window``
   seconds (60: two whole periods of the 30 s resync, whose requests a shorter window
   catches or misses by chance). ``--plannable``: pods whose jobs Slurm does NOT hold, so
   it plans their starts and the scheduler re-reads the plans (issue #42: every
   ``scheduler.expectedStartRefreshSeconds``, ``--refresh``): the waves fill every CPU
   (``--wave1`` + ``--wave2`` = nodes x CPUs), the pods wait for Resources or Priority, and
   the run ends after the window (no restarts: the probes would wait behind them);
4. restart: the scheduler is killed (SIGKILL) with every pod above in place and their jobs
   active; one more pod is created; ``restart_ready_s`` = new process started -> that pod
   bound (it was in the restarted scheduler's initial pod list, so it waits for the
   start-up sweep of Slurm's job table); ``restart_new_pod_ready_s``: the same for a pod
   created once the restarted scheduler has listed the pods (``restart_listed_s``).
   ``--restarts N``: N restarts on the same pods and jobs, each with a probe of its own
   (``restarts``: each one's timings and, with ``--logs``, its sweep's; medians per side);
   ``--base COMMIT``: that commit's scheduler takes every other restart (paired on one
   state: base new, new base, ...). Then the controller is killed and restarted:
   ``controller_restart_resync_s`` = started -> its first full resync (dangling-job sweep
   + every key queued) done.

``*_rss_peak_mb``: the kernel's high-water mark (VmHWM) of each process, start-up
included, the largest over both processes of a component.

Run: ``python -m tests.bench.scale`` (defaults: the issue's sizes; see ``--help``) against
a sandbox made with ``slurm-bridge sandbox slurm up --nodes 1 --external-nodes 5000
--node-gpus 0 --extra-conf MinJobAge=7200`` (finished jobs must outlive the run);
``--smoke``: tiny sizes (CI). The last line is ONE JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bridge.config import load_config, parse_config
from bridge.kube.client import KubeClient
from bridge.kube.events import EventRecorder
from bridge.logging import configure_logging
from bridge.slurm.client import SlurmClient
from bridge.wellknown import SLURMJOB_PREFIX
from controller.app import ControllerMetrics
from controller.runtime import Controller
from sandbox.cluster import SandboxCluster
from sandbox.kubeapi import SANDBOX_TOKEN
from sandbox.kubeapi.faults import LoggedRequest, RequestLog
from tests.bench.paired import base_tree
from tests.bench.scheduler import (
    SCHEDULER_CHILD,
    SHARED,
    Child,
    Stamps,
    bench_pod,
    cancel_all,
    child,
    create_pods,
    job_ids_of,
    py_spy,
    scheduler_config,
    slurm_reason,
    until,
    wait_child,
)
from tests.bench.scheduler_child import CountingSlurmClient
from tests.bench.slurm_fill import fill_finished_jobs
from tests.clients import kube_for_host
from tests.integration.conftest import SlurmSandbox, load_sandbox, make_client
from tests.integration.identities import component_kubeconfig

HELD = {**SHARED, SLURMJOB_PREFIX + "priority": "0"}  # Slurm holds the job: nothing changes
REPORT_EVERY = 0.2
MODULE = "tests.bench.scale"  # this module, for its --role controller child
KEYS = (
    "per_pod_cost_ratio",
    "scheduler_rss_peak_mb",
    "controller_rss_peak_mb",
    "steady_rest_calls_per_s",
    "restart_ready_s",
    "restart_new_pod_ready_s",
    "controller_restart_resync_s",
    "kube_writes_per_pod",
    "sandbox_api_cpu_ms_per_pod",
)


# --------------------------------------------------------------------------- writes
_WRITE_KINDS = (
    ("binding", re.compile(r"/pods/[^/]+/binding$")),
    ("pod_status", re.compile(r"/pods/[^/]+/status$")),
    ("pod", re.compile(r"/pods/[^/]+$")),
    ("pod_create", re.compile(r"/pods$")),
    ("event", re.compile(r"/events(/[^/]+)?$")),
    ("node", re.compile(r"/nodes/[^/]+(/status)?$")),
)
POD_WRITES = ("binding", "pod_status", "pod", "event")  # per-pod work of the components


class WriteCounter(RequestLog):
    """The API server's request log, reduced to a count of writes by kind (nothing kept)."""

    def __init__(self) -> None:
        super().__init__(size=1)
        self.writes: Counter[str] = Counter()

    def add(self, entry: LoggedRequest) -> None:
        if entry.method in ("GET", "HEAD", "OPTIONS"):
            return
        kind = next((k for k, rx in _WRITE_KINDS if rx.search(entry.path)), "other")
        self.writes[f"{entry.method} {kind}"] += 1


def progress(what: str) -> None:
    """A progress line on stderr (the JSON report is the last line of stdout)."""
    print(f"{time.strftime('%H:%M:%S')} {what}", file=sys.stderr, flush=True)


def bridge_writes(delta: Counter[str]) -> int:
    """The components' writes for pods: patches, bindings, status, events (not this
    benchmark's pod creations, not the controller's node patches: counted apart)."""
    return sum(n for k, n in delta.items() if k.split(" ", 1)[1] in POD_WRITES)


# --------------------------------------------------------------------------- controller
async def controller_child(config: Path) -> None:
    """The controller (as ``slurm-bridge controller`` wires it, with its Slurm-side
    metrics, without ops/leader) + a report every 0.2 s: CPU, slurmrestd requests, when
    it synced and first fully resynced."""
    cfg = load_config(config, env={})
    configure_logging(cfg.log_level, cfg.log_format)
    kube = await KubeClient.from_config(cfg)
    started = time.monotonic()
    async with kube, CountingSlurmClient.from_config(cfg) as slurm:
        ctl = Controller(
            cfg,
            slurm,
            kube,
            events=EventRecorder(kube, "slurm-bridge-controller"),
            slurm_observer=ControllerMetrics(mcs_label=cfg.mcs_label).slurm,
        )
        resynced: list[float] = []
        sweep = ctl.sweep_once

        async def timed_sweep() -> None:
            await sweep()
            resynced.append(time.monotonic())

        ctl.sweep_once = timed_sweep  # type: ignore[method-assign]
        task = asyncio.create_task(ctl.run())
        while True:
            cpu = os.times()
            print(
                "BENCH "
                + json.dumps(
                    {
                        "ready": ctl.synced.is_set(),
                        "calls": dict(slurm.calls),
                        "cpu": cpu.user + cpu.system,
                        "t": time.monotonic(),
                        "started": started,
                        "resynced": resynced[0] if resynced else None,
                    }
                ),
                flush=True,
            )
            await asyncio.sleep(REPORT_EVERY)
            if task.done():
                task.result()


def restart_sides(n: int, paired: bool) -> list[str]:
    """Which scheduler each of ``n`` restarts runs: this checkout's ("new"), or, paired,
    base and new alternating in pairs whose order flips (base new, new base, ...), so
    neither side always comes first."""
    if not paired:
        return ["new"] * n
    pairs = [("base", "new") if i % 2 == 0 else ("new", "base") for i in range(n // 2 + 1)]
    return [side for pair in pairs for side in pair][:n]


def restart_medians(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per side, the median of each timing over its restarts."""
    out: dict[str, dict[str, float]] = {}
    for side in sorted({r["side"] for r in rows}):
        mine = [r for r in rows if r["side"] == side]
        keys = [k for k, v in mine[0].items() if isinstance(v, int | float)]
        out[side] = {k: round(statistics.median(r[k] for r in mine if k in r), 2) for k in keys}
    return out


_FIELD = re.compile(r"\b(\w+)=([0-9][0-9.]*)\b")


def sweep_of(log: Path) -> dict[str, float]:
    """What the restarted scheduler's log says of its start-up sweep (its last
    ``slurm_sweep_done``, JSON or console): ``sweep_s``, the active jobs, the jobs read
    by id, and when each part of it ended (``sweep_states_s`` ...)."""
    done = [ln for ln in log.read_text(errors="replace").splitlines() if "slurm_sweep_done" in ln]
    if not done:
        return {}
    line = done[-1]
    got: dict[str, Any] = json.loads(line) if line.startswith("{") else dict(_FIELD.findall(line))
    out = {"sweep_s": float(got.get("seconds", "nan"))}
    for k, v in got.items():
        if k in ("active", "read") or (k.endswith("_s") and k != "seconds"):
            out[f"sweep_{k}"] = float(v)
    return out


async def wait_synced(c: Child, what: str, limit: float) -> None:
    await wait_child(c, what, limit)
    await until(f"{what} synced", lambda: bool(c.last.get("ready")), limit, every=0.05)


async def fresh_report(c: Child) -> dict[str, Any]:
    """The child's next report (its counters include everything done so far)."""
    seen = c.last.get("t")
    await until("one more report", lambda: c.last.get("t") != seen, 30)
    return dict(c.last)


# --------------------------------------------------------------------------- phases
@contextlib.asynccontextmanager
async def scheduler_proc(
    cfg_path: Path, python: Path | None = None, log: Path | None = None
) -> Any:
    """The scheduler child (:mod:`tests.bench.scheduler_child`), of this checkout or, with
    ``python``, of the tree that interpreter is installed from."""
    args = ("--config", str(cfg_path))
    async with child(*args, script=SCHEDULER_CHILD, python=python, stderr=log) as c:
        yield c


@contextlib.asynccontextmanager
async def controller_proc(cfg_path: Path) -> Any:
    async with child(
        "--role", "controller", "--config", str(cfg_path), module="tests.bench.scale"
    ) as c:
        yield c


class Run:
    def __init__(self, args: argparse.Namespace, sb: SlurmSandbox, api: SandboxCluster):
        self.args = args
        self.sb = sb
        self.api = api
        self.stamps = Stamps(api)
        # the API server's request log, set before it started (its handlers keep the one
        # they were given)
        assert isinstance(api.request_log, WriteCounter)
        self.writes = api.request_log
        self.out: dict[str, Any] = {}
        self.rss: dict[str, float] = {"scheduler": 0.0, "controller": 0.0}
        # --base: that commit's worktree and python, for the restarts marked "base"
        self.base = base_tree(args.base, args.trees) if args.base else None

    def note_rss(self, role: str, c: Child) -> None:
        with contextlib.suppress(OSError, KeyError):
            self.rss[role] = max(self.rss[role], c.rss_mb()[1])

    async def wave(
        self, name: str, n: int, kube: KubeClient, sched: Child, ctl: Child
    ) -> dict[str, Any]:
        """``n`` single pods created and bound; the cost of each component per pod."""
        s0, c0 = await fresh_report(sched), await fresh_report(ctl)
        w0, own0, t0 = Counter(self.writes.writes), os.times(), time.monotonic()
        names = [f"{name}-{i}" for i in range(n)]
        progress(f"{name}: {n} pods")
        spy = self.args.py_spy / f"{name}-scheduler.txt" if self.args.py_spy else None
        async with py_spy(spy, sched.proc.pid):
            await create_pods(kube, [bench_pod(p) for p in names], self.args.creators)
            await until(
                f"every {name} pod bound",
                lambda: all(p in self.stamps.bound for p in names),
                self.args.limit,
                every=0.1,
            )
        elapsed = time.monotonic() - t0
        progress(f"{name}: bound in {elapsed:.1f} s")
        own = sum(os.times()[:2]) - sum(own0[:2])
        s1, c1 = await fresh_report(sched), await fresh_report(ctl)
        writes = Counter(self.writes.writes) - w0
        self.note_rss("scheduler", sched)
        self.note_rss("controller", ctl)
        return {
            "pods": n,
            "seconds": round(elapsed, 1),
            "pods_per_s": round(n / elapsed, 1),
            "scheduler_cpu_ms_per_pod": round(1000 * (s1["cpu"] - s0["cpu"]) / n, 2),
            "controller_cpu_ms_per_pod": round(1000 * (c1["cpu"] - c0["cpu"]) / n, 2),
            "api_cpu_ms_per_pod": round(1000 * own / n, 2),
            "writes": dict(writes),
            "kube_writes_per_pod": round(bridge_writes(writes) / n, 2),
            "scheduler_slurm_calls": dict(Counter(s1["calls"]) - Counter(s0["calls"])),
            "controller_slurm_calls": dict(Counter(c1["calls"]) - Counter(c0["calls"])),
        }

    async def restart(self, kube: KubeClient, cfg: Path, i: int, side: str) -> dict[str, Any]:
        """The scheduler (this checkout's, or ``--base``'s: ``side``) started again with
        every pod and job in place and one more pod waiting (listed at its start, so it
        waits for the start-up sweep); then one more created once it has listed the pods
        (no earlier scheduler can have made a job for it: no wait). Killed at the end."""
        a = self.args
        probe, probe_new = f"probe-{i}", f"probe-new-{i}"
        await create_pods(kube, [bench_pod(probe)], 1)
        log = a.logs / f"restart-{i}-{side}.log" if a.logs else None
        t0 = time.monotonic()
        python = self.base[1] if self.base is not None and side == "base" else None
        async with scheduler_proc(cfg, python, log) as sched:
            await wait_child(sched, "the restarted scheduler", a.limit)
            listed = time.monotonic() - t0
            await create_pods(kube, [bench_pod(probe_new)], 1)
            await until("the new probe bound", lambda: probe_new in self.stamps.bound, a.limit)
            await until("the probe pod bound", lambda: probe in self.stamps.bound, a.limit)
            self.note_rss("scheduler", sched)
            sched.proc.kill()
            await sched.proc.wait()
        row: dict[str, Any] = {
            "side": side,
            "ready_s": round(self.stamps.bound[probe] - t0, 2),
            "new_pod_ready_s": round(self.stamps.bound[probe_new] - t0, 2),
            "listed_s": round(listed, 2),
        }
        if log is not None:
            row.update(sweep_of(log))
        return row

    async def steady(self, kube: KubeClient, sched: Child, ctl: Child) -> None:
        a = self.args
        kind, annotations = ("pending", SHARED) if a.plannable else ("held", HELD)
        names = [f"{kind}-{i}" for i in range(a.pending)]
        pods = [bench_pod(p, annotations=annotations) for p in names]
        await create_pods(kube, pods, a.creators)

        def all_pending() -> bool:
            # a plannable pod may find a CPU the waves left: bound, it waits for nothing
            return all(slurm_reason(self.api, p) or p in self.stamps.bound for p in names)

        progress(f"steady: {a.pending} {kind} pods")
        await until(f"every {kind} pod shows Slurm's reason", all_pending, a.limit, every=1.0)
        progress(f"steady: every {kind} pod shows its reason")
        self.out["pending_reasons"] = dict(Counter(slurm_reason(self.api, p) for p in names))
        await asyncio.sleep(a.settle)
        s0, c0 = await fresh_report(sched), await fresh_report(ctl)
        await asyncio.sleep(a.window)
        s1, c1 = await fresh_report(sched), await fresh_report(ctl)
        for role, (r0, r1) in (("scheduler", (s0, s1)), ("controller", (c0, c1))):
            calls = Counter(r1["calls"]) - Counter(r0["calls"])
            self.out[f"{role}_steady_rest_calls_per_s"] = round(
                sum(calls.values()) / (r1["t"] - r0["t"]), 2
            )
            self.out[f"{role}_steady_calls"] = dict(calls)
        self.out["steady_rest_calls_per_s"] = max(
            self.out["scheduler_steady_rest_calls_per_s"],
            self.out["controller_steady_rest_calls_per_s"],
        )


async def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.smoke:
        args.nodes, args.finished = min(args.nodes, 3), min(args.finished, 30)
        args.wave1, args.wave2, args.pending = 2, 4, 3
        args.window, args.settle = 1.0, 0.5
    if args.logs:
        args.logs.mkdir(parents=True, exist_ok=True)
    sb = load_sandbox()
    if len(sb.external_nodes) < args.nodes:
        raise SystemExit(
            f"the sandbox has {len(sb.external_nodes)} external nodes, not {args.nodes}: "
            f"slurm-bridge sandbox slurm up --nodes 1 --external-nodes {args.nodes} "
            "--node-gpus 0 --extra-conf MinJobAge=7200"
        )
    nodes = sb.external_nodes[: args.nodes]
    need = args.wave1 + args.wave2 + (0 if args.plannable else 2)  # and the two probes
    if need > len(nodes) * sb.node_cpus:
        raise SystemExit(f"{need} pods of 1 CPU do not fit {len(nodes)} x {sb.node_cpus} CPUs")
    jobs: set[int] = set()
    # every job's state (ensure_finished) took slurmrestd 12-28 s at 76,000 jobs
    async with make_client(sb, request_timeout_seconds=120) as slurm:
        finished = await ensure_finished(slurm, sb, args.finished)
        with tempfile.TemporaryDirectory(prefix="scale-bench-") as tmp:
            api = SandboxCluster(nodes=list(nodes), history_size=1_000_000)
            api.request_log = WriteCounter()
            async with (
                api,
                kube_for_host(api.url, request_timeout=120, token=SANDBOX_TOKEN) as kube,
            ):
                r = Run(args, sb, api)
                r.out.update(
                    plannable=args.plannable,
                    expected_start_refresh_s=args.refresh,
                    nodes=len(nodes),
                    finished_jobs_in_table=finished,
                    workers=args.workers,
                    poll_interval_s=args.poll,
                )
                # each child as the chart's ServiceAccount for it, with the chart's RBAC
                paths: dict[str, Path] = {}
                for role in ("scheduler", "controller"):
                    kubeconfig = Path(tmp) / f"{role}.kubeconfig"
                    cfg = scheduler_config(sb, kubeconfig, args.workers, args.poll)
                    if args.refresh is not None:
                        cfg["scheduler"]["expectedStartRefreshSeconds"] = args.refresh
                    cfg["logLevel"] = "info"  # start-up and sweep timings in the children's logs
                    await component_kubeconfig(kube, parse_config(cfg, env={}), role, kubeconfig)
                    paths[role] = Path(tmp) / f"{role}.yaml"
                    paths[role].write_text(json.dumps(cfg))
                try:
                    await phases(r, kube, paths["scheduler"], paths["controller"])
                finally:
                    jobs |= job_ids_of(api)
                    await cancel_all(slurm, jobs)
    out = r.out
    out["scheduler_rss_peak_mb"] = round(r.rss["scheduler"], 1)
    out["controller_rss_peak_mb"] = round(r.rss["controller"], 1)
    return {k: out.get(k) for k in KEYS} | {k: v for k, v in out.items() if k not in KEYS}


async def phases(r: Run, kube: KubeClient, sched_cfg: Path, ctl_cfg: Path) -> None:
    a, out = r.args, r.out
    async with controller_proc(ctl_cfg) as ctl:
        t0 = time.monotonic()
        async with scheduler_proc(sched_cfg) as sched:
            await wait_child(sched, "the scheduler", a.limit)
            await wait_synced(ctl, "the controller", a.limit)
            out["startup_s"] = round(time.monotonic() - t0, 1)
            progress(f"started in {out['startup_s']} s")
            w1 = await r.wave("w1", a.wave1, kube, sched, ctl)
            w2 = await r.wave("w2", a.wave2, kube, sched, ctl)
            out["wave1"], out["wave2"] = w1, w2
            out["per_pod_cost_ratio"] = round(
                w2["scheduler_cpu_ms_per_pod"] / max(w1["scheduler_cpu_ms_per_pod"], 1e-9), 2
            )
            total = w1["pods"] + w2["pods"]
            writes = Counter(w1["writes"]) + Counter(w2["writes"])
            out["kube_writes_per_pod"] = round(bridge_writes(writes) / total, 2)
            out["sandbox_api_cpu_ms_per_pod"] = round(
                (w1["api_cpu_ms_per_pod"] * w1["pods"] + w2["api_cpu_ms_per_pod"] * w2["pods"])
                / total,
                2,
            )
            await r.steady(kube, sched, ctl)
            r.note_rss("scheduler", sched)
            r.note_rss("controller", ctl)
            if a.plannable:
                return
            # the figures so far, should the restarts not finish
            progress(
                "so far: " + json.dumps(out | {f"{k}_rss_peak_mb": v for k, v in r.rss.items()})
            )
            r.note_rss("scheduler", sched)
            sched.proc.kill()
            await sched.proc.wait()
            progress("scheduler killed")
        for i, side in enumerate(restart_sides(a.restarts, a.base is not None)):
            row = await r.restart(kube, sched_cfg, i, side)
            out.setdefault("restarts", []).append(row)
            progress(f"restart {i + 1}/{a.restarts} ({side}): {json.dumps(row)}")
        first = out["restarts"][0]
        out["restart_listed_s"] = first["listed_s"]
        out["restart_new_pod_ready_s"] = first["new_pod_ready_s"]
        out["restart_ready_s"] = first["ready_s"]
        if a.restarts > 1:
            out["restart_median"] = restart_medians(out["restarts"])
        r.note_rss("controller", ctl)
        ctl.proc.kill()
        await ctl.proc.wait()
        progress(f"restart_ready_s {out['restart_ready_s']}; controller killed")
    t0 = time.monotonic()
    async with controller_proc(ctl_cfg) as ctl:
        await wait_synced(ctl, "the restarted controller", a.limit)
        out["controller_restart_synced_s"] = round(ctl.last["t"] - t0, 2)
        await until("its first resync", lambda: bool(ctl.last.get("resynced")), a.limit)
        out["controller_restart_resync_s"] = round(ctl.last["resynced"] - t0, 2)
        r.note_rss("controller", ctl)


async def ensure_finished(slurm: SlurmClient, sb: SlurmSandbox, want: int) -> int:
    """At least ``want`` finished jobs in Slurm's table (fillers added when missing)."""
    states = await slurm.list_job_states()
    have = sum(1 for s in states if not s.state.active)
    if have < want:
        progress(f"filling Slurm's table: {want - have} finished jobs")
        await fill_finished_jobs(slurm, sb.partition, want - have, name="scale-filler")
        have = sum(1 for s in await slurm.list_job_states() if not s.state.active)
    return have


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m tests.bench.scale", description=__doc__)
    ap.add_argument("--nodes", type=int, default=5000, help="external nodes used (and Nodes)")
    ap.add_argument("--finished", type=int, default=20000, help="finished jobs in the table")
    ap.add_argument("--wave1", type=int, default=1000, help="pods of the first wave")
    ap.add_argument("--wave2", type=int, default=20000, help="pods of the second wave")
    ap.add_argument("--pending", type=int, default=10000, help="held pods at steady state")
    ap.add_argument(
        "--plannable",
        action="store_true",
        help="steady pods Slurm plans (not held): the waves must fill every CPU; no restarts",
    )
    ap.add_argument(
        "--refresh",
        type=float,
        help="scheduler.expectedStartRefreshSeconds (default: the config's, 30; 0: off)",
    )
    ap.add_argument("--workers", type=int, default=16, help="scheduler.workers")
    ap.add_argument("--creators", type=int, default=32, help="concurrent pod creations")
    ap.add_argument("--poll", type=float, default=0.25, help="slurmPollIntervalSeconds")
    ap.add_argument(
        "--window",
        type=float,
        default=60.0,
        help="steady-state window (s): whole 30 s resync periods, or the rate depends on "
        "whether a resync falls inside",
    )
    ap.add_argument("--settle", type=float, default=3.0, help="wait before the window (s)")
    ap.add_argument("--limit", type=float, default=1800.0, help="give up after (s) per phase")
    ap.add_argument("--py-spy", type=Path, help="profile the scheduler in each wave into DIR")
    ap.add_argument(
        "--restarts",
        type=int,
        default=1,
        help="restart the scheduler this many times on the same pods and jobs (the "
        "report's restart_* are the first's; each one's in 'restarts', medians per side)",
    )
    ap.add_argument(
        "--base",
        help="a commit whose scheduler takes every other restart (paired: base new, new "
        "base, ...), run from its own worktree and venv (tests.bench.paired's)",
    )
    ap.add_argument(
        "--trees",
        type=Path,
        default=Path.home() / ".cache" / "slurm-bridge" / "paired",
        help="where --base's worktree and venv live (kept between runs)",
    )
    ap.add_argument("--logs", type=Path, help="each restarted scheduler's log into DIR")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (CI)")
    ap.add_argument("--role", choices=["main", "controller"], default="main")
    ap.add_argument("--config", type=Path, help=argparse.SUPPRESS)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    configure_logging("warning", "console")
    if args.role == "controller":
        asyncio.run(controller_child(args.config))
    else:
        print(json.dumps(asyncio.run(run(args))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
