"""How good is the expected start the pods show? Against REAL Slurm (the sandbox: its
partition of 3 external nodes of 8 CPUs, ``bf_interval=1``) and the sandbox API server,
the scheduler in this process.

A mixed queue is made at once, in a random order: ``--gangs`` bridge gangs (PodGroups of
2 pods of 1-3 CPUs on shared nodes) and ``--natives`` native Slurm jobs (2-8 CPUs, other
names, submitted straight to Slurm), each with a known time limit of 1 or 2 minutes
(Slurm's smallest). Each job runs until its time limit (the benchmark ends it then, by
Slurm's own start time), or, for a ``--early`` fraction of them (default none), ends at a
random 30-100% of it, as real jobs do (which no plan can foresee). ``--exclusive`` puts
every job on whole nodes (backfill plans pending jobs on whole nodes: on shared nodes its
plan of a deep queue is pessimistic, see docs/benchmarks.md). Every ``--every``
seconds the benchmark reads, at the same moment, the gangs' pods (one list: the
annotation ``slinky.slurm.net/expected-start``) and ``squeue --start`` (in the sandbox's
chroot).

Per gang that waited: the estimate its pods showed first, the ``squeue --start`` time
read at that same moment, and the job's real start (Slurm's ``start_time`` once it runs).

Output, the last line, ONE JSON object: ``gangs`` (gangs whose pods showed an estimate),
``error_s`` {``p50``, ``p90``} of |first shown estimate - real start|,
``squeue_start_error_s`` (the same for ``squeue --start`` read at that moment),
``within_bf_interval`` (the fraction of gangs started within one backfill interval of the
first estimate shown), ``planned_without_estimate`` (gangs Slurm had planned, ``squeue
--start`` giving a time at least ``--grace`` seconds before they started, whose pods never
showed an estimate: must be 0), ``last_shown_error_s`` (the same for the last estimate the
pods showed before the start: how well the re-reads track Slurm's plan), ``error_bias_s``
(the median of estimate - start: positive, Slurm's plan was pessimistic),
``shown_after_planned_s`` (from Slurm's first plan to the pods showing one),
``gangs_total``, ``natives``, ``slurm_calls_per_s`` (the scheduler's slurmrestd requests
over the run), ``seconds``.

Run: ``python -m tests.bench.eta [--gangs 24 --natives 12]`` on the default sandbox
(``slurm-bridge sandbox slurm up``: the queue is sized for its 24 CPUs) (about 10 minutes:
the queue drains at Slurm's pace, 1-2 minute jobs).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bridge.errors import SlurmError
from bridge.expected import parse_rfc3339
from bridge.kube.client import KubeClient
from bridge.kube.resources import PODGROUPS, PODS
from bridge.models import JobSpec
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import SlurmJob
from bridge.wellknown import (
    ANNOTATION_EXPECTED_START,
    ANNOTATION_EXPECTED_START_BY,
    LABEL_JOB_ID,
    LABEL_POD_GROUP,
)
from sandbox.cluster import SandboxCluster
from tests.bench.topology import cli, scheduler_for
from tests.integration.conftest import SlurmSandbox, load_sandbox, make_client

NS = "slurm-bridge"
PODS_PER_GANG = 2


@dataclass
class Tracked:
    """One job of the queue: a gang or a native job."""

    name: str
    limit_min: int
    run_s: float  # how long it runs once started (its limit, or less: --early)
    gang: bool
    job_id: int | None = None
    started: datetime | None = None  # Slurm's start_time once RUNNING
    ended: bool = False
    shown: datetime | None = None  # the first estimate its pods showed
    squeue_then: datetime | None = None  # squeue --start when it was first shown
    shown_at: datetime | None = None  # when the first estimate was seen on its pods
    last_shown: datetime | None = None  # the last estimate its pods showed before it ran
    planned_at: datetime | None = None  # when squeue --start first gave it a time
    shown_by: str | None = None  # who made the first estimate (expected-start-by)
    pods: list[str] = field(default_factory=list)


def plan_queue(
    gangs: int, natives: int, early: float, seed: int, run_fraction: float = 1.0
) -> list[tuple[str, Any]]:
    """The queue, in submission order: ("gang", (cpus, limit, run_s)) or ("native", ...)."""
    rng = random.Random(seed)
    items: list[tuple[str, Any]] = []
    for kind, n, cpus in (("gang", gangs, (1, 3)), ("native", natives, (2, 8))):
        for _ in range(n):
            limit = rng.choice((1, 2))
            run_s = limit * 60.0 * run_fraction
            if rng.random() < early:
                run_s *= rng.uniform(0.3, 1.0)
            items.append((kind, (rng.randint(*cpus), limit, run_s)))
    rng.shuffle(items)
    return items


def gang_pod(
    name: str, group: str, cpus: int, limit: int, exclusive: bool = False
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {LABEL_POD_GROUP: group},
            "annotations": {
                "slurmjob.slinky.slurm.net/timelimit": str(limit),
                "slurmjob.slinky.slurm.net/exclusive": str(exclusive).lower(),
            },
        },
        "spec": {
            "schedulerName": "slurm-bridge-scheduler",
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": str(cpus), "memory": "100Mi"}},
                }
            ],
        },
    }


def squeue_start(sb: SlurmSandbox) -> dict[int, datetime]:
    """``squeue --start``: the pending jobs Slurm has planned, by id (UTC: the sandbox's)."""
    out = subprocess.run(
        ["chroot", str(sb.sandbox_dir / "sid-root"), "squeue", "--start", "-h", "-o", "%i %S"],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    ).stdout
    planned: dict[int, datetime] = {}
    for line in out.splitlines():
        job, _, when = line.partition(" ")
        with contextlib.suppress(ValueError):
            planned[int(job)] = datetime.fromisoformat(when.strip()).replace(tzinfo=UTC)
    return planned


def bf_interval(sb: SlurmSandbox) -> float:
    """The sandbox's ``bf_interval`` (Slurm's default 30 s when not set)."""
    out = subprocess.run(
        ["chroot", str(sb.sandbox_dir / "sid-root"), "scontrol", "show", "config"],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    ).stdout
    for line in out.splitlines():
        if line.startswith("SchedulerParameters"):
            for item in line.partition("=")[2].strip().split(","):
                key, _, value = item.partition("=")
                if key == "bf_interval" and value.isdigit():
                    return float(value)
    return 30.0


def quantiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p90": None}
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return {"p50": round(statistics.median(ordered), 1), "p90": round(p90, 1)}


class Queue:
    """The mixed queue, made and drained against real Slurm."""

    def __init__(
        self,
        sb: SlurmSandbox,
        kube: KubeClient,
        api: SandboxCluster,
        slurm: SlurmClient,
        exclusive: bool = False,
    ) -> None:
        self.sb, self.kube, self.api, self.slurm = sb, kube, api, slurm
        self.exclusive = exclusive
        self.items: list[Tracked] = []

    async def make(self, plan: list[tuple[str, Any]]) -> None:
        for i, (kind, (cpus, limit, run_s)) in enumerate(plan):
            t = Tracked(f"eta-{kind}-{i}", limit, run_s, kind == "gang")
            if t.gang:
                await self.kube.create(
                    PODGROUPS,
                    {
                        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                        "kind": "PodGroup",
                        "metadata": {"name": t.name},
                        "spec": {"minMember": PODS_PER_GANG},
                    },
                    NS,
                )
                t.pods = [f"{t.name}-{k}" for k in range(PODS_PER_GANG)]
                for p in t.pods:
                    await self.kube.create(
                        PODS, gang_pod(p, t.name, cpus, limit, self.exclusive), NS
                    )
            else:
                spec = JobSpec(
                    name=t.name,
                    partition=self.sb.partition,
                    min_nodes=1,
                    tasks=1,
                    cpus_per_task=cpus,
                    memory_per_node_mib=100,
                    exclusive=self.exclusive,
                    time_limit_minutes=limit,
                )
                t.job_id = await self.slurm.submit(spec)
            self.items.append(t)

    async def look(self) -> bool:
        """One look at both sides, at the same moment; ends the jobs whose time is up.
        True once every job has ended."""
        pods_listed, jobs, planned = await asyncio.gather(
            self.kube.list_pods(NS),
            self.slurm.scan_jobs(lambda j: j.name.startswith("eta-")),
            asyncio.to_thread(squeue_start, self.sb),
        )
        now = datetime.now(UTC)
        by_pod = {p["metadata"]["name"]: p for p in pods_listed.items}
        by_id: dict[int, SlurmJob] = {j.job_id: j for j in jobs}
        by_name = {j.name: j for j in jobs if j.state.active}
        for t in self.items:
            if t.job_id is None and t.gang:
                job = by_name.get(t.name)
                first = by_pod.get(t.pods[0], {})
                label = (first.get("metadata", {}).get("labels") or {}).get(LABEL_JOB_ID)
                t.job_id = job.job_id if job is not None else int(label) if label else None
            job = by_id.get(t.job_id) if t.job_id is not None else None
            if job is None or t.ended:
                continue
            if job.state.primary == "PENDING":
                if t.job_id in planned and t.planned_at is None:
                    t.planned_at = now
                if t.gang and t.shown is None and t.started is None:
                    notes = by_pod.get(t.pods[0], {}).get("metadata", {}).get("annotations")
                    shown = parse_rfc3339((notes or {}).get(ANNOTATION_EXPECTED_START))
                    if shown is not None:
                        t.shown, t.squeue_then = shown, planned.get(job.job_id)
                        t.shown_at = now
                        t.shown_by = (notes or {}).get(ANNOTATION_EXPECTED_START_BY)
                if t.gang:
                    notes = by_pod.get(t.pods[0], {}).get("metadata", {}).get("annotations")
                    t.last_shown = parse_rfc3339((notes or {}).get(ANNOTATION_EXPECTED_START)) or (
                        t.last_shown
                    )
            elif job.state.primary == "RUNNING" and job.start_time is not None:
                t.started = t.started or job.start_time
                if (now - t.started).total_seconds() >= t.run_s:
                    await self.end(t)
            elif not job.state.active:
                t.started = t.started or job.start_time
                await self.end(t)
        return all(t.ended for t in self.items)

    async def end(self, t: Tracked) -> None:
        t.ended = True
        if t.job_id is not None:
            with contextlib.suppress(SlurmError):
                await self.slurm.cancel(t.job_id)
        for p in t.pods:
            with contextlib.suppress(Exception):
                self.api.finish_pod(NS, p)


# The queue is sized for the default sandbox's partition (3 nodes of 8 CPUs): on a larger
# one every job would start at once, and no estimate would ever be shown.
MAX_PARTITION_CPUS = 48


async def run(args: argparse.Namespace) -> dict[str, Any]:
    sb = load_sandbox()
    cpus = len(sb.external_nodes) * sb.node_cpus
    if cpus > MAX_PARTITION_CPUS:
        raise SystemExit(
            f"the partition has {cpus} CPUs: the queue is sized for at most "
            f"{MAX_PARTITION_CPUS} (the default sandbox: `slurm-bridge sandbox slurm up`)"
        )
    interval = bf_interval(sb)
    scheduler = {
        "workers": 4,
        "expectedStartStepSeconds": args.step,
        "expectedStartRefreshSeconds": args.refresh,
    }
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            SandboxCluster(nodes=list(sb.external_nodes), kubelet=True) as api,
            scheduler_for(sb, api, Path(tmp), "eta", scheduler=scheduler) as (kube, counting),
            make_client(sb) as slurm,
        ):
            q = Queue(sb, kube, api, slurm, args.exclusive)
            calls0, t0 = sum(counting.calls.values()), time.monotonic()
            try:
                plan = plan_queue(
                    args.gangs, args.natives, args.early, args.seed, args.run_fraction
                )
                await q.make(plan)
                deadline = time.monotonic() + args.limit
                while not await q.look():
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"the queue did not drain in {args.limit:.0f} s")
                    await asyncio.sleep(args.every)
            finally:
                for t in q.items:
                    if not t.ended:
                        await q.end(t)
            rate = (sum(counting.calls.values()) - calls0) / (time.monotonic() - t0)
    if args.details is not None:
        with args.details.open("w") as f:
            for t in q.items:
                f.write(json.dumps({k: _plain(v) for k, v in vars(t).items()}) + "\n")
    return summarize(
        q.items,
        args,
        interval,
        rate=rate,
        seconds=time.monotonic() - started,
    )


