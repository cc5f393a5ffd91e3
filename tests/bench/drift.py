"""Drift detection time of the workload controller, against the REAL Slurm sandbox and an
in-process sandbox API server.

* slurm_to_k8s: ``scancel`` (SlurmClient.cancel) -> the pod reads phase Failed;
* k8s_to_slurm: the last pod of a job Succeeded (sandbox kubelet) -> Slurm says the job
  is no longer active;
* stopped_to_ended: a deleted pod whose containers ignore SIGTERM (1 s grace) -> the
  kubelet stand-in kills them -> Slurm says the job is no longer active (the allocation
  invariant: the job outlives the containers, and by how little);
* jobs_ended_while_containers_ran: :class:`tests.bench.invariant.InvariantMonitor` over
  the whole run (the scancel'ed jobs of slurm_to_k8s excepted: Slurm ended those). 0.

Run: ``.venv/bin/python -m tests.bench.drift [--reps 10]``. The last line is JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import statistics
import time
from collections.abc import Awaitable, Callable

from bridge.errors import SlurmError
from bridge.kube.client import KubeClient
from bridge.slurm.client import SlurmClient
from controller.model import UNKNOWN, JobKind
from controller.runtime import Controller
from sandbox.annotations import IGNORE_SIGTERM
from sandbox.cluster import SandboxCluster
from tests.bench.invariant import InvariantMonitor, running_jobs
from tests.integration.conftest import load_sandbox, make_client
from tests.integration.controller_harness import (
    NS,
    controller_config,
    place_group,
    running_controller,
    sandbox_kube,
    unique_mcs,
)
from tests.waiting import eventually

POD_KEY = ("", "pods")


async def _until(check: Callable[[], Awaitable[bool]], limit: float = 60.0) -> float:
    start = time.monotonic()
    await eventually(check, within=limit, what="the drift to be corrected", every=0.005)
    return time.monotonic() - start


def p99(xs: list[float]) -> float:
    """Nearest-rank p99 (with 10 samples: the maximum)."""
    s = sorted(xs)
    return s[max(0, math.ceil(0.99 * len(s)) - 1)]


async def main(reps: int, poll: float) -> dict[str, object]:
    sb = load_sandbox()
    mcs = unique_mcs()
    cfg = controller_config(sb, mcs, slurmPollIntervalSeconds=poll)
    submitted: list[int] = []
    s2k: list[float] = []
    k2s: list[float] = []
    stop2end: list[float] = []
    scancelled: set[int] = set()

    def track(job_id: int) -> int:
        submitted.append(job_id)
        return job_id

    async with make_client(sb) as slurm, sandbox_kube(sb) as (srv, kube):
        monitor = InvariantMonitor(
            lambda: srv.store.list(POD_KEY, NS), slurm, exempt=scancelled.__contains__
        )
        watching = asyncio.create_task(monitor.run())
        async with running_controller(cfg, kube) as ctl:
            for i in range(reps):
                node = sb.external_nodes[i % len(sb.external_nodes)]
                job = await place_group(kube, slurm, sb, mcs, [f"c{i}"], node, track)
                # Measure from a steady state: the controller knows the job is active.
                await _until(lambda job=job: _seen_active(ctl, job))
                await _until(lambda i=i: _phase_is(kube, f"c{i}", "Running"))
                scancelled.add(job)
                await slurm.cancel(job)
                s2k.append(await _until(lambda i=i: _failed(kube, f"c{i}")))

                job = await place_group(kube, slurm, sb, mcs, [f"s{i}"], node, track)
                await _until(lambda job=job: _seen_active(ctl, job))
                await _until(lambda i=i: _phase_is(kube, f"s{i}", "Running"))
                srv.finish_pod(NS, f"s{i}", exit_code=0)
                k2s.append(await _until(lambda job=job: _ended(slurm, job)))
            # After the drift reps: its grace periods idle the controller's poller, which
            # then backs off (a scancel just after would be seen a backed-off poll later).
            for i in range(reps):
                node = sb.external_nodes[i % len(sb.external_nodes)]
                job = await place_group(kube, slurm, sb, mcs, [f"d{i}"], node, track)
                await kube.patch_pod(
                    NS,
                    f"d{i}",
                    {"metadata": {"annotations": {IGNORE_SIGTERM: "true"}}},
                    patch_type="merge",
                )
                await _until(lambda job=job: _seen_active(ctl, job))
                await _until(lambda i=i: _phase_is(kube, f"d{i}", "Running"))
                await kube.delete_pod(NS, f"d{i}", grace_period_seconds=1)
                stop2end.append(await _stopped_to_ended(srv, slurm, f"d{i}", job))
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching
        for job in submitted:
            with contextlib.suppress(SlurmError):
                await slurm.cancel(job)
    return {
        "reps": reps,
        "slurm_poll_interval_s": cfg.slurm_poll_interval_seconds,
        "slurm_to_k8s_s": [round(x, 3) for x in s2k],
        "k8s_to_slurm_s": [round(x, 3) for x in k2s],
        "slurm_to_k8s_p99_s": round(p99(s2k), 3),
        "k8s_to_slurm_p99_s": round(p99(k2s), 3),
        "stopped_to_ended_s": [round(x, 3) for x in stop2end],
        "stopped_to_ended_p50_s": round(statistics.median(stop2end), 3),
        "stopped_to_ended_p99_s": round(p99(stop2end), 3),
        "invariant_samples": monitor.samples,
        "jobs_ended_while_containers_ran": len(monitor.violations),
    }


async def _stopped_to_ended(srv: SandboxCluster, slurm: SlurmClient, name: str, job: int) -> float:
    """Seconds from the kubelet stand-in's stop of the pod's containers (its store, read
    in-process) to Slurm's first answer that the job is over. Each round reads the store,
    then Slurm, then the store again: a job Slurm calls over while the second read still
    sees a container run is a certain violation (a stop between the reads is not)."""

    def runs() -> bool:
        pod = srv.store.get(POD_KEY, NS, name)
        return bool(running_jobs([pod] if pod else []))

    stopped: float | None = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if stopped is None and not runs():
            stopped = time.monotonic()
        ended = await _ended(slurm, job)
        seen = time.monotonic()
        if ended:
            if runs():
                raise AssertionError(f"Slurm job {job} ended while pod {name}'s containers ran")
            return max(0.0, seen - (stopped if stopped is not None else seen))
        await asyncio.sleep(0.002)
    raise AssertionError(f"Slurm job {job} did not end within 60 s")


async def _phase_is(kube: KubeClient, name: str, phase: str) -> bool:
    pod = await kube.get_pod(NS, name)
    return bool(pod.get("status", {}).get("phase") == phase)


async def _failed(kube: KubeClient, name: str) -> bool:
    return await _phase_is(kube, name, "Failed")


async def _seen_active(ctl: Controller, job: int) -> bool:
    return ctl.poller.views.get(job, UNKNOWN).kind is JobKind.ACTIVE


async def _ended(slurm: SlurmClient, job: int) -> bool:
    return not (await slurm.get_job(job)).state.active


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--poll", type=float, default=0.25, help="slurmPollIntervalSeconds")
    args = ap.parse_args()
    print(json.dumps(asyncio.run(main(args.reps, args.poll))))
