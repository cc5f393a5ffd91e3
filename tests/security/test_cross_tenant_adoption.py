"""No tenant reaches another tenant's Slurm job through a uid (issue #30, findings 1 and
9): REAL Slurm sandbox, the project's sandbox API server, a scheduler restarted from
nothing but what Kubernetes and Slurm hold.

A pod's ownerReference uid is its own text (Kubernetes checks only that it is not empty),
so a bare pod in team-b may carry team-a's LeaderWorkerSet uid, or name a PodGroup that
does not exist. The restarted scheduler must never adopt team-a's job for it (no update,
no cancel, no binding), never take a job whose back-link has no uid, and never build
team-b's job from team-a's objects. A job restored from forged pod records is read and
checked before anything but leaving it pending.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from bridge.clock import SystemClock
from bridge.errors import KubeForbidden
from bridge.kube.client import KubeClient
from bridge.kube.resources import EVENTS, JOBS, LEADERWORKERSETS, NAMESPACES, PODS
from bridge.models import GroupId, JobSpec
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import SlurmJob
from bridge.translate import TranslateSettings, admin_comment, translate_group
from bridge.wellknown import (
    ANNOTATION_LWS_SIZE,
    ANNOTATION_SPEC_HASH,
    API_LWS,
    LABEL_JOB_ID,
    LABEL_LWS_GROUP_INDEX,
    LABEL_LWS_NAME,
    LABEL_LWS_WORKER_INDEX,
    LABEL_POD_GROUP,
    REASON_FOREIGN_JOB_LABEL,
)
from scheduler.cycle import Scheduler
from tests.clients import list_jobs
from tests.integration.bridge_harness import (
    NS,
    Bridge,
    has_job,
    job_of,
    pod,
    podgroup,
    running_bridge,
)
from tests.integration.conftest import SlurmSandbox, blocker_spec, native_held_spec
from tests.integration.controller_harness import wait_for
from tests.scheduler_caches import list_into

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]

TEAM_A, TEAM_B = "team-a", "team-b"


@contextlib.asynccontextmanager
async def tenants(sandbox: SlurmSandbox, tmp_path: Path) -> AsyncIterator[Bridge]:
    """Two managed namespaces; the harness's own scheduler stopped (each test runs a
    fresh one by hand, after the "restart")."""
    async with running_bridge(sandbox, tmp_path, managedNamespaces=[TEAM_A, TEAM_B]) as b:
        await b.stop_scheduler()
        for ns in (TEAM_A, TEAM_B):
            await b.kube.create(NAMESPACES, {"metadata": {"name": ns}})
        yield b


async def create(kube: KubeClient, res: Any, body: dict[str, Any], ns: str) -> dict[str, Any]:
    """Create once the namespace has its default ServiceAccount (403 before)."""
    made: dict[str, Any] = {}

    async def created() -> bool:
        try:
            made.update(await kube.create(res, body, ns))
        except KubeForbidden:
            return False
        return True

    await wait_for(created, what=f"{body['metadata']['name']} created in {ns}")
    return made


def lws_pod(name: str, lws: str, worker: int, **kw: Any) -> dict[str, Any]:
    labels = {LABEL_LWS_NAME: lws, LABEL_LWS_GROUP_INDEX: "0", LABEL_LWS_WORKER_INDEX: str(worker)}
    return pod(name, labels=labels, **kw)


async def team_a_lws_job(b: Bridge, sandbox: SlurmSandbox, track: Callable[[int], int]) -> int:
    """team-a's LeaderWorkerSet ``lws`` (size 2) and the job the bridge made for its group
    before it restarted, the pods not yet linked to it (the job was new: Slurm had not
    given it a pending reason yet)."""
    lws = await create(
        b.kube,
        LEADERWORKERSETS,
        {
            "apiVersion": API_LWS,
            "kind": "LeaderWorkerSet",
            "metadata": {"name": "lws"},
            "spec": {"leaderWorkerTemplate": {"size": 2}},
        },
        TEAM_A,
    )
    pods = [await create(b.kube, PODS, lws_pod(f"lws-0-{i}", "lws", i), TEAM_A) for i in range(2)]
    settings = TranslateSettings.from_config(b.cfg)
    spec = translate_group(pods, lws, [], settings)
    assert isinstance(spec, JobSpec)
    return track(await b.slurm.submit(spec))


async def fresh_scheduler(b: Bridge) -> Scheduler:
    """A second scheduler, its watch caches listed (its loops are not run)."""
    assert b.sched_kube is not None
    sched = Scheduler(b.cfg, b.sched_kube, b.sched.slurm, SystemClock())
    await list_into(sched, b.sched_kube)
    return sched


async def process_pod(sched: Scheduler, ns: str, name: str, kube: KubeClient) -> str:
    """Feed one pod to ``sched`` and run its group's cycle; the group key."""
    await sched.on_pod_event("ADDED", await kube.get_pod(ns, name))
    key = sched.state.pod_group[f"{ns}/{name}"]
    await sched.process(key)
    return key


