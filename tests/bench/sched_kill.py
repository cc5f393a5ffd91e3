"""kill -9 fault suite of the scheduler (TARGETS: "kill -9 the scheduler at random points
during a 1,000-pod run, 10 times: 0 duplicate Slurm jobs left, 0 orphan jobs after one
sweep, every pod bound exactly once").

Setup: the REAL Slurm sandbox (``$SLURM_SANDBOX_ENV``), a sandbox API server in this
process (its Nodes are Slurm's external nodes, the fake kubelet runs), and the real
scheduler as a SUBPROCESS (``python -m bridge scheduler --config FILE``).

Workload: ``--pods`` pods: single pods (exclusive: one node each) and PodGroups of
``--gang-size`` (a fifth of the pods), in a seeded random order, fed so that at most
``--window`` pods are unfinished at any time (default 64: twice the 32 nodes the full run
uses). This driver plays the workloads and the controller: once every pod of a group is
bound, it finishes the pods (sandbox kubelet: Succeeded) and cancels their Slurm job, so
the partition frees capacity.

Faults: ``--kills`` SIGKILLs at random points (seeded RNG, seed printed): each kill fires
when the bound-pod count passes a random threshold, after a random jitter; when the
threshold has already passed at a restart, the kill lands a random delay after the start
(during the start-up sweep or the first cycles). ``--allocate-kills`` more land exactly
between an immediate allocation and its answer: the scheduler talks to slurmrestd through
a proxy (tests/bench/slurm_proxy.py) that, armed at a random bound-pod count, lets the
next ``job/allocate`` reach Slurm (the job RUNNING) and kills the scheduler before the
answer is relayed (the first is armed from the start, so it hits the first allocation).
After each kill the scheduler is started again.

Counted (Slurm is listed every ``LEDGER_SECONDS`` for the whole run, so a job that ended
and was purged is still counted):

* ``duplicate_jobs``: Slurm jobs beyond the first per group uid (admin_comment); the
  FAILED record a refused immediate allocation leaves is no job (``refused_allocations``
  counts them);
* ``orphan_jobs``: at the end, active Slurm jobs of this run that no pod names through its
  job-id label; ``orphan_jobs_after_sweep``: the same after one sweep of the controller's
  dangling-job logic (controller.dangling) cancelled what it finds;
* ``pods_bound_twice``: pods with more than one Binding the API server accepted (201);
* ``pods_never_bound``: pods without a node at the end;
* ``jobs_ended_while_containers_ran``: jobs Slurm reported ended while, read after that, a
  container of a pod labelled with them still ran (the allocation invariant:
  :class:`tests.bench.invariant.InvariantMonitor`, sampling the whole run).

Run: ``python -m tests.bench.sched_kill --pods 1000 --kills 10 [--seed S]``.
The last line is one JSON object with the counts and the parameters.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bridge.config import parse_config
from bridge.errors import SlurmError
from bridge.kube.client import KubeClient
from bridge.kube.resources import PODGROUPS, PODS
from bridge.kube.watch import Watcher, WatchEvent
from bridge.logging import configure_logging
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import SlurmJob, fold_hetjobs
from bridge.translate import parse_admin_comment
from bridge.wellknown import LABEL_JOB_ID
from controller import dangling
from sandbox.cluster import SandboxCluster
from sandbox.kubeapi import SANDBOX_TOKEN
from sandbox.kubeapi.faults import RequestLog
from tests.bench.invariant import InvariantMonitor
from tests.bench.slurm_proxy import AllocateKillProxy
from tests.clients import kube_for_host, list_jobs
from tests.integration.conftest import SlurmSandbox, load_sandbox, make_client
from tests.integration.identities import component_kubeconfig
from tests.integration.sched_proc import (
    NS,
    SchedulerProcess,
    jobs_by_group_uid,
    successful_bindings,
    write_scheduler_config,
)

LEDGER_SECONDS = 30.0  # well under MinJobAge (300 s): no ended job is missed
POD_KEY = ("", "pods")


@dataclass
class Group:
    name: str
    pods: list[str]
    gang: bool
    uid: str = ""
    done: bool = False
    # its first pod asks 1 CPU, the others 2: two shapes, one heterogeneous Slurm job
    mixed: bool = False


@dataclass
class Ledger:
    """Every bridge job Slurm reported during the run, by job id."""

    jobs: dict[int, SlurmJob] = field(default_factory=dict)

    async def refresh(self, slurm: SlurmClient) -> list[SlurmJob]:
        listed = fold_hetjobs((await list_jobs(slurm)).jobs)
        for j in listed:
            self.jobs[j.job_id] = j
        return listed


def pod_manifest(name: str, group: str | None, cpu: str = "1") -> dict[str, Any]:
    labels = {"scheduling.x-k8s.io/pod-group": group} if group else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "schedulerName": "slurm-bridge-scheduler",
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}},
                }
            ],
        },
    }


def plan_groups(pods: int, gang_size: int) -> list[Group]:
    """A fifth of the pods in PodGroups of ``gang_size`` (every other one of two shapes:
    a hetjob), the rest single pods."""
    gangs = (pods // 5) // gang_size if gang_size > 1 else 0
    groups = [
        Group(f"gang-{g}", [f"gang-{g}-{i}" for i in range(gang_size)], True, mixed=g % 2 == 0)
        for g in range(gangs)
    ]
    groups += [Group(f"solo-{i}", [f"solo-{i}"], False) for i in range(pods - gangs * gang_size)]
    return groups


async def create_group(kube: KubeClient, g: Group) -> None:
    """The PodGroup (for a gang), then its pods; records the group uid."""
    if g.gang:
        pg = await kube.create(
            PODGROUPS,
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": g.name},
                "spec": {"minMember": len(g.pods)},
            },
            NS,
        )
        g.uid = pg["metadata"]["uid"]
    created = await asyncio.gather(
        *(
            kube.create(
                PODS,
                pod_manifest(p, g.name if g.gang else None, "2" if g.mixed and i else "1"),
                NS,
            )
            for i, p in enumerate(g.pods)
        )
    )
    if not g.gang:
        g.uid = created[0]["metadata"]["uid"]


class Driver:
    def __init__(
        self,
        sb: SlurmSandbox,
        api: SandboxCluster,
        kube: KubeClient,
        slurm: SlurmClient,
        sched: SchedulerProcess,
        groups: list[Group],
        rng: random.Random,
        kills: int,
        window: int,
        proxy: AllocateKillProxy | None = None,
        allocate_kills: int = 0,
    ) -> None:
        self.sb, self.api, self.kube, self.slurm, self.sched = sb, api, kube, slurm, sched
        self.groups = groups
        self.rng = rng
        total = sum(len(g.pods) for g in groups)
        # Bound-pod counts at which to kill; the last tenth is left out so every kill lands
        # while work remains.
        self.thresholds = sorted(rng.randint(0, total * 9 // 10) for _ in range(kills))
        self.kills_done = 0
        # bound-pod counts at which the proxy is armed (a kill at the next allocate answer)
        # (the first at the very first allocation, so even a short run has one)
        self.arm_at = sorted(
            [0] * min(allocate_kills, 1)
            + [rng.randint(0, total * 9 // 10) for _ in range(allocate_kills - 1)]
        )
        self.proxy = proxy
        self.allocate_kills_done = 0
        self.killed_by_proxy = False
        if proxy is not None:
            proxy.on_answer = self._kill_at_allocate
        self.ledger = Ledger()
        self.bound: dict[str, dict[str, Any]] = {}  # fed by a pod watch
        self.changed = asyncio.Event()
        self.window = window
        self.created = 0  # groups[:created] exist
        self.invariant = InvariantMonitor(lambda: api.store.list(POD_KEY, NS), slurm)

    async def feed(self) -> None:
        """Create the next groups while fewer than ``window`` pods are unfinished."""
        live = sum(len(g.pods) for g in self.groups[: self.created] if not g.done)
        batch: list[Group] = []
        while self.created < len(self.groups):
            g = self.groups[self.created]
            if live + len(g.pods) > self.window and live > 0:
                break
            live += len(g.pods)
            batch.append(g)
            self.created += 1
        sem = asyncio.Semaphore(16)

        async def one(g: Group) -> None:
            async with sem:
                await create_group(self.kube, g)

        await asyncio.gather(*(one(g) for g in batch))

    def bound_pods(self) -> dict[str, dict[str, Any]]:
        return self.bound

    async def watch_pods(self) -> None:
        """Bound pods, from a watch (no polling of the whole pod list)."""

        def on(ev: WatchEvent) -> None:
            name = ev.object["metadata"]["name"]
            node = (ev.object.get("spec") or {}).get("nodeName")
            if ev.type != "DELETED" and node and name not in self.bound:
                self.bound[name] = ev.object
                self.changed.set()

        async with Watcher(self.kube, PODS, namespace=NS) as w:
            for ev in await w.relist():
                on(ev)
            async for ev in w.events():
                on(ev)

    async def keep_ledger(self) -> None:
        while True:
            await asyncio.sleep(LEDGER_SECONDS)
            with contextlib.suppress(SlurmError):
                await self.ledger.refresh(self.slurm)

    async def finish_groups(self, bound: dict[str, dict[str, Any]]) -> None:
        """Play the workloads and the controller: a group whose pods are all bound runs,
        finishes, and its Slurm job is cancelled (capacity comes back)."""
        for g in self.groups:
            if g.done or not all(p in bound for p in g.pods):
                continue
            g.done = True
            ids: set[int] = set()
            for p in g.pods:
                self.api.finish_pod(NS, p, exit_code=0)
                raw = (bound[p]["metadata"].get("labels") or {}).get(LABEL_JOB_ID)
                if raw:
                    ids.add(int(raw))
            for job_id in ids:
                with contextlib.suppress(SlurmError):
                    await self.slurm.cancel(job_id)

    async def restart(self) -> None:
        self.sched.start()
        if self.thresholds and self.thresholds[0] <= len(self.bound_pods()):
            # Already past the next threshold: kill during start-up.
            await asyncio.sleep(self.rng.uniform(0.0, 1.5))
            self.kill()
            await self.restart()
            return
        try:
            await self.sched.wait_ready()
        except AssertionError:
            # An armed proxy may kill it at its first allocation, before it reports ready.
            if not self.killed_by_proxy:
                raise
            self.killed_by_proxy = False
            await self.restart()

    def _kill_at_allocate(self) -> None:
        self.sched.kill()
        self.kills_done += 1
        self.allocate_kills_done += 1
        self.killed_by_proxy = True
        print(f"kill {self.kills_done} (at an allocate answer): bound {len(self.bound)}")

    def kill(self) -> None:
        self.thresholds.pop(0)
        self.sched.kill()
        self.kills_done += 1
        print(f"kill {self.kills_done}: bound {len(self.bound_pods())}", flush=True)

    async def run(self, deadline: float) -> None:
        async with asyncio.TaskGroup() as tg:
            bg = [
                tg.create_task(self.watch_pods()),
                tg.create_task(self.keep_ledger()),
                tg.create_task(self.invariant.run()),
            ]
            try:
                await self._run(deadline)
            finally:
                for t in bg:
                    t.cancel()

    async def _run(self, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline
        jitter: float | None = None
        await self.restart()
        while loop.time() < end:
            bound = self.bound_pods()
            await self.finish_groups(bound)
            await self.feed()
            if all(g.done for g in self.groups):
                return
            if self.proxy is not None and self.arm_at and len(bound) >= self.arm_at[0]:
                self.arm_at.pop(0)
                self.proxy.armed = True
            if self.killed_by_proxy:
                self.killed_by_proxy = False
                await self.restart()
                continue
            if self.thresholds and len(bound) >= self.thresholds[0]:
                if jitter is None:
                    jitter = loop.time() + self.rng.uniform(0.0, 0.3)
                elif loop.time() >= jitter:
                    jitter = None
                    self.kill()
                    await self.restart()
                    continue
            if not self.sched.alive():
                raise RuntimeError(f"the scheduler exited by itself; log {self.sched.log_path}")
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), 0.2)
        raise TimeoutError(f"not every group finished within {deadline:.0f} s")

    async def counts(self) -> dict[str, int]:
        listed = await self.ledger.refresh(self.slurm)
        uids = {g.uid for g in self.groups}
        by_uid = {u: js for u, js in jobs_by_group_uid(list(self.ledger.jobs.values())).items()}
        duplicates = sum(len(by_uid.get(u, [])) - 1 for u in uids if by_uid.get(u))
        pods = self.api.store.list(POD_KEY, NS)
        labelled = {
            int(v) for p in pods if (v := (p["metadata"].get("labels") or {}).get(LABEL_JOB_ID))
        }
        mine_active = [
            j
            for u, js in jobs_by_group_uid(listed).items()
            if u in uids
            for j in js
            if j.state.active
        ]
        orphans = [j for j in mine_active if j.job_id not in labelled]
        # One sweep of the controller's dangling-job logic over this run's active jobs.
        named = dangling.candidates(mine_active, "")
        by_key = {f"{NS}/{p['metadata']['name']}": p for p in pods}
        for action in dangling.plan(named, {k: by_key.get(k) for ks in named.values() for k in ks}):
            with contextlib.suppress(SlurmError):
                await self.slurm.cancel(getattr(action, "job_id"))  # noqa: B009
        after = [
            j
            for u, js in jobs_by_group_uid(list((await list_jobs(self.slurm)).jobs)).items()
            if u in uids
            for j in js
            if j.state.active and j.job_id not in labelled
        ]
        binds = successful_bindings(self.api.request_log)
        names = [p for g in self.groups for p in g.pods]
        on_node = {p["metadata"]["name"] for p in pods if (p.get("spec") or {}).get("nodeName")}
        unbound = [n for n in names if n not in on_node]
        refused = sum(
            1
            for j in self.ledger.jobs.values()
            if j.refused_allocation
            and (parsed := parse_admin_comment(j.admin_comment))
            and parsed[0] is not None
            and parsed[0].uid in uids
        )
        return {
            "refused_allocations": refused,
            "duplicate_jobs": duplicates,
            "orphan_jobs": len(orphans),
            "orphan_jobs_after_sweep": len(after),
            "pods_bound_twice": sum(1 for n in names if binds.get(n, 0) > 1),
            "pods_never_bound": len(unbound),
            "jobs_ended_while_containers_ran": len(self.invariant.violations),
            "slurm_jobs_seen": sum(len(by_uid.get(u, [])) for u in uids),
        }

    async def cleanup(self) -> None:
        listed = await self.ledger.refresh(self.slurm)
        uids = {g.uid for g in self.groups}
        for u, js in jobs_by_group_uid(listed).items():
            if u in uids:
                for j in js:
                    if j.state.active:
                        with contextlib.suppress(SlurmError):
                            await self.slurm.cancel(j.job_id)


async def run(
    pods: int,
    kills: int,
    seed: int,
    *,
    gang_size: int = 2,
    window: int = 64,
    workdir: Path | None = None,
    deadline: float | None = None,
    allocate_kills: int = 0,
) -> dict[str, Any]:
    """The whole suite; returns the counts and parameters (the JSON line)."""
    sb = load_sandbox()
    work = workdir or Path(tempfile.mkdtemp(prefix="sched-kill-"))
    rng = random.Random(seed)
    groups = plan_groups(pods, gang_size)
    rng.shuffle(groups)
    async with SandboxCluster(nodes=list(sb.external_nodes), kubelet=True) as api:
        api.request_log = RequestLog(size=50 * pods + 100_000)
        kubeconfig = work / "scheduler.kubeconfig"  # the chart's ServiceAccount, below
        proxy = AllocateKillProxy(sb.rest_url, lambda: None)
        await proxy.start()
        config = write_scheduler_config(
            work / "scheduler.yaml", sb, kubeconfig, slurmRestApi=proxy.url
        )
        sched = SchedulerProcess(config, work / "scheduler.log", "sched-kill")
        async with (
            kube_for_host(api.url, token=SANDBOX_TOKEN, request_timeout=30) as kube,
            make_client(sb) as slurm,
        ):
            cfg = parse_config(yaml.safe_load(config.read_text()), env={})
            await component_kubeconfig(kube, cfg, "scheduler", kubeconfig)
            driver = Driver(
                sb, api, kube, slurm, sched, groups, rng, kills, window, proxy, allocate_kills
            )
            started = time.monotonic()
            counts: dict[str, int] = {}
            try:
                await driver.run(deadline or 300.0 + pods * 1.0)
                seconds = time.monotonic() - started
                await sched.stop()
                counts = await driver.counts()
            finally:
                await sched.stop()
                await proxy.close()
                if counts.get("orphan_jobs_after_sweep", 1):  # else nothing is left to cancel
                    await driver.cleanup()
    return {
        "pods": pods,
        "kills": kills,
        "kills_done": driver.kills_done,
        "allocate_kills": allocate_kills,
        "allocate_kills_done": driver.allocate_kills_done,
        "seed": seed,
        "gang_size": gang_size,
        "gangs": sum(1 for g in groups if g.gang),
        "hetjob_gangs": sum(1 for g in groups if g.mixed),
        "window": window,
        "external_nodes": len(sb.external_nodes),
        **counts,
        "seconds": round(seconds, 1),
        "log": str(sched.log_path),
    }


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m tests.bench.sched_kill")
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument(
        "--allocate-kills", type=int, default=3, help="more kills between allocate and answer"
    )
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--gang-size", type=int, default=2)
    ap.add_argument("--window", type=int, default=64, help="unfinished pods at most")
    args = ap.parse_args()
    configure_logging("warning", "console")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    print(f"seed {seed}", flush=True)
    result = asyncio.run(
        run(
            args.pods,
            args.kills,
            seed,
            gang_size=args.gang_size,
            window=args.window,
            allocate_kills=args.allocate_kills,
        )
    )
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