def summarize(
    items: list[Tracked],
    args: argparse.Namespace,
    interval: float,
    *,
    rate: float,
    seconds: float,
) -> dict[str, Any]:
    """The report (its last line): the error of the first estimate each gang's pods
    showed against its real start, beside ``squeue --start`` read at the same moment."""
    gangs = [t for t in items if t.gang]
    shown = [t for t in gangs if t.shown is not None and t.started is not None]
    errors = [abs((t.shown - t.started).total_seconds()) for t in shown if t.shown and t.started]
    squeue = [
        abs((t.squeue_then - t.started).total_seconds())
        for t in shown
        if t.squeue_then is not None and t.started is not None
    ]
    last = [
        abs((t.last_shown - t.started).total_seconds())
        for t in shown
        if t.last_shown is not None and t.started is not None
    ]
    bias = [(t.shown - t.started).total_seconds() for t in shown if t.shown and t.started]
    lag = [
        (t.shown_at - t.planned_at).total_seconds()
        for t in shown
        if t.shown_at is not None and t.planned_at is not None
    ]
    missed = [
        t
        for t in gangs
        if t.shown is None
        and t.planned_at is not None
        and t.started is not None
        and (t.started - t.planned_at).total_seconds() >= args.grace
    ]
    return {
        "gangs": len(shown),
        "error_s": quantiles(errors),
        "squeue_start_error_s": quantiles(squeue),
        "within_bf_interval": round(sum(e <= interval for e in errors) / max(1, len(errors)), 2),
        "planned_without_estimate": len(missed),
        "last_shown_error_s": quantiles(last),
        "error_bias_s": round(statistics.median(bias), 1) if bias else None,
        "shown_after_planned_s": quantiles(lag),
        "gangs_total": len(gangs),
        "natives": args.natives,
        "bf_interval_s": interval,
        "early": args.early,
        "exclusive": args.exclusive,
        "first_shown_by": dict(sorted(Counter(t.shown_by or "?" for t in shown).items())),
        "slurm_calls_per_s": round(rate, 2),
        "seconds": round(seconds, 1),
    }