async def message(kube: KubeClient, ns: str, name: str) -> str:
    p = await kube.get_pod(ns, name)
    for c in (p.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return str(c.get("message") or "")
    return ""


def intruder(size: int, *, cpu: str = "2") -> dict[str, Any]:
    """A bare pod in team-b dressed as a member of team-a's LWS: its labels name an LWS
    ``lws``, its ownerReference carries team-a's LWS uid (filled in by the test)."""
    return lws_pod("lws-0-0", "lws", 0, cpu=cpu, annotations={ANNOTATION_LWS_SIZE: str(size)})


async def attack_after_restart(b: Bridge, job_id: int, size: int) -> tuple[SlurmJob, str]:
    """The intruder, created while the scheduler was down, processed by a fresh one."""
    lws = await b.kube.get(LEADERWORKERSETS, "lws", TEAM_A)
    body = intruder(size)
    body["metadata"]["ownerReferences"] = [
        {
            "apiVersion": API_LWS,
            "kind": "LeaderWorkerSet",
            "name": "lws",
            "uid": lws["metadata"]["uid"],
            "controller": True,
        }
    ]
    await create(b.kube, PODS, body, TEAM_B)
    sched = await fresh_scheduler(b)
    await sched.sweep()
    key = await process_pod(sched, TEAM_B, "lws-0-0", b.kube)
    group = sched.groups.get(key)
    assert group is None or group.job is None or group.job.job_id != job_id
    return await b.slurm.get_job(job_id), await message(b.kube, TEAM_B, "lws-0-0")


async def test_a_team_b_pod_with_team_a_lws_uid_does_not_rewrite_its_pending_job(
    sandbox: SlurmSandbox, tmp_path: Path, track_jobs: Callable[[int], int]
) -> None:
    """Complete (size 1) and asking for more CPUs: adopted, it would be an Update."""
    async with tenants(sandbox, tmp_path) as b:
        track_jobs(await b.slurm.submit(blocker_spec(sandbox)))  # keeps team-a's job pending
        job_id = await team_a_lws_job(b, sandbox, track_jobs)
        before = await b.slurm.get_job(job_id)
        job, said = await attack_after_restart(b, job_id, size=1)
        assert job.state.primary == "PENDING"
        assert job.admin_comment == before.admin_comment  # still team-a's, not rewritten
        assert job.comment == before.comment
        assert job.cpus_per_task == before.cpus_per_task
        assert "metadata.ownerReferences[0]" in said
        assert "does not exist" in said


async def test_a_short_team_b_gang_with_team_a_lws_uid_does_not_cancel_its_job(
    sandbox: SlurmSandbox, tmp_path: Path, track_jobs: Callable[[int], int]
) -> None:
    """1 of 2 members: adopted, team-a's pending job would be cancelled as a short gang."""
    async with tenants(sandbox, tmp_path) as b:
        track_jobs(await b.slurm.submit(blocker_spec(sandbox)))
        job_id = await team_a_lws_job(b, sandbox, track_jobs)
        job, _ = await attack_after_restart(b, job_id, size=2)
        assert job.state.active, f"team-a's job was ended: {job.state.primary}"


async def test_a_team_b_pod_with_team_a_lws_uid_is_not_bound_to_its_running_job(
    sandbox: SlurmSandbox, tmp_path: Path, track_jobs: Callable[[int], int]
) -> None:
    async with tenants(sandbox, tmp_path) as b:
        job_id = await team_a_lws_job(b, sandbox, track_jobs)

        async def running() -> bool:
            return (await b.slurm.get_job(job_id)).state.primary == "RUNNING"

        await wait_for(running, what="team-a's job running")
        job, _ = await attack_after_restart(b, job_id, size=1)
        assert job.state.primary == "RUNNING"
        intruder_pod = await b.kube.get_pod(TEAM_B, "lws-0-0")
        assert not (intruder_pod.get("spec") or {}).get("nodeName"), "bound to team-a's node"
        assert LABEL_JOB_ID not in (intruder_pod["metadata"].get("labels") or {})


async def test_a_pod_naming_a_missing_podgroup_does_not_take_a_job_without_uid(
    sandbox: SlurmSandbox, tmp_path: Path, track_jobs: Callable[[int], int]
) -> None:
    """A running job whose back-link has uid "" (made for a group whose object was never
    read): a pod naming a PodGroup that does not exist also has no uid; it must not match,
    and it is told which field names what is missing."""
    async with tenants(sandbox, tmp_path) as b:
        nameless = GroupId(kind="LeaderWorkerSet", namespace=TEAM_A, name="gone-0", uid="")
        spec = JobSpec(
            name="no-uid",
            partition=sandbox.partition,
            min_nodes=1,
            tasks=1,
            admin_comment=admin_comment(nameless, [f"{TEAM_A}/gone-0-0"], b.cfg.mcs_label),
        )
        job_id = track_jobs(await b.slurm.submit(spec))

        async def running() -> bool:
            return (await b.slurm.get_job(job_id)).state.primary == "RUNNING"

        await wait_for(running, what="the uid-less job running")
        await create(b.kube, PODS, pod("ghost-0", labels={LABEL_POD_GROUP: "ghost"}), TEAM_B)
        sched = await fresh_scheduler(b)
        await sched.sweep()
        key = await process_pod(sched, TEAM_B, "ghost-0", b.kube)
        assert sched.groups[key].job is None
        assert (await b.slurm.get_job(job_id)).state.primary == "RUNNING"
        ghost = await b.kube.get_pod(TEAM_B, "ghost-0")
        assert not (ghost.get("spec") or {}).get("nodeName")
        sched.groups[key].waiting_since = sched.clock.monotonic() - 3600  # past the grace
        await sched.process(key)
        said = await message(b.kube, TEAM_B, "ghost-0")
        assert f"metadata.labels[{LABEL_POD_GROUP}]" in said
        assert "PodGroup team-b/ghost" in said


async def test_a_team_b_job_is_never_built_from_team_a_job_object(
    sandbox: SlurmSandbox, tmp_path: Path, track_jobs: Callable[[int], int]
) -> None:
    """team-a's Job (its job-name annotation) is in the scheduler's owner cache; a team-b
    pod whose ownerReference carries that Job's uid gets no job made from it."""
    async with tenants(sandbox, tmp_path) as b:
        secret_name = "team-a-private-name"
        job = await create(
            b.kube,
            JOBS,
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": "train",
                    "annotations": {"slurmjob.slinky.slurm.net/job-name": secret_name},
                },
                "spec": {"parallelism": 1, "template": {"spec": {"containers": []}}},
            },
            TEAM_A,
        )
        owner = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "train",
            "uid": job["metadata"]["uid"],
            "controller": True,
        }
        mine = pod("train-a")
        mine["metadata"]["ownerReferences"] = [owner]
        theirs = pod("train-b")
        theirs["metadata"]["ownerReferences"] = [owner]
        await create(b.kube, PODS, mine, TEAM_A)
        await create(b.kube, PODS, theirs, TEAM_B)
        sched = await fresh_scheduler(b)
        await sched.sweep()
        await process_pod(sched, TEAM_A, "train-a", b.kube)  # team-a's Job is now cached
        key = await process_pod(sched, TEAM_B, "train-b", b.kube)
        assert sched.groups[key].job is None
        made = [
            j
            for j in (await list_jobs(b.slurm)).jobs
            if f'"{TEAM_B}/train-b"' in j.admin_comment and j.state.active
        ]
        for j in made:
            track_jobs(j.job_id)
        assert not made, f"a team-b job was made: {[(j.job_id, j.name) for j in made]}"
        said = await message(b.kube, TEAM_B, "train-b")
        assert "metadata.ownerReferences[0]" in said
        assert "Job team-b/train" in said


