"""Fault scenarios for the whole bridge (scheduler + controller, real Slurm, sandbox API).

Each scenario drives a :class:`Bridge` from ``running_bridge(..., controller=True)``,
asserts what TARGETS.md's reliability table demands, and returns its counts and measured
times (never asserted: the machine is shared). The e2e tests (test_faults_e2e.py) and the
on-demand runner (``python -m tests.bench.faults``) call the same functions.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Iterable
from typing import Any

from bridge.kube.resources import EVENTS
from bridge.wellknown import SLURMJOB_PREFIX
from scheduler.outage import OUTAGE_PREFIX
from tests.integration.bridge_harness import NS, Bridge, job_of, podgroup
from tests.integration.conftest import SlurmSandbox

ANNOTATION_TIMELIMIT = SLURMJOB_PREFIX + "timelimit"
WHOLE_NODE = "8"  # the sandbox's CPUs per node: one such pod fills a node
# Slurm checks time limits in a periodic pass (every 30 s), so a 1-minute job ends
# 60-90 s after it starts; the controller then sees it within one poll.
TIMELIMIT_DEADLINE = 180.0


async def _sandbox(sb: SlurmSandbox, *args: str) -> float:
    """Run a sandbox CLI command off the event loop; returns its wall time."""
    t0 = time.monotonic()
    proc = await asyncio.to_thread(sb.cli, *args)
    assert proc.returncode == 0, f"sandbox slurm {' '.join(args)}: {proc.stderr}"
    return time.monotonic() - t0


async def _phase(b: Bridge, name: str) -> str:
    return str(((await b.get_pod(name)).get("status") or {}).get("phase") or "")


async def _running(b: Bridge, name: str) -> None:
    async def running() -> bool:
        return await _phase(b, name) == "Running"

    await b.wait_for(f"pod {name} Running", running)


async def _message_has(b: Bridge, name: str, text: str, deadline: float = 30.0) -> str:
    async def has() -> str:
        msg = await b.scheduled_message(name)
        return msg if text in msg else ""

    return str(await b.wait_for(f"{name} PodScheduled message with {text!r}", has, deadline))


async def _message_lacks(b: Bridge, name: str, text: str, needs: str) -> str:
    async def ok() -> str:
        msg = await b.scheduled_message(name)
        return msg if text not in msg and needs in msg else ""

    return str(await b.wait_for(f"{name} PodScheduled message without {text!r}", ok))


async def pod_damage(b: Bridge, names: Iterable[str]) -> dict[str, int]:
    """How many of ``names`` are gone (deleted) or Failed."""
    existing = {p["metadata"]["name"]: p for p in (await b.kube.list_pods(NS)).items}
    wanted = list(names)
    deleted = [n for n in wanted if n not in existing]
    failed = [
        n
        for n in wanted
        if n in existing and (existing[n].get("status") or {}).get("phase") == "Failed"
    ]
    return {"pods_deleted": len(deleted), "pods_failed": len(failed)}


# ----------------------------------------------------------------------------- time limit
async def time_limit_expires(b: Bridge) -> dict[str, Any]:
    """A pod whose job has a 1-minute limit: Slurm ends it with TIMEOUT, the pod fails."""
    await b.create_pod("tl-0", annotations={ANNOTATION_TIMELIMIT: "1"})
    await b.bound("tl-0")
    job_id = job_of(await b.get_pod("tl-0"))
    job = await b.slurm.get_job(job_id)
    assert job.time_limit_minutes == 1, job.time_limit_minutes
    await _running(b, "tl-0")
    t0 = time.monotonic()

    async def failed() -> bool:
        return await _phase(b, "tl-0") == "Failed"

    await b.wait_for("pod Failed after the time limit", failed, TIMELIMIT_DEADLINE)
    waited = time.monotonic() - t0
    status = (await b.get_pod("tl-0"))["status"]
    assert status["reason"] == "SlurmJobTimeout", status
    assert "TIMEOUT" in status["message"]
    assert str(job_id) in status["message"]
    assert (await b.slurm.get_job(job_id)).state.primary == "TIMEOUT"
    events = [
        e
        for e in (await b.kube.list(EVENTS, NS)).items
        if e["involvedObject"]["name"] == "tl-0" and e.get("reason") == "SlurmJobTimeout"
    ]
    assert events
    assert events[0]["type"] == "Warning"
    return {
        "fault": "timelimit",
        "pods_failed_timeout": 1,
        "events": len(events),
        "running_to_failed_s": round(waited, 1),
    }


# ----------------------------------------------------------------------------- slurmctld
async def slurmctld_restart(b: Bridge, sb: SlurmSandbox) -> dict[str, Any]:
    """Running and pending workloads across a slurmctld restart."""
    nodes = len(sb.external_nodes)
    running = [f"run-{i}" for i in range(nodes)]
    for n in running:
        await b.create_pod(n, cpu=WHOLE_NODE)
    placed = {n: await b.bound(n) for n in running}
    for n in running:
        await _running(b, n)
    jobs = {n: job_of(await b.get_pod(n)) for n in running}
    await b.create_pod("wait-0", cpu=WHOLE_NODE)
    await _message_has(b, "wait-0", " is pending: ")

    restart_s = await _sandbox(sb, "restart-ctld")

    for n, job_id in jobs.items():  # running jobs keep running, where they ran
        job = await b.slurm.get_job(job_id)
        assert job.state.primary == "RUNNING", job
        assert list(job.nodes) == [placed[n]], job
        assert await _phase(b, n) == "Running"
    assert not (await b.get_pod("wait-0")).get("spec", {}).get("nodeName")
    # A pod finishing frees its node: the controller ends its job, Slurm starts the
    # pending one, the scheduler binds it.
    b.api.finish_pod(NS, running[0], exit_code=0)
    t0 = time.monotonic()
    await b.bound("wait-0")
    bind_after_free = time.monotonic() - t0
    for n in running[1:]:
        assert (await b.slurm.get_job(jobs[n])).state.primary == "RUNNING"
    damage = await pod_damage(b, [*running, "wait-0"])
    assert damage == {"pods_deleted": 0, "pods_failed": 0}, damage
    return {
        "fault": "slurmctld-restart",
        "running_kept": nodes,
        "pending_bound": 1,
        **damage,
        "restart_ctld_s": round(restart_s, 2),
        "bind_after_free_s": round(bind_after_free, 2),
    }


# ----------------------------------------------------------------------------- slurmrestd
async def slurmrestd_outage(b: Bridge, sb: SlurmSandbox, outage_s: float) -> dict[str, Any]:
    """slurmrestd stopped for ``outage_s``: nothing deleted or failed, pending pods name
    the outage, and afterwards a pod created during it is bound and reasons refresh."""
    await b.create_pod("keep-0", cpu=WHOLE_NODE)
    await b.bound("keep-0")
    await _running(b, "keep-0")
    keep_job = job_of(await b.get_pod("keep-0"))
    # More exclusive pods than the partition has nodes: pends for good (a partition
    # limit), without holding nodes another job could use.
    big = await podgroup(b, "big", len(sb.external_nodes) + 1, cpu=WHOLE_NODE)
    before = await _message_has(b, big[0], " is pending: ")

    await _sandbox(sb, "rest-stop")
    stopped = time.monotonic()
    try:
        for n in big:
            await _message_has(b, n, OUTAGE_PREFIX)
        await b.create_pod("during-0")
        await _message_has(b, "during-0", OUTAGE_PREFIX)
        # The outage itself (the fault's length, not a wait for a condition).
        await asyncio.sleep(max(0.0, outage_s - (time.monotonic() - stopped)))
        mid = await pod_damage(b, ["keep-0", *big, "during-0"])
    finally:
        await _sandbox(sb, "rest-start")
    outage = time.monotonic() - stopped
    back = time.monotonic()

    async def since_back(aw: Awaitable[object]) -> float:
        await aw
        return time.monotonic() - back

    bound_s, reasons_s = await asyncio.gather(
        since_back(b.bound("during-0")),
        since_back(_message_lacks(b, big[0], OUTAGE_PREFIX, " is pending: ")),
    )
    after = await b.scheduled_message(big[0])

    assert mid == {"pods_deleted": 0, "pods_failed": 0}, mid
    damage = await pod_damage(b, ["keep-0", *big, "during-0"])
    assert damage == {"pods_deleted": 0, "pods_failed": 0}, damage
    assert (await b.slurm.get_job(keep_job)).state.primary == "RUNNING"
    assert await _phase(b, "keep-0") == "Running"
    events = [
        e for e in (await b.kube.list(EVENTS, NS)).items if OUTAGE_PREFIX in e.get("message", "")
    ]
    assert {e["involvedObject"]["name"] for e in events} >= {*big, "during-0"}
    token = sb.jwt_file.read_text().strip()
    pods = (await b.kube.list_pods(NS)).items
    assert all(token not in str(e) for e in events)
    assert all(token not in str(p.get("status")) for p in pods)
    return {
        "fault": "slurmrestd-outage",
        "outage_s": round(outage, 1),
        "pods_naming_outage": len(big) + 1,
        "outage_events": len(events),
        **damage,
        "recovery_s": round(max(bound_s, reasons_s), 2),
        "recovery_bind_s": round(bound_s, 2),
        "recovery_reasons_s": round(reasons_s, 2),
        "reason_before": before.rpartition(": ")[2],
        "reason_after": after.rpartition(": ")[2],
    }
