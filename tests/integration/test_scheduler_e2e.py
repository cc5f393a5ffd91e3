"""The scheduler end to end: real slurmrestd 26.05, the sandbox Kubernetes API server,
and the scheduler's loops running in this test's event loop (tests/integration/bridge_harness.py).

Waits poll the API with a deadline; nothing sleeps for a fixed time to "let it happen".
Every Slurm job a test causes is cancelled at teardown.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from bridge.clock import SystemClock
from bridge.kube.resources import EVENTS, PODGROUPS
from bridge.wellknown import ANNOTATION_SLURM_NODE, FINALIZER, LABEL_JOB_ID
from scheduler.core import Scheduler
from tests.integration.bridge_harness import NS, Bridge, job_of, running_bridge
from tests.integration.conftest import SlurmSandbox

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]


@pytest.fixture
async def bridge(sandbox: SlurmSandbox, tmp_path: Path) -> AsyncIterator[Bridge]:
    async with running_bridge(sandbox, tmp_path) as b:
        yield b


async def test_single_pod_gets_a_running_placeholder_job_and_is_bound(bridge: Bridge) -> None:
    await bridge.create_pod("solo")
    node = await bridge.bound("solo")
    p = await bridge.get_pod("solo")
    job = await bridge.slurm.get_job(job_of(p))
    assert job.state.primary == "RUNNING"
    assert job.external
    assert list(job.nodes) == [node]
    assert p["metadata"]["annotations"][ANNOTATION_SLURM_NODE] == node
    assert FINALIZER in p["metadata"]["finalizers"]
    assert job.name == "solo"
    assert "slurm-bridge/solo" in job.admin_comment


async def podgroup(bridge: Bridge, name: str, size: int) -> list[str]:
    await bridge.kube.create(
        PODGROUPS,
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": {"minMember": size},
        },
        NS,
    )
    names = [f"{name}-{i}" for i in range(size)]
    for n in names:
        await bridge.create_pod(
            n, labels={"scheduling.x-k8s.io/pod-group": name}, cpu="3", memory="500Mi"
        )
    return names


async def test_podgroup_waits_for_slurm_resources_then_runs_when_the_first_finishes(
    bridge: Bridge, sandbox: SlurmSandbox
) -> None:
    assert len(sandbox.external_nodes) == 3, "the scenario needs the 3-node partition"
    first = await podgroup(bridge, "pg-1", 2)
    nodes = {await bridge.bound(n) for n in first}
    assert len(nodes) == 2  # exclusive: one pod per node
    job1 = job_of(await bridge.get_pod(first[0]))
    assert job_of(await bridge.get_pod(first[1])) == job1  # ONE Slurm job for the gang

    second = await podgroup(bridge, "pg-2", 2)

    async def waits_on_resources() -> str:
        msg = await bridge.scheduled_message(second[0])
        return msg if "Resources" in msg else ""

    msg = await bridge.wait_for("pg-2 to show Slurm's reason", waits_on_resources)
    assert msg.startswith("False Unschedulable: Slurm job ")
    assert not ((await bridge.get_pod(second[0])).get("spec") or {}).get("nodeName")

    await bridge.slurm.cancel(job1)  # the first group finishes
    for n in second:
        await bridge.bound(n)
    job2 = job_of(await bridge.get_pod(second[0]))
    assert job2 != job1


async def test_incomplete_podgroup_waits_with_a_clear_condition(bridge: Bridge) -> None:
    await bridge.kube.create(
        PODGROUPS,
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "pg-half"},
            "spec": {"minMember": 2},
        },
        NS,
    )
    await bridge.create_pod("pg-half-0", labels={"scheduling.x-k8s.io/pod-group": "pg-half"})

    async def waiting() -> str:
        msg = await bridge.scheduled_message("pg-half-0")
        return msg if "1 of 2" in msg else ""

    await bridge.wait_for("the incomplete-group condition", waiting)
    assert LABEL_JOB_ID not in (await bridge.get_pod("pg-half-0"))["metadata"]["labels"]


async def test_rejected_job_gives_a_warning_event_with_slurms_message(bridge: Bridge) -> None:
    await bridge.create_pod(
        "bad-part", annotations={"slurmjob.slinky.slurm.net/partition": "no-such-partition"}
    )

    async def rejected() -> str:
        msg = await bridge.scheduled_message("bad-part")
        return msg if "Invalid partition" in msg else ""

    await bridge.wait_for("Slurm's rejection on the pod", rejected)
    evs = (await bridge.kube.list(EVENTS, NS)).items
    assert any(
        e.get("type") == "Warning"
        and e.get("reason") == "FailedScheduling"
        and "Invalid partition" in e.get("message", "")
        and e["involvedObject"]["name"] == "bad-part"
        for e in evs
    )


async def test_shared_pods_pack_onto_one_node(bridge: Bridge) -> None:
    await bridge.kube.create(
        PODGROUPS,
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {
                "name": "packed",
                "annotations": {
                    "slurmjob.slinky.slurm.net/exclusive": "false",
                    "slurmjob.slinky.slurm.net/max-nodes": "1",
                },
            },
            "spec": {"minMember": 3},
        },
        NS,
    )
    names = [f"packed-{i}" for i in range(3)]
    for n in names:
        await bridge.create_pod(n, labels={"scheduling.x-k8s.io/pod-group": "packed"}, cpu="2")
    nodes = [await bridge.bound(n) for n in names]
    job = await bridge.slurm.get_job(job_of(await bridge.get_pod(names[0])))
    assert len(job.nodes) == 1  # Slurm packed the 3 tasks (2 CPUs each) onto one node
    assert set(nodes) == set(job.nodes)  # and the bridge bound all 3 pods there


async def test_restarted_scheduler_makes_no_duplicate_job_and_binds_once(
    bridge: Bridge, sandbox: SlurmSandbox, track_jobs: Callable[[int], int]
) -> None:
    # Fill the partition so the group's job stays pending across the restart.
    from bridge.models import JobSpec

    blocker = track_jobs(
        await bridge.slurm.submit(
            JobSpec(
                name="blocker",
                partition=sandbox.partition,
                min_nodes=len(sandbox.external_nodes),
                tasks=len(sandbox.external_nodes),
                tasks_per_node=1,
                memory_per_node_mib=100,
            )
        )
    )
    await bridge.create_pod("restart-me")

    async def pending_job() -> int:
        labels = (await bridge.get_pod("restart-me"))["metadata"].get("labels") or {}
        return int(labels.get(LABEL_JOB_ID) or 0)

    job_id = await bridge.wait_for("the pending job's label", pending_job)

    # A second scheduler starts from nothing but what Kubernetes and Slurm hold.
    fresh = Scheduler(bridge.cfg, bridge.kube, bridge.sched.slurm, SystemClock())
    await fresh.sweep()
    pod = await bridge.get_pod("restart-me")
    await fresh.on_pod_event("ADDED", pod)
    key = fresh.pod_group["slurm-bridge/restart-me"]
    await fresh.process(key)
    assert fresh.groups[key].job is not None
    assert fresh.groups[key].job.job_id == job_id  # found, not resubmitted

    jobs = await bridge.slurm.list_jobs()
    mine = [j for j in jobs.jobs if "slurm-bridge/restart-me" in j.admin_comment]
    assert [j.job_id for j in mine if j.state.active] == [job_id]

    await bridge.slurm.cancel(blocker)
    node = await bridge.bound("restart-me")
    assert node in sandbox.external_nodes