async def test_a_job_restored_from_forged_pod_records_is_read_before_it_is_cancelled(
    sandbox: SlurmSandbox,
    slurm: SlurmClient,
    tmp_path: Path,
    track_jobs: Callable[[int], int],
) -> None:
    """Finding 9: a PodGroup's pods carry a native pending job's id, with the spec hash
    and pending message a scheduler writes (the webhook bypassed). The restarted scheduler
    restores the job from them without a read; the poller reads it (no reason yet), and a
    member leaves. The native job must not be taken over and cancelled."""
    held = native_held_spec(sandbox)
    native = track_jobs(await slurm.submit(held))
    async with running_bridge(sandbox, tmp_path) as b:
        track_jobs(await b.slurm.submit(blocker_spec(sandbox)))  # the group's jobs stay pending
        names = await podgroup(b, "pg", 2)

        async def recorded() -> bool:
            p = await b.get_pod(names[0])
            noted = ANNOTATION_SPEC_HASH in (p["metadata"].get("annotations") or {})
            return has_job(p) and noted and " is pending: " in await b.scheduled_message(names[0])

        await wait_for(recorded, what="the group's own pending job recorded on its pods")
        await b.stop_scheduler()
        own = job_of(await b.get_pod(names[0]))
        await b.slurm.cancel(own)
        # What a forger writes: the native job's id, the group's true spec hash (it is
        # computable from the pods), the message a scheduler would have written.
        for name in names:
            await b.kube.patch(
                PODS, name, {"metadata": {"labels": {LABEL_JOB_ID: str(native)}}}, namespace=NS
            )
            cond = {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": f"Slurm job {native} is pending: None",
            }
            await b.kube.patch(
                PODS, name, {"status": {"conditions": [cond]}}, namespace=NS, subresource="status"
            )
        await b.start_scheduler()
        key = f"PodGroup/{NS}/pg"

        async def restored() -> bool:
            g = b.sched.groups.get(key)
            return g is not None and g.job is not None and g.job.job_id == native

        await wait_for(restored, what="the job restored from the pods")
        polled = b.sched.poller.calls

        async def read_by_poller() -> bool:
            return b.sched.poller.calls > polled + 6  # past the reason re-reads (ticks 2, 4)

        await wait_for(read_by_poller, what="the poller's reason re-reads")
        await b.kube.delete(PODS, names[1], NS)

        async def warned() -> bool:
            return any(
                e.get("reason") == REASON_FOREIGN_JOB_LABEL
                and (e.get("involvedObject") or {}).get("name") == names[0]
                for e in (await b.kube.list(EVENTS, NS)).items
            )

        await wait_for(warned, what="the forged label refused on the member left")
        job = await b.slurm.get_job(native)
        assert job.state.primary == "PENDING", f"the native job was ended: {job.state.primary}"
