"""The scheduler end to end: real slurmrestd 26.05, the sandbox Kubernetes API server,
and the scheduler's loops running in this test's event loop (tests/integration/bridge_harness.py).

Waits poll the API with a deadline; nothing sleeps for a fixed time to "let it happen".
Every Slurm job a test causes is cancelled at teardown.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from bridge.clock import SystemClock
from bridge.kube.resources import EVENTS, PODGROUPS
from bridge.slurm.models import SlurmJob
from bridge.wellknown import ANNOTATION_SLURM_NODE, ANNOTATION_SPEC_HASH, FINALIZER, LABEL_JOB_ID
from scheduler.cycle import Scheduler
from tests.clients import list_jobs
from tests.integration.bridge_harness import (
    NS,
    Bridge,
    Sandboxes,
    create_podgroup,
    has_job,
    job_of,
    podgroup,
    running_bridge,
    running_sandboxes,
)
from tests.integration.conftest import SlurmSandbox, blocker_spec
from tests.integration.sched_proc import (
    binding_requests,
    electing_replicas,
    jobs_by_group_uid,
    successful_bindings,
)
from tests.scheduler_caches import list_into
from tests.workloads import load_example

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]


@pytest.fixture
async def sandboxes(sandbox: SlurmSandbox) -> AsyncIterator[Sandboxes]:
    async with running_sandboxes(sandbox) as sb:
        yield sb


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


async def test_podgroup_waits_for_slurm_resources_then_runs_when_the_first_finishes(
    bridge: Bridge, sandbox: SlurmSandbox
) -> None:
    assert len(sandbox.external_nodes) == 3, "the scenario needs the 3-node partition"
    first = await podgroup(bridge, "pg-1", 2, cpu="3", memory="500Mi")
    nodes = {await bridge.bound(n) for n in first}
    assert len(nodes) == 2  # exclusive: one pod per node
    job1 = job_of(await bridge.get_pod(first[0]))
    assert job_of(await bridge.get_pod(first[1])) == job1  # ONE Slurm job for the gang

    second = await podgroup(bridge, "pg-2", 2, cpu="3", memory="500Mi")

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


async def test_each_bound_pod_of_a_gang_gets_a_scheduled_event_naming_its_node(
    bridge: Bridge,
) -> None:
    names = await podgroup(bridge, "pg-ev", 2)
    nodes = {n: await bridge.bound(n) for n in names}

    async def scheduled() -> dict[str, str]:
        evs = (await bridge.kube.list(EVENTS, NS)).items
        said = {
            e["involvedObject"]["name"]: e.get("message", "")
            for e in evs
            if e.get("reason") == "Scheduled" and e.get("type") == "Normal"
        }
        return said if all(n in said for n in names) else {}

    said = await bridge.wait_for("a Scheduled event for each member", scheduled)
    for n in names:
        assert said[n] == f"Successfully assigned {NS}/{n} to {nodes[n]}"


async def test_incomplete_podgroup_waits_with_a_clear_condition(bridge: Bridge) -> None:
    await podgroup(bridge, "pg-half", 2, members=1)

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

    # the event is its own write, after the condition's: waited for, not read at once
    async def warned() -> bool:
        evs = (await bridge.kube.list(EVENTS, NS)).items
        return any(
            e.get("type") == "Warning"
            and e.get("reason") == "FailedScheduling"
            and "Invalid partition" in e.get("message", "")
            and e["involvedObject"]["name"] == "bad-part"
            for e in evs
        )

    await bridge.wait_for("the Warning event with Slurm's message", warned)


async def test_shared_pods_pack_onto_one_node(bridge: Bridge) -> None:
    names = await podgroup(
        bridge,
        "packed",
        3,
        annotations={
            "slurmjob.slinky.slurm.net/exclusive": "false",
            "slurmjob.slinky.slurm.net/max-nodes": "1",
        },
        cpu="2",
    )
    nodes = [await bridge.bound(n) for n in names]
    job = await bridge.slurm.get_job(job_of(await bridge.get_pod(names[0])))
    assert len(job.nodes) == 1  # Slurm packed the 3 tasks (2 CPUs each) onto one node
    assert set(nodes) == set(job.nodes)  # and the bridge bound all 3 pods there
    # one Binding request per pod: a bound pod is never bound again (no 409 retries)
    assert binding_requests(bridge.api.request_log) == dict.fromkeys(names, 1)


async def test_restarted_scheduler_makes_no_duplicate_job_and_binds_once(
    bridge: Bridge, sandbox: SlurmSandbox, track_jobs: Callable[[int], int]
) -> None:
    # Fill the partition so the group's job stays pending across the restart.
    blocker = track_jobs(await bridge.slurm.submit(blocker_spec(sandbox)))
    await bridge.create_pod("restart-me")

    async def pending_job() -> int:
        labels = (await bridge.get_pod("restart-me"))["metadata"].get("labels") or {}
        return int(labels.get(LABEL_JOB_ID) or 0)

    job_id = await bridge.wait_for("the pending job's label", pending_job)

    # A second scheduler starts from nothing but what Kubernetes and Slurm hold.
    fresh = Scheduler(bridge.cfg, bridge.kube, bridge.sched.slurm, SystemClock())
    await list_into(fresh, bridge.kube)
    await fresh.sweep()
    pod = await bridge.get_pod("restart-me")
    await fresh.on_pod_event("ADDED", pod)
    key = fresh.state.pod_group["slurm-bridge/restart-me"]
    await fresh.process(key)
    assert fresh.groups[key].job is not None
    assert fresh.groups[key].job.job_id == job_id  # found, not resubmitted

    jobs = await list_jobs(bridge.slurm)
    mine = [j for j in jobs.jobs if "slurm-bridge/restart-me" in j.admin_comment]
    assert [j.job_id for j in mine if j.state.active] == [job_id]

    await bridge.slurm.cancel(blocker)
    node = await bridge.bound("restart-me")
    assert node in sandbox.external_nodes


async def test_restarted_scheduler_confirms_a_pending_job_from_its_pods_without_reading_it(
    bridge: Bridge, sandbox: SlurmSandbox, track_jobs: Callable[[int], int]
) -> None:
    blocker = track_jobs(await bridge.slurm.submit(blocker_spec(sandbox)))
    await bridge.create_pod("kept")

    async def recorded() -> int:
        pod = await bridge.get_pod("kept")
        noted = ANNOTATION_SPEC_HASH in (pod["metadata"].get("annotations") or {})
        said = " is pending: " in await bridge.scheduled_message("kept")
        return job_of(pod) if has_job(pod) and noted and said else 0

    job_id = await bridge.wait_for("the pending job recorded on the pod", recorded)
    await bridge.stop_scheduler()
    reads: list[int] = []

    def count_reads(sched: Scheduler) -> None:
        # a copy of the scheduler's client, counting job reads, for every part that reads
        counting = copy.copy(sched.slurm)
        get_job = counting.get_job

        async def counted(jid: int) -> SlurmJob:
            reads.append(jid)
            return await get_job(jid)

        counting.get_job = counted  # type: ignore[method-assign]
        sched.slurm = sched.snapshots.slurm = sched.starter.slurm = counting
        sched.poller._slurm = counting

    await bridge.start_scheduler(count_reads)
    key = "Pod/slurm-bridge/kept"
    polled = bridge.sched.poller.calls
    await bridge.wait_for(
        "a few poller ticks", lambda: asyncio.sleep(0, bridge.sched.poller.calls > polled + 2)
    )
    group = bridge.sched.groups[key]
    assert group.job is not None
    assert group.job.job_id == job_id
    assert group.unread
    assert job_id not in reads  # still pending: the state list said so, it was not read

    await bridge.slurm.cancel(blocker)  # it starts: the poller reads it, and binds
    assert await bridge.bound("kept") in sandbox.external_nodes
    assert reads.count(job_id) == 1
    assert job_of(await bridge.get_pod("kept")) == job_id


def sweep_held_until(release: asyncio.Event) -> Callable[[Scheduler], None]:
    """A hook for :meth:`Bridge.start_scheduler`: its start-up sweep waits for ``release``."""

    def slow_sweep(sched: Scheduler) -> None:
        sweep_once = sched.slurm_state.sweep_once

        async def held(lists_done: asyncio.Event | None = None) -> None:
            await release.wait()
            await sweep_once(lists_done)

        sched.slurm_state.sweep_once = held  # type: ignore[method-assign]

    return slow_sweep


async def test_new_pod_is_bound_during_the_start_up_sweep_but_listed_ones_wait_for_it(
    bridge: Bridge,
) -> None:
    await bridge.stop_scheduler()
    await bridge.create_pod("listed")  # there at the restart: an earlier job may exist
    release = asyncio.Event()
    await bridge.start_scheduler(sweep_held_until(release))
    await bridge.create_pod("new")
    await podgroup(bridge, "late", 1)  # a new pod, but a PodGroup's uid outlives its pods
    assert await bridge.bound("new")
    for name in ("listed", "late-0"):
        assert not has_job(await bridge.get_pod(name))
    assert not bridge.sched.swept
    waiting = bridge.sched.slurm_state.after_sweep
    assert {"Pod/slurm-bridge/listed", "PodGroup/slurm-bridge/late"} <= waiting

    release.set()
    for name in ("listed", "late-0"):
        await bridge.bound(name)


async def test_restored_held_groups_wait_behind_the_sweep_and_new_pods_then_follow_their_job(
    sandbox: SlurmSandbox, tmp_path: Path, track_jobs: Callable[[int], int]
) -> None:
    # A held job (priority 0, which this site lets pods choose) recorded on its pod: the
    # restarted scheduler takes the job from that record after the start-up sweep, in the
    # work queue's idle lane, and never submits anew.
    allow_hold = {"allowPodPriority": True}
    async with running_bridge(sandbox, tmp_path, defaultNamespacePolicy=allow_hold) as bridge:
        await restored_held_group_waits_then_follows(bridge, track_jobs)


async def restored_held_group_waits_then_follows(
    bridge: Bridge, track_jobs: Callable[[int], int]
) -> None:
    await bridge.create_pod("held", annotations={"slurmjob.slinky.slurm.net/priority": "0"})

    async def recorded() -> int:
        pod = await bridge.get_pod("held")
        noted = ANNOTATION_SPEC_HASH in (pod["metadata"].get("annotations") or {})
        said = "JobHeld" in await bridge.scheduled_message("held")
        return job_of(pod) if has_job(pod) and noted and said else 0

    job_id = track_jobs(await bridge.wait_for("the held job recorded on the pod", recorded))
    await bridge.stop_scheduler()
    release = asyncio.Event()
    await bridge.start_scheduler(sweep_held_until(release))
    await bridge.create_pod("new")
    assert await bridge.bound("new")  # not behind the restored group
    key = "Pod/slurm-bridge/held"
    assert key in bridge.sched.slurm_state.restored_held
    assert bridge.sched.groups[key].job is None  # not processed yet
    assert job_id not in set(bridge.sched.poller.watched)

    release.set()

    async def followed() -> bool:
        g = bridge.sched.groups.get(key)
        return g is not None and g.job is not None and job_id in set(bridge.sched.poller.watched)

    await bridge.wait_for("the restored group following its held job", followed)
    assert bridge.sched.groups[key].job.job_id == job_id  # type: ignore[union-attr]
    assert not bridge.sched.slurm_state.restored_held
    jobs = await list_jobs(bridge.slurm)
    mine = [j for j in jobs.jobs if "slurm-bridge/held" in j.admin_comment and j.state.active]
    assert [j.job_id for j in mine] == [job_id]  # no second job
    assert job_of(await bridge.get_pod("held")) == job_id


async def test_lws_leader_goes_to_the_first_node_of_slurms_allocation_workers_in_order(
    bridge: Bridge, sandbox: SlurmSandbox
) -> None:
    assert len(sandbox.external_nodes) >= 3, "a LWS group of 3 needs 3 nodes"
    # Workers first, leader last: the order comes from the worker index, not from arrival.
    await bridge.create_workload(load_example("lws"), pods_reversed=True)
    in_order = ["lws-1-0", "lws-1-0-1", "lws-1-0-2"]  # worker index 0 (leader), 1, 2
    placed = [await bridge.bound(n) for n in in_order]
    jobs = {job_of(await bridge.get_pod(n)) for n in in_order}
    assert len(jobs) == 1, "one Slurm job for the LWS group"
    job = await bridge.slurm.get_job(jobs.pop())
    assert job.name == "lws-1-0"
    assert len(job.nodes) == 3
    assert placed == list(job.nodes)  # leader on Slurm's first node, workers in order


async def test_indexed_job_packs_completion_indexes_in_slurms_node_order(
    bridge: Bridge,
) -> None:
    # 4 completions on a 3-node partition: shared, 3 CPUs per pod on 8-CPU nodes, so
    # Slurm places 2 tasks on each of 2 nodes (or as it likes: the test reads Slurm's own
    # allocation and expects index order over it).
    manifests = load_example("indexed-job")
    tmpl = manifests[0]["spec"]["template"]
    tmpl.setdefault("metadata", {})["annotations"] = {
        "slurmjob.slinky.slurm.net/exclusive": "false"
    }
    tmpl["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3"
    await bridge.create_workload(manifests, pods_reversed=True)
    by_index = [f"indexed-1-{i}-x{i}" for i in range(4)]
    placed = [await bridge.bound(n) for n in by_index]
    jobs = {job_of(await bridge.get_pod(n)) for n in by_index}
    assert len(jobs) == 1, "one Slurm job for the Indexed Job"
    job = await bridge.slurm.get_job(jobs.pop())
    assert job.cpus_per_task == 3
    per_node = {a.name: (a.cpus or 0) // 3 for a in job.allocation}
    assert sum(per_node.values()) == 4, f"Slurm placed 4 tasks: {job.allocation}"
    # Completion index i takes the i-th task slot, walking Slurm's nodes in Slurm's order.
    slots = [n for n in job.nodes for _ in range(per_node[n])]
    assert placed == slots


async def test_leader_failover_after_sigkill_binds_new_pods_once_without_double_submission(
    sandboxes: Sandboxes, sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    sb = sandboxes
    lease = 3.0
    a, b = await electing_replicas(sb.kube, sandbox, tmp_path, lease)
    try:
        a.start()
        await a.wait_ready()  # a leads
        b.start()  # b stands by: it must not schedule while a leads
        await sb.create_pod("before-0")
        await sb.bound("before-0")
        await create_podgroup(sb, "fo-pg", 2)
        await sb.slurm.cancel(job_of(await sb.get_pod("before-0")))  # free its node
        assert not b.ready(), "the standby replica must not run the scheduler"

        loop = asyncio.get_running_loop()
        a.kill()  # SIGKILL: no lease release
        killed_at = loop.time()
        after = ["after-0", "fo-pg-0", "fo-pg-1"]
        await sb.create_pod("after-0")
        for n in after[1:]:
            await sb.create_pod(n, labels={"scheduling.x-k8s.io/pod-group": "fo-pg"})
        await b.wait_ready(deadline=lease * 10)
        takeover = loop.time() - killed_at
        print(f"takeover after SIGKILL: {takeover:.2f} s (lease {lease} s)")
        for n in after:
            await sb.bound(n)
        assert len({job_of(await sb.get_pod(n)) for n in after[1:]}) == 1  # one gang job

        pods = {p["metadata"]["name"]: p for p in (await sb.kube.list_pods(NS)).items}
        groups = [pods[n]["metadata"]["uid"] for n in ("before-0", "after-0")]
        groups.append((await sb.kube.get(PODGROUPS, "fo-pg", NS))["metadata"]["uid"])
        by_uid = jobs_by_group_uid((await list_jobs(sb.slurm)).jobs)
        assert {uid: len(by_uid.get(uid, [])) for uid in groups} == dict.fromkeys(groups, 1)
        assert successful_bindings(sb.api.request_log) == dict.fromkeys(pods, 1)
    finally:
        a.kill()
        await b.stop()


async def test_scheduler_restarted_mid_bind_binds_the_rest_of_the_gang(bridge: Bridge) -> None:
    # The binding of mid-1 fails until the scheduler is gone: it stops between the two.
    fault = bridge.api.inject_fault(r"/pods/mid-1/binding$", method="POST", count=None)
    await podgroup(bridge, "mid", 2)
    first = await bridge.bound("mid-0")
    await bridge.wait_for("a failed binding of mid-1", lambda: asyncio.sleep(0, fault.hits))
    await bridge.stop_scheduler()
    bridge.api.clear_faults()

    await bridge.start_scheduler()  # sees mid-1 only: the group looks incomplete
    second = await bridge.bound("mid-1")
    job = await bridge.slurm.get_job(job_of(await bridge.get_pod("mid-0")))
    assert job_of(await bridge.get_pod("mid-1")) == job.job_id
    assert [first, second] == list(job.nodes)
    assert successful_bindings(bridge.api.request_log) == {"mid-0": 1, "mid-1": 1}