def _plain(v: Any) -> Any:
    return v.isoformat() if isinstance(v, datetime) else v


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m tests.bench.eta", description=__doc__)
    ap.add_argument("--gangs", type=int, default=24, help="bridge gangs (2 pods each)")
    ap.add_argument("--natives", type=int, default=12, help="native Slurm jobs")
    ap.add_argument("--early", type=float, default=0.0, help="fraction ending early")
    ap.add_argument(
        "--run-fraction",
        type=float,
        default=1.0,
        help="jobs run this fraction of their limit (a quick smoke; the estimates are then off)",
    )
    ap.add_argument(
        "--exclusive",
        action="store_true",
        help="every job takes whole nodes (backfill's plan reserves whole nodes: see "
        "docs/benchmarks.md, Expected start)",
    )
    ap.add_argument("--every", type=float, default=1.0, help="seconds between two looks")
    ap.add_argument("--step", type=float, default=60.0, help="expectedStartStepSeconds")
    ap.add_argument("--refresh", type=float, default=30.0, help="expectedStartRefreshSeconds")
    ap.add_argument(
        "--grace",
        type=float,
        default=10.0,
        help="a gang planned this long before it started must have shown an estimate",
    )
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--details", type=Path, help="each job's times, a JSON line each, into FILE")
    ap.add_argument("--limit", type=float, default=1800.0, help="give up after (s)")
    return ap


def main(argv: list[str] | None = None) -> int:
    return cli(parser(), run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
