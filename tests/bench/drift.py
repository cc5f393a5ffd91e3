"""Drift detection time of the workload controller, against the REAL Slurm sandbox and an
in-process sandbox API server.

* slurm_to_k8s: ``scancel`` (SlurmClient.cancel) -> the pod reads phase Failed;
* k8s_to_slurm: the last pod of a job Succeeded (sandbox kubelet) -> Slurm says the job
  is no longer active.

Run: ``.venv/bin/python -m tests.bench.drift [--reps 10]``. The last line is JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import time
from collections.abc import Awaitable, Callable

from bridge.errors import SlurmError
from bridge.kube.client import KubeClient
from bridge.slurm.client import SlurmClient
from controller.model import UNKNOWN, JobKind
from controller.runtime import Controller
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

    def track(job_id: int) -> int:
        submitted.append(job_id)
        return job_id

    async with make_client(sb) as slurm, sandbox_kube(sb) as (srv, kube):
        async with running_controller(cfg, kube) as ctl:
            for i in range(reps):
                node = sb.external_nodes[i % len(sb.external_nodes)]
                job = await place_group(kube, slurm, sb, mcs, [f"c{i}"], node, track)
                # Measure from a steady state: the controller knows the job is active.
                await _until(lambda job=job: _seen_active(ctl, job))
                await _until(lambda i=i: _phase_is(kube, f"c{i}", "Running"))
                await slurm.cancel(job)
                s2k.append(await _until(lambda i=i: _failed(kube, f"c{i}")))

                job = await place_group(kube, slurm, sb, mcs, [f"s{i}"], node, track)
                await _until(lambda job=job: _seen_active(ctl, job))
                await _until(lambda i=i: _phase_is(kube, f"s{i}", "Running"))
                srv.finish_pod(NS, f"s{i}", exit_code=0)
                k2s.append(await _until(lambda job=job: _ended(slurm, job)))
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
    }


async def _phase_is(kube: KubeClient, name: str, phase: str) -> bool:
    pod = await kube.get_pod(NS, name)
    return bool(pod.get("status", {}).get("phase") == phase)


async def _failed(kube: KubeClient, name: str) -> bool:
    return await _phase_is(kube, name, "Failed")


async def _seen_active(ctl: Controller, job: int) -> bool:
    return ctl.views.get(job, UNKNOWN).kind is JobKind.ACTIVE


async def _ended(slurm: SlurmClient, job: int) -> bool:
    return not (await slurm.get_job(job)).state.active


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--poll", type=float, default=0.25, help="slurmPollIntervalSeconds")
    args = ap.parse_args()
    print(json.dumps(asyncio.run(main(args.reps, args.poll))))
