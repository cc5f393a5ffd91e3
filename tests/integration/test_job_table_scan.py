"""Streamed reads of Slurm's whole job table, against the REAL slurmrestd (marker ``slurm``).

The table is first filled with finished (cancelled) jobs, as a busy site's is: the
scheduler's start-up sweep and the controller's dangling-job sweep must keep only the
active jobs of the bridge, never the whole table (the 734 MB start-up peak of issue #14).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from bridge.clock import SystemClock
from bridge.models import GroupId
from bridge.slurm import fetching
from bridge.slurm.client import SlurmClient
from bridge.slurm.fetching import state_requests
from bridge.slurm.models import SlurmJob
from bridge.translate.identity import admin_comment
from bridge.wellknown import LABEL_JOB_ID
from controller.runtime import Controller
from scheduler.cycle import Scheduler
from tests.bench.scheduler_child import CountingSlurmClient
from tests.bench.slurm_fill import fill_finished_jobs
from tests.clients import list_jobs
from tests.integration.bridge_harness import NS, Bridge, running_bridge
from tests.integration.conftest import SlurmSandbox
from tests.integration.controller_harness import controller_config, sandbox_kube, unique_mcs
from tests.integration.test_slurm_client import ext_spec
from tests.scheduler_caches import list_into

pytestmark = pytest.mark.slurm
FINISHED = 300

Track = Callable[[int], int]


@pytest.fixture
async def bridge(sandbox: SlurmSandbox, tmp_path: Path) -> AsyncIterator[Bridge]:
    async with running_bridge(sandbox, tmp_path) as b:
        yield b


def _bridge_comment(uid: str, mcs: str | None = None) -> str:
    group = GroupId(kind="Pod", namespace="slurm-bridge", name=f"p-{uid}", uid=uid)
    return admin_comment(group, [f"slurm-bridge/p-{uid}"], mcs)


async def _finished_and_active(
    slurm: SlurmClient, sandbox: SlurmSandbox, prefix: str, track_jobs: Track
) -> tuple[str, list[int], set[int]]:
    """FINISHED finished jobs and 2 active ones, all named ``<prefix>-<random>``."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    finished = await fill_finished_jobs(slurm, sandbox.partition, FINISHED, name=name)
    active = {track_jobs(await slurm.submit(ext_spec(sandbox, name))) for _ in range(2)}
    return name, finished, active


async def test_scan_jobs_keeps_only_the_active_jobs_asked_for_among_hundreds_finished(
    slurm: SlurmClient, sandbox: SlurmSandbox, track_jobs: Track
) -> None:
    name, finished, active = await _finished_and_active(slurm, sandbox, "scan", track_jobs)

    kept = await slurm.scan_jobs(lambda j: j.name == name and j.state.active)
    assert {j.job_id for j in kept} == active

    # The stream decodes every job exactly as the whole-table read does.
    everything = {j.job_id: j for j in await slurm.scan_jobs(lambda j: True)}
    whole = {j.job_id: j for j in (await list_jobs(slurm)).jobs}
    assert everything.keys() == whole.keys() >= set(finished) | active
    # (finished jobs do not change between the two reads; active ones may)
    assert [everything[j] for j in finished] == [whole[j] for j in finished]
    assert {everything[j].state.primary for j in finished} == {"CANCELLED"}


async def test_scan_job_states_keeps_the_active_rows_and_decodes_as_the_whole_list(
    slurm: SlurmClient, sandbox: SlurmSandbox, track_jobs: Track
) -> None:
    _, finished, active = await _finished_and_active(slurm, sandbox, "states", track_jobs)

    kept = await slurm.scan_job_states(lambda s: s.state.active)
    assert active <= {s.job_id for s in kept}
    assert not set(finished) & {s.job_id for s in kept}
    assert all(s.state.active for s in kept)
    # Refused by state before being built (the sweep's way): the same active rows.
    by_state = await slurm.scan_job_states(state=lambda s: s.active)
    assert active <= {s.job_id for s in by_state}
    assert not set(finished) & {s.job_id for s in by_state}
    assert all(s.state.active for s in by_state)
    # Every row decoded as the buffered whole-table read decodes it.
    streamed = {s.job_id: s.state for s in await slurm.scan_job_states(lambda s: True)}
    whole = {s.job_id: s.state for s in await slurm.list_job_states()}
    assert {j: streamed[j] for j in finished} == {j: whole[j] for j in finished}
    assert streamed.keys() >= set(finished) | active


async def test_sweep_indexes_the_active_job_of_a_group_not_its_finished_ones(
    bridge: Bridge, sandbox: SlurmSandbox, track_jobs: Track
) -> None:
    live, over = uuid.uuid4().hex, uuid.uuid4().hex
    slurm = bridge.sched.slurm
    part = sandbox.partition
    mcs = bridge.cfg.mcs_label  # the sweep adopts only this bridge's back-links
    await fill_finished_jobs(slurm, part, FINISHED, admin_comment=_bridge_comment(live, mcs))
    await fill_finished_jobs(slurm, part, 20, admin_comment=_bridge_comment(over, mcs))
    spec = ext_spec(sandbox, "sweep-live", admin_comment=_bridge_comment(live, mcs))
    job_id = track_jobs(await slurm.submit(spec))

    fresh = Scheduler(bridge.cfg, bridge.kube, slurm, SystemClock())

    await list_into(fresh, bridge.kube)
    await fresh.sweep()

    assert fresh.jobs_by_group_uid["slurm-bridge", live].job_id == job_id
    assert ("slurm-bridge", over) not in fresh.jobs_by_group_uid
    assert all(j.state.active for j in fresh.jobs_by_group_uid.values())


