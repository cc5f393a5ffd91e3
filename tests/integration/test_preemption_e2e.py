"""Slurm preemption end to end: real Slurm (the sandbox's PreemptType=preempt/partition_prio,
PreemptMode=CANCEL), the scheduler, the controller, the sandbox's kubelet. A native job of a
higher-tier partition (submitted through slurmrestd, as sbatch would) preempts a bridge
job; Slurm grants the victim its partition's GraceTime; the controller sees the preemption
(the job's preempt_time) and fails the pod with DisruptionTarget at once, the kubelet stops
its containers, the bridge ends the job, and the preemptor runs. The containers stop while
Slurm still holds the victim's nodes: no node is ever used twice."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge.models import JobSpec
from bridge.wellknown import CONDITION_DISRUPTION_TARGET
from tests.integration.bridge_harness import Bridge, job_of, running_bridge
from tests.integration.conftest import SlurmSandbox

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]

URGENT = "urgent-preempt-test"
GRACE_SECONDS = 20


def _scontrol(sandbox: SlurmSandbox, *args: str) -> str:
    done = sandbox.cli("exec", "--", "scontrol", *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


@contextlib.contextmanager
def higher_tier(sandbox: SlurmSandbox, grace: int, mode: str) -> Iterator[str]:
    """A partition of a higher PriorityTier on the bridge's nodes, and ``grace`` seconds
    of GraceTime and the PreemptMode ``mode`` on the bridge's partition; all undone at
    the end."""
    if "preempt/partition_prio" not in _scontrol(sandbox, "show", "config"):
        pytest.skip("the Slurm sandbox has no PreemptType=preempt/partition_prio (restart it)")
    nodes = ",".join(sandbox.external_nodes)
    _scontrol(sandbox, "create", f"PartitionName={URGENT}", f"Nodes={nodes}", "PriorityTier=10")
    part = f"PartitionName={sandbox.partition}"
    _scontrol(sandbox, "update", part, f"GraceTime={grace}", f"PreemptMode={mode}")
    try:
        yield URGENT
    finally:
        _scontrol(sandbox, "update", part, "GraceTime=0", "PreemptMode=CANCEL")
        _scontrol(sandbox, "delete", f"PartitionName={URGENT}")


def preemptor(sandbox: SlurmSandbox, partition: str) -> JobSpec:
    """A native job of the higher tier that needs every node: the victims' too."""
    n = len(sandbox.external_nodes)
    return JobSpec(name="preemptor", partition=partition, min_nodes=n, tasks=n, exclusive=True)


@pytest.fixture(params=["CANCEL", "REQUEUE"])
def urgent(sandbox: SlurmSandbox, request: pytest.FixtureRequest) -> Iterator[str]:
    """The higher tier, with a GraceTime and each PreemptMode (CANCEL, REQUEUE)."""
    with higher_tier(sandbox, GRACE_SECONDS, request.param) as partition:
        yield partition


async def test_a_preempted_bridge_jobs_pod_stops_within_the_grace_and_the_preemptor_runs(
    sandbox: SlurmSandbox, tmp_path: Path, urgent: str
) -> None:
    async with running_bridge(sandbox, tmp_path, controller=True) as b:
        await b.create_pod("victim")
        await b.bound("victim")
        victim = job_of(await b.get_pod("victim"))
        await b.wait_for("the victim's containers to run", lambda: _running(b, "victim"))
        await b.wait_for("the controller to see the victim's job", lambda: _seen(b, victim))

        preempting = await b.slurm.submit(preemptor(sandbox, urgent))
        try:
            started = time.monotonic()
            seen: list[tuple[str, bool]] = []  # (Slurm's state, then: a container runs)

            async def stopped() -> bool:
                state = (await b.slurm.get_job(victim)).state.primary
                running = await _running(b, "victim")  # read after Slurm answered
                seen.append((state, running))
                return not running

            await b.wait_for("the victim's containers to stop", stopped, GRACE_SECONDS)
            took = time.monotonic() - started
            # Slurm never ended the job while a container ran (it held the nodes)
            assert all(state == "RUNNING" for state, running in seen if running), seen
            pod = await b.get_pod("victim")
            conds = {c["type"]: c for c in pod["status"].get("conditions") or []}
            cond = conds[CONDITION_DISRUPTION_TARGET]
            assert (cond["status"], cond["reason"]) == ("True", "SlurmJobPreempted")
            assert pod["status"]["phase"] == "Failed"

            async def preemptor_runs() -> bool:
                return (await b.slurm.get_job(preempting)).state.primary == "RUNNING"

            await b.wait_for("the preemptor to run", preemptor_runs, 60)
            # the bridge ended it once the containers stopped, before the grace ran out
            assert (await b.slurm.get_job(victim)).state.primary == "CANCELLED"
            print(f"preemption noticed and containers stopped {took:.2f} s after the submit")
        finally:
            await b.slurm.cancel(preempting)


async def _running(b: Bridge, name: str) -> bool:
    statuses = (await b.get_pod(name)).get("status", {}).get("containerStatuses") or []
    return any("running" in (c.get("state") or {}) for c in statuses)


async def _seen(b: Bridge, job_id: int) -> bool:
    return b.ctl is not None and job_id in b.ctl.poller.views
