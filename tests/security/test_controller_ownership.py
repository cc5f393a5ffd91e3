"""The controller's decisions on labelled pods, with a fake Slurm (pure logic): only the
pods a job's back-link names count; a job Slurm no longer knows is acted on only for pods
of managed namespaces; a job proven not ours is dropped once no pod names it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from bridge.config import parse_config
from bridge.kube.client import KubeClient
from bridge.kube.watch import WatchEvent
from bridge.models import GroupId
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import JobState, SlurmJob
from bridge.translate import admin_comment
from bridge.wellknown import LABEL_JOB_ID
from controller.model import Action, CancelJob, FailPod, JobKind, SlurmJobStatus
from controller.runtime import Controller

CFG = parse_config({"managedNamespaces": ["team"], "mcsLabel": "k8s"}, env={})


def pod(ns: str, name: str, job: int, phase: str = "Running") -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": name,
            "labels": {LABEL_JOB_ID: str(job)},
        },
        "status": {"phase": phase},
    }


class FakeSlurm:
    def __init__(self, comment: str) -> None:
        self.comment = comment
        self.reads = 0

    async def get_job(self, job_id: int) -> SlurmJob:
        self.reads += 1
        return SlurmJob(
            job_id=job_id, name="j", state=JobState(primary="RUNNING"), admin_comment=self.comment
        )


class Recorder:
    def __init__(self) -> None:
        self.actions: list[Action] = []

    async def apply(self, actions: Sequence[Action]) -> None:
        self.actions += actions


async def controller(comment: str, *pods: dict[str, Any]) -> tuple[Controller, Recorder, FakeSlurm]:
    slurm = FakeSlurm(comment)
    ctl = Controller(CFG, cast(SlurmClient, slurm), cast(KubeClient, None))
    rec = Recorder()
    ctl.applier.apply = rec.apply  # type: ignore[method-assign]
    for p in pods:
        await ctl.on_pod(WatchEvent("ADDED", p))
    return ctl, rec, slurm


MINE = admin_comment(GroupId(kind="Pod", namespace="team", name="a", uid="a"), ["team/a"], "k8s")


async def test_a_forged_running_pod_does_not_hold_the_cancel_of_a_finished_group() -> None:
    ctl, rec, slurm = await controller(
        MINE, pod("team", "a", 7, phase="Succeeded"), pod("elsewhere", "forged", 7)
    )
    ctl.poller.views[7] = SlurmJobStatus(JobKind.ACTIVE, "RUNNING")
    await ctl.reconcile(("job", "7"))
    assert [a.job_id for a in rec.actions if isinstance(a, CancelJob)] == [7]
    await ctl.reconcile(("job", "7"))
    assert slurm.reads == 1  # the back-link is read once per job


async def test_a_native_job_is_never_cancelled_and_is_forgotten_with_its_forged_pods() -> None:
    forged = pod("team", "f", 9, phase="Succeeded")
    ctl, rec, _ = await controller("", forged)
    ctl.poller.views[9] = SlurmJobStatus(JobKind.ACTIVE, "RUNNING")
    await ctl.reconcile(("job", "9"))
    assert rec.actions == []
    await ctl.on_pod(WatchEvent("DELETED", forged))
    await ctl.reconcile(("job", "9"))
    assert rec.actions == []
    assert 9 not in ctl.caches.by_job  # no longer polled


async def test_a_job_slurm_forgot_fails_only_the_pods_of_managed_namespaces() -> None:
    ctl, rec, slurm = await controller("", pod("team", "a", 5), pod("elsewhere", "b", 5))
    ctl.poller.views[5] = SlurmJobStatus(JobKind.GONE)
    await ctl.reconcile(("job", "5"))
    failed = [(a.namespace, a.name) for a in rec.actions if isinstance(a, FailPod)]
    assert failed == [("team", "a")]
    assert slurm.reads == 0


class FakeHetSlurm(FakeSlurm):
    """A running hetjob of a PodGroup: component 0 names team/a, component 1 team/b, each
    with its pod's uid (as the scheduler writes them)."""

    async def get_job(self, job_id: int) -> SlurmJob:
        self.reads += 1
        group = GroupId(kind="PodGroup", namespace="team", name="g", uid="g")
        parts = [
            SlurmJob(
                job_id=job_id + k,
                name="j",
                state=JobState(primary="RUNNING"),
                admin_comment=admin_comment(group, [f"team/{p}"], "k8s", [f"uid-{p}"]),
                het_job_id=job_id,
                het_job_offset=k,
            )
            for k, p in enumerate("ab")
        ]
        return parts[0].model_copy(update={"het_components": (parts[1],)})


async def test_a_later_pod_under_a_hetjobs_listed_name_is_not_taken_for_the_bridges() -> None:
    # the gang's pods are gone; a pod made later under a listed name (another uid)
    # carries the job's label: it neither ends the job nor is failed for it
    later = pod("team", "a", 7, phase="Succeeded")  # uid "a", not "uid-a"
    slurm = FakeHetSlurm("")
    ctl = Controller(CFG, cast(SlurmClient, slurm), cast(KubeClient, None))
    rec = Recorder()
    ctl.applier.apply = rec.apply  # type: ignore[method-assign]
    await ctl.on_pod(WatchEvent("ADDED", later))
    ctl.poller.views[7] = SlurmJobStatus(JobKind.ACTIVE, "RUNNING")
    await ctl.reconcile(("job", "7"))
    assert not [a for a in rec.actions if isinstance(a, CancelJob | FailPod)], rec.actions
    link = ctl.ownership.links[7]
    assert link is not None
    assert link.uids == ("uid-a", "uid-b")
