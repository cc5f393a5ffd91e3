"""SlurmClient against the REAL slurmrestd 26.05 sandbox (marker ``slurm``).

Partition and node names come from the sandbox env file; every job created is
cancelled at teardown (``track_jobs``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import pytest

from bridge import loops
from bridge.clock import SystemClock
from bridge.errors import SlurmNotFound, SlurmRejected, SlurmUnauthorized
from bridge.models import JobSpec
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import ALLOCATE_MARK, Allocated, AllocationRefused, SlurmJob
from tests.clients import api_version, list_jobs
from tests.integration.conftest import SlurmSandbox, make_client

pytestmark = pytest.mark.slurm
Track = Callable[[int], int]
DEADLINE_S = 30.0


async def wait_job(
    slurm: SlurmClient, job_id: int, pred: Callable[[SlurmJob], bool], what: str
) -> SlurmJob:
    clock = SystemClock()
    end = clock.monotonic() + DEADLINE_S
    while True:
        job = await slurm.get_job(job_id)
        if pred(job):
            return job
        if clock.monotonic() > end:
            pytest.fail(
                f"job {job_id} not {what} within {DEADLINE_S}s: {job.state} {job.state_reason}"
            )
        await clock.sleep(0.2)


def running(j: SlurmJob) -> bool:
    return j.state.primary == "RUNNING"


def ext_spec(sb: SlurmSandbox, name: str, **kw: object) -> JobSpec:
    base: dict[str, object] = {
        "name": name,
        "partition": sb.partition,
        "min_nodes": 1,
        "tasks": 1,
        "memory_per_node_mib": 500,
        "time_limit_minutes": 10,
        "admin_comment": f'{{"test":"{name}"}}',
    }
    base.update(kw)
    return JobSpec.model_validate(base)


async def test_external_job_runs_on_external_nodes_with_its_node_list(
    slurm: SlurmClient, sandbox: SlurmSandbox, track_jobs: Track
) -> None:
    job_id = track_jobs(await slurm.submit(ext_spec(sandbox, "it-ext-2n", min_nodes=2, tasks=2)))
    job = await wait_job(slurm, job_id, running, "RUNNING")
    assert job.external
    assert len(job.nodes) == 2
    assert set(job.nodes) <= set(sandbox.external_nodes)
    assert job.partition == sandbox.partition


async def test_two_shared_jobs_share_one_node_exclusive_ones_do_not(
    slurm: SlurmClient, sandbox: SlurmSandbox, track_jobs: Track
) -> None:
    target, others = sandbox.external_nodes[0], sandbox.external_nodes[1:]
    pinned = {"excluded_nodes": others, "cpus_per_task": 1}
    a = track_jobs(await slurm.submit(ext_spec(sandbox, "it-shared-a", exclusive=False, **pinned)))
    b = track_jobs(await slurm.submit(ext_spec(sandbox, "it-shared-b", exclusive=False, **pinned)))
    ja = await wait_job(slurm, a, running, "RUNNING")
    jb = await wait_job(slurm, b, running, "RUNNING")
    assert ja.nodes == jb.nodes == (target,)
    await slurm.cancel(a)
    await slurm.cancel(b)
    x = track_jobs(await slurm.submit(ext_spec(sandbox, "it-excl-x", **pinned)))
    y = track_jobs(await slurm.submit(ext_spec(sandbox, "it-excl-y", **pinned)))
    jx = await wait_job(slurm, x, running, "RUNNING")
    assert jx.nodes == (target,)
    assert jx.cpus == sandbox.node_cpus
    jy = await wait_job(slurm, y, lambda j: j.state_reason == "Resources", "pending on Resources")
    assert jy.state.primary == "PENDING"
    assert jy.nodes == ()


async def test_cpu_memory_and_gpu_requests_are_honoured(
    slurm: SlurmClient, sandbox: SlurmSandbox, track_jobs: Track
) -> None:
    spec = ext_spec(
        sandbox,
        "it-res",
        exclusive=False,
        cpus_per_task=2,
        memory_per_node_mib=1234,
        tres_per_node="gres/gpu:1",
    )
    job = await wait_job(slurm, track_jobs(await slurm.submit(spec)), running, "RUNNING")
    tres = job.tres_alloc()
    assert tres["cpu"] == "2"
    assert tres["mem"] == "1234M"
    assert job.allocation[0].memory_mib == 1234
    assert job.allocation[0].cpus == 2
    assert job.tres_per_node == "gres/gpu:1"
    assert any("gpu" in g and "CNT:1" in g for g in job.gres_detail), job.gres_detail


@pytest.mark.parametrize("slurmd", [False, True], ids=["external-node", "slurmd-node"])
async def test_job_resources_give_core_bitmap_and_gres_indices_only_where_slurmd_runs(
    slurm: SlurmClient, sandbox: SlurmSandbox, track_jobs: Track, slurmd: bool
) -> None:
    partition = sandbox.batch_partition if slurmd else sandbox.partition
    spec = ext_spec(
        sandbox,
        "it-layout",
        partition=partition,
        exclusive=False,
        cpus_per_task=3,
        tres_per_node="gres/gpu:1",
    )
    job_id = track_jobs(await slurm.submit(spec))
    job = await wait_job(slurm, job_id, running, "RUNNING")
    (res,) = await slurm.get_job_resources(job_id)
    assert res.node == job.nodes[0]
    assert len(res.cores) == 3
    assert all(0 <= c < sandbox.node_cpus for c in res.cores)
    (gres,) = res.gres
    assert (gres.name, gres.count) == ("gpu", 1)
    if slurmd:
        assert gres.indices is not None
        assert len(gres.indices) == 1
    else:
        assert gres.indices is None  # Slurm counts GPUs on external nodes, never picks them


async def test_job_pends_on_a_full_partition_with_reason_resources(
    slurm: SlurmClient, sandbox: SlurmSandbox, track_jobs: Track
) -> None:
    n = len(sandbox.external_nodes)
    full = track_jobs(await slurm.submit(ext_spec(sandbox, "it-full", min_nodes=n, tasks=n)))
    await wait_job(slurm, full, running, "RUNNING")
    waiting = track_jobs(await slurm.submit(ext_spec(sandbox, "it-waiting")))
    job = await wait_job(slurm, waiting, lambda j: j.state_reason == "Resources", "Resources")
    assert job.state.primary == "PENDING"


async def test_cancel_is_idempotent_and_unknown_id_is_not_found(
    slurm: SlurmClient, sandbox: SlurmSandbox, track_jobs: Track
) -> None:
    job_id = track_jobs(await slurm.submit(ext_spec(sandbox, "it-cancel")))
    assert await slurm.cancel(job_id) is True
    job = await wait_job(slurm, job_id, lambda j: not j.state.active, "ended")
    assert job.state.primary == "CANCELLED"
    assert await slurm.cancel(job_id) is False  # already done: success, not an error
    with pytest.raises(SlurmNotFound):
        await slurm.cancel(999_999_999)


async def test_update_pending_job(
    slurm: SlurmClient, sandbox: SlurmSandbox, track_jobs: Track
) -> None:
    n = len(sandbox.external_nodes) + 1  # more nodes than exist: accepted, pends forever
    spec = ext_spec(sandbox, "it-update", min_nodes=n, tasks=n)
    job_id = track_jobs(await slurm.submit(spec))
    await slurm.update_job(
        job_id, spec.model_copy(update={"comment": "updated", "time_limit_minutes": 7})
    )
    job = await slurm.get_job(job_id)
    assert job.comment == "updated"
    assert job.time_limit_minutes == 7


async def test_drain_and_resume_a_node(slurm: SlurmClient, sandbox: SlurmSandbox) -> None:
    name = sandbox.external_nodes[-1]
    try:
        await slurm.drain_node(name, "slurm-bridge test drain")
        node = await slurm.get_node(name)
        assert node.drain
        assert node.reason == "slurm-bridge test drain"
    finally:
        await slurm.resume_node(name)
    assert not (await slurm.get_node(name)).drain


async def test_create_and_delete_an_external_node(slurm: SlurmClient) -> None:
    name = "it-dyn-node-0"
    with contextlib.suppress(SlurmNotFound):
        await slurm.delete_node(name)
    await slurm.create_external_node(name, cpus=4, memory_mib=4000, features=["slurm-bridge"])
    try:
        node = await slurm.get_node(name)
        assert node.external
        assert node.cpus == 4
        assert node.real_memory_mib == 4000
        assert "slurm-bridge" in node.features
    finally:
        await slurm.delete_node(name)
    with pytest.raises(SlurmNotFound):
        await slurm.get_node(name)


@pytest.mark.parametrize(
    ("changes", "number"),
    [
        pytest.param({"partition": "no-such-partition"}, 2000, id="bad-partition"),
        pytest.param({"memory_per_node_mib": 10_000_000}, 2014, id="too-much-memory"),
        pytest.param({"tres_per_node": "gres/gpu:64"}, 2014, id="too-many-gpus"),
    ],
)
async def test_rejected_submit_carries_slurms_number_and_message(
    slurm: SlurmClient, sandbox: SlurmSandbox, changes: dict[str, object], number: int
) -> None:
    with pytest.raises(SlurmRejected) as e:
        await slurm.submit(ext_spec(sandbox, "it-bad").model_copy(update=changes))
    assert e.value.error_number == number
    assert e.value.slurm_message
    assert e.value.status == 422


async def test_bad_token_is_unauthorized(sandbox: SlurmSandbox, tmp_path: Path) -> None:
    bad = tmp_path / "jwt"
    bad.write_text("eyJhbGciOiJIUzI1NiJ9.eyJzdW4iOiJzbHVybSJ9.bm90LWEtc2lnbmF0dXJl")
    async with make_client(sandbox, "v0.0.45", jwt_file=bad) as client:
        with pytest.raises(SlurmUnauthorized) as e:
            await list_jobs(client)
    assert e.value.status in (401, 511)


async def test_find_jobs_by_admin_comment_finds_a_submitted_job(
    slurm: SlurmClient, sandbox: SlurmSandbox, track_jobs: Track
) -> None:
    spec = ext_spec(sandbox, "it-find", admin_comment='{"group":"uid-it-find-1"}')
    job_id = track_jobs(await slurm.submit(spec))
    found = await slurm.find_jobs_by_admin_comment('{"group":"uid-it-find-1"}')
    assert [j.job_id for j in found] == [job_id]


async def test_job_states_lists_a_submitted_job(
    slurm: SlurmClient, sandbox: SlurmSandbox, track_jobs: Track
) -> None:
    job_id = track_jobs(await slurm.submit(ext_spec(sandbox, "it-states")))
    states = {s.job_id: s.state for s in await slurm.list_job_states()}
    assert states[job_id].primary in ("PENDING", "RUNNING")


async def test_partitions_and_nodes_match_the_sandbox(
    slurm: SlurmClient, sandbox: SlurmSandbox
) -> None:
    part = await slurm.get_partition(sandbox.partition)
    assert part.nodes == sandbox.external_nodes
    batch = await slurm.get_partition(sandbox.batch_partition)
    assert batch.nodes == sandbox.slurmd_nodes
    names = {n.name for n in await slurm.list_nodes()}
    assert set(sandbox.external_nodes) | set(sandbox.slurmd_nodes) <= names
    assert {p.name for p in await slurm.list_partitions()} >= {part.name, batch.name}


@pytest.mark.parametrize("version", ["v0.0.43", "v0.0.44", "v0.0.45"])
async def test_each_api_version_can_submit_get_and_cancel(
    sandbox: SlurmSandbox, version: str
) -> None:
    async with make_client(sandbox, version) as client:
        assert await api_version(client) == version
        job_id = await client.submit(ext_spec(sandbox, f"it-{version}"))
        try:
            job = await client.get_job(job_id)
            assert job.job_id == job_id
            assert job.name == f"it-{version}"
        finally:
            assert await client.cancel(job_id) is True


async def test_auto_version_picks_the_newest(slurm: SlurmClient) -> None:
    assert await api_version(slurm) == "v0.0.45"


async def test_batch_job_runs_on_slurmd_nodes(
    slurm: SlurmClient, sandbox: SlurmSandbox, track_jobs: Track
) -> None:
    spec = ext_spec(
        sandbox,
        "it-batch",
        partition=sandbox.batch_partition,
        external=False,
        script="#!/bin/sh\nexec sleep 300\n",
    )
    job = await wait_job(slurm, track_jobs(await slurm.submit(spec)), running, "RUNNING")
    assert job.batch
    assert not job.external
    assert set(job.nodes) <= set(sandbox.slurmd_nodes)


async def test_job_states_of_chosen_ids_returns_exactly_those_jobs(
    slurm: SlurmClient, sandbox: SlurmSandbox, track_jobs: Track
) -> None:
    # Regression: a CSV job_id list makes slurmrestd 26.05 answer HTTP 500; the client
    # sends one job_id parameter per id. Unknown ids are simply absent.
    a = track_jobs(await slurm.submit(ext_spec(sandbox, "it-states-a")))
    b = track_jobs(await slurm.submit(ext_spec(sandbox, "it-states-b")))
    c = track_jobs(await slurm.submit(ext_spec(sandbox, "it-states-c")))
    got = {s.job_id for s in await slurm.list_job_states([a, c, 999_999_999])}
    assert got == {a, c}
    assert b not in got


def alloc_spec(sb: SlurmSandbox, name: str, **kw: object) -> JobSpec:
    """An external job asked to start at once, its comment marked as such (the bridge's way)."""
    return ext_spec(sb, name, comment=f"it {ALLOCATE_MARK}", **kw)


async def fill_partition(slurm: SlurmClient, sb: SlurmSandbox, track: Track) -> list[int]:
    """One whole-node job per external node, each started at once."""
    ids = []
    for i in range(len(sb.external_nodes)):
        got = await slurm.allocate(alloc_spec(sb, f"it-fill-{i}", cpus_per_task=sb.node_cpus))
        assert isinstance(got, Allocated), got
        ids.append(track(got.job_id))
    return ids


async def test_allocate_starts_an_external_job_before_it_answers(
    slurm: SlurmClient, sandbox: SlurmSandbox, track_jobs: Track
) -> None:
    got = await slurm.allocate(alloc_spec(sandbox, "it-alloc", min_nodes=2, tasks=2))
    assert isinstance(got, Allocated)
    job = await slurm.get_job(track_jobs(got.job_id))  # no waiting: RUNNING already
    assert job.state.primary == "RUNNING"
    assert len(job.nodes) == 2
    assert job.admin_comment == '{"test":"it-alloc"}'
    assert ALLOCATE_MARK in job.comment.split()
    assert not job.refused_allocation


async def test_allocate_on_a_full_partition_is_refused_and_its_failed_record_is_no_job(
    slurm: SlurmClient, sandbox: SlurmSandbox, track_jobs: Track
) -> None:
    await fill_partition(slurm, sandbox, track_jobs)
    got = await slurm.allocate(alloc_spec(sandbox, "it-refused"))
    assert isinstance(got, AllocationRefused)
    assert got.error_number == 2016
    # What the refused try left behind: a FAILED record with the identity it was given ...
    left = await slurm.find_jobs_by_admin_comment('{"test":"it-refused"}', active_only=False)
    assert [j.state.primary for j in left] == ["FAILED"]
    assert left[0].refused_allocation
    assert left[0].nodes == ()
    # ... which the lookup by identity (after a lost answer) never returns as the job.
    assert await slurm.find_jobs_by_admin_comment('{"test":"it-refused"}') == ()


async def test_allocate_never_overtakes_a_job_pending_in_the_partition(
    slurm: SlurmClient, sandbox: SlurmSandbox, track_jobs: Track
) -> None:
    fillers = await fill_partition(slurm, sandbox, track_jobs)
    first = track_jobs(
        await slurm.submit(ext_spec(sandbox, "it-first", cpus_per_task=sandbox.node_cpus))
    )
    await wait_job(slurm, first, lambda j: j.state.primary == "PENDING", "PENDING")
    await slurm.cancel(fillers[0])  # room for one job: the pending one's
    got = await slurm.allocate(alloc_spec(sandbox, "it-late", cpus_per_task=sandbox.node_cpus))
    assert isinstance(got, AllocationRefused)  # 2013 (insufficient priority) or 2016 (busy)
    assert got.error_number in (2013, 2016)
    await wait_job(slurm, first, running, "RUNNING")


def test_slurmrestds_openapi_document_is_read_on_the_components_loop(
    sandbox: SlurmSandbox,
) -> None:
    """The OpenAPI document (~0.9 MB) is bigger than aiohttp's read buffer: the connection
    pauses, and aiohttp resumes its parser with an empty ``data_received``, which the
    doubled-response filter (bridge.slurm.transport) used to swallow; on uvloop, the loop
    the components run on (bridge.loops.run), the read then waited for its timeout."""

    async def version() -> str:
        async with make_client(sandbox, request_timeout_seconds=5) as client:
            return (await client.codec()).version

    assert loops.run(version()).startswith("v0.0.")


async def test_a_pending_jobs_whole_node_ask_is_read_in_a_version_that_reports_it(
    slurm: SlurmClient, sandbox: SlurmSandbox, track_jobs: Track
) -> None:
    # v0.0.45's job record reads shared [] for every job (measured on 26.05); the bridge's
    # plan of Slurm's queue reads the job table in a version that still says "none"
    held = {"priority": 0, "exclusive": True}
    x = track_jobs(await slurm.submit(ext_spec(sandbox, "it-share-excl", **held)))
    s = track_jobs(
        await slurm.submit(ext_spec(sandbox, "it-share-shared", priority=0, exclusive=False))
    )
    listed = {
        j.job_id: j for j in await slurm.scan_jobs(lambda j: j.job_id in (x, s), sharing=True)
    }
    assert "none" in listed[x].shared
    assert "none" not in listed[s].shared
    codec = await slurm.sharing_codec()
    assert codec.reports_shared or codec is await slurm.codec()