async def test_sweep_reads_only_the_active_jobs_no_pod_names_bound_or_listed(
    bridge: Bridge, sandbox: SlurmSandbox, track_jobs: Track
) -> None:
    await bridge.stop_scheduler()  # the pods below are this test's, bound or left unbound
    mcs = bridge.cfg.mcs_label
    uids = {k: uuid.uuid4().hex for k in ("bound", "listed", "unnamed")}
    jobs = {
        k: track_jobs(
            await bridge.slurm.submit(
                ext_spec(sandbox, f"sweep-{k}", priority=0, admin_comment=_bridge_comment(u, mcs))
            )
        )
        for k, u in uids.items()
    }
    for k in ("bound", "listed"):
        await bridge.create_pod(f"sweep-{k}", labels={LABEL_JOB_ID: str(jobs[k])})
    uid = (await bridge.get_pod("sweep-bound"))["metadata"]["uid"]
    await bridge.kube.bind_pod(NS, "sweep-bound", uid, sandbox.external_nodes[0])

    slurm = CountingSlurmClient.from_config(bridge.cfg)
    async with slurm:
        fresh = Scheduler(bridge.cfg, bridge.kube, slurm, SystemClock())
        await list_into(fresh, bridge.kube)
        # the pod watch's initial list: the unbound pod, cached
        await fresh.on_pod_event("ADDED", await bridge.get_pod("sweep-listed"))
        lists_done = asyncio.Event()
        lists_done.set()
        read: list[int] = []
        get_jobs = slurm.get_jobs

        async def counted(ids: Iterable[int], **kw: Any) -> list[SlurmJob]:
            read.extend(ids)
            return await get_jobs(ids, **kw)

        slurm.get_jobs = counted  # type: ignore[method-assign]
        await fresh.slurm_state.sweep_once(lists_done)

    # the labelled pods' jobs are known from their labels (the bound one's from a page
    # of the pods' metadata), never read; the job no pod names is read and indexed
    assert jobs["bound"] not in read
    assert jobs["listed"] not in read
    assert jobs["unnamed"] in read
    index = fresh.slurm_state.jobs_by_group_uid
    assert index[NS, uids["unnamed"]].job_id == jobs["unnamed"]
    assert (NS, uids["bound"]) not in index
    assert (NS, uids["listed"]) not in index


async def _held_jobs_of_ours(
    slurm: SlurmClient, sb: SlurmSandbox, mcs: str, pods: list[str], track: Track
) -> list[int]:
    """One held (pending, active) job of ours per pod name, each naming its pod."""
    out = []
    for name in pods:
        spec = ext_spec(
            sb, f"dangle-{name}", priority=0, mcs_label=mcs, admin_comment=_bridge_comment(name)
        )
        out.append(track(await slurm.submit(spec)))
    return out


async def test_controller_sweep_cancels_dangling_jobs_and_reads_each_job_once(
    sandbox: SlurmSandbox, track_jobs: Track
) -> None:
    mcs = unique_mcs()
    cfg = controller_config(sandbox, mcs)
    async with sandbox_kube(sandbox) as (_, kube), CountingSlurmClient.from_config(cfg) as slurm:
        await fill_finished_jobs(slurm, sandbox.partition, FINISHED)
        ghosts = [f"ghost-{uuid.uuid4().hex[:6]}-{i}" for i in range(3)]
        dangling = await _held_jobs_of_ours(slurm, sandbox, mcs, ghosts, track_jobs)
        ctl = Controller(cfg, slurm, kube)
        active = len([s for s in await slurm.list_job_states() if s.state.active])
        slurm.calls.clear()

        await ctl.sweep_once()

        states = {s.job_id: s.state.primary for s in await slurm.list_job_states(dangling)}
        assert set(states.values()) == {"CANCELLED"}
        assert slurm.calls["jobs_get"] == 0  # never the whole table
        # one read per active job no pod names (ours or not), one more each before cancelling
        assert slurm.calls["job_get"] <= active + len(dangling)

        slurm.calls.clear()
        await ctl.sweep_once()  # nothing new: one compact list, no job read
        assert slurm.calls["jobs_state"] == 1
        assert slurm.calls["jobs_get"] == slurm.calls["job_get"] == 0


async def test_job_states_of_many_ids_come_in_chunks_never_the_whole_table(
    sandbox: SlurmSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fetching, "STATE_IDS_PER_URL", 100)
    cfg = controller_config(sandbox, unique_mcs())
    async with CountingSlurmClient.from_config(cfg) as slurm:
        ids = await fill_finished_jobs(slurm, sandbox.partition, 250)
        slurm.calls.clear()
        states = await slurm.list_job_states(ids)
        assert sorted(s.job_id for s in states) == sorted(ids)
        assert slurm.calls["jobs_state"] == state_requests(len(ids)) == 3
