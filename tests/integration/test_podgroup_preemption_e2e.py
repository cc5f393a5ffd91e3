"""Slurm preempts a built-in PodGroup's gang, end to end: real Slurm (the sandbox's
PreemptType=preempt/partition_prio), the scheduler, the controller, the sandbox's kubelet
and API server of each release. A native job of a higher-tier partition preempts the
gang's job; the PodGroup gets ``DisruptionTarget=True``, reason ``PreemptionByScheduler``,
the message naming the Slurm job, as kube-scheduler sets it on a PodGroup it preempts
(1.37), beside its ``PodGroupInitiallyScheduled`` (1.36: ``PodGroupScheduled``):

- Kubernetes 1.37 (v1beta1), a GraceTime: Slurm selects the job for preemption (it keeps
  its nodes for the grace), the controller sees it at once;
- Kubernetes 1.36 (v1alpha2), no GraceTime: Slurm ends the job PREEMPTED at once;
- Kubernetes 1.37, a gang CompositePodGroup of two PodGroups (ONE hetjob): the composite
  and both PodGroups.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bridge.kube.resources import PODS, Resource
from bridge.wellknown import CONDITION_DISRUPTION_TARGET
from bridge.workloads.builtin import PREEMPTED_REASON, scheduled_condition
from tests.integration.bridge_harness import NS, Bridge, job_of, running_bridge
from tests.integration.conftest import SlurmSandbox
from tests.integration.test_hetjob_e2e import HET, bound_hetjob, member
from tests.integration.test_preemption_e2e import higher_tier, preemptor

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]

SCHED = "scheduling.k8s.io"
# release -> (the version its PodGroups are served at, a PodGroup's Workload reference)
RELEASES: dict[str, tuple[str, dict[str, Any]]] = {
    "1.37": ("v1beta1", {"workloadRef": {"workloadName": "train", "templateName": "workers"}}),
    "1.36": (
        "v1alpha2",
        {
            "podGroupTemplateRef": {
                "workload": {"workloadName": "train", "podGroupTemplateName": "workers"}
            }
        },
    ),
}


async def gang(b: Bridge, release: str, size: int) -> tuple[Resource, list[str]]:
    """A Workload of one template and its PodGroup ``train-workers`` of ``size`` pods."""
    version, ref = RELEASES[release]
    workloads = Resource(SCHED, version, "workloads", "Workload", True)
    podgroups = Resource(SCHED, version, "podgroups", "PodGroup", True)
    policy = {"gang": {"minCount": size}}
    template = {"name": "workers", "schedulingPolicy": policy}
    await b.kube.create(
        workloads, {"metadata": {"name": "train"}, "spec": {"podGroupTemplates": [template]}}, NS
    )
    spec = {**ref, "schedulingPolicy": policy}
    await b.kube.create(podgroups, {"metadata": {"name": "train-workers"}, "spec": spec}, NS)
    names = [f"train-w{i}" for i in range(size)]
    for n in names:
        await b.kube.create(PODS, member(n, "train-workers"), NS)
    return podgroups, names


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


@pytest.mark.parametrize(
    ("release", "grace"),
    [
        pytest.param("1.37", 20, id="kube1.37-selected"),
        pytest.param("1.36", 0, id="kube1.36-ended"),
    ],
)
async def test_a_gang_slurm_preempts_has_its_podgroup_say_disruption_target_naming_the_job(
    sandbox: SlurmSandbox, tmp_path: Path, release: str, grace: int
) -> None:
    with higher_tier(sandbox, grace, "CANCEL") as urgent:
        async with running_bridge(sandbox, tmp_path, controller=True, kube_version=release) as b:
            podgroups, names = await gang(b, release, 2)
            for n in names:
                await b.bound(n)
            victim = job_of(await b.get_pod(names[0]))
            version = podgroups.version

            async def scheduled() -> bool:
                pg = await b.kube.get(podgroups, "train-workers", NS)
                cond = conditions(pg).get(scheduled_condition(version)) or {}
                return cond.get("status") == "True"

            await b.wait_for("the PodGroup's scheduled condition", scheduled)

            async def seen() -> bool:
                return b.ctl is not None and victim in b.ctl.poller.views

            await b.wait_for("the controller to see the gang's job", seen)
            preempting = await b.slurm.submit(preemptor(sandbox, urgent))
            try:

                async def disrupted() -> dict[str, Any] | None:
                    pg = await b.kube.get(podgroups, "train-workers", NS)
                    return conditions(pg).get(CONDITION_DISRUPTION_TARGET)

                cond = await b.wait_for("the PodGroup's DisruptionTarget", disrupted, 60)
                assert cond["status"] == "True"
                assert cond["reason"] == PREEMPTED_REASON
                assert f"Slurm job {victim} " in cond["message"]
                # the scheduled condition stays; the pods failed as disruptions
                pg = await b.kube.get(podgroups, "train-workers", NS)
                assert conditions(pg)[scheduled_condition(version)]["status"] == "True"
                for n in names:
                    pod = await b.get_pod(n)
                    assert conditions(pod)[CONDITION_DISRUPTION_TARGET]["status"] == "True"
            finally:
                await b.slurm.cancel(preempting)


async def test_a_composite_slurm_preempts_has_it_and_its_podgroups_say_disruption_target(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    """Kubernetes 1.37: a gang CompositePodGroup of two PodGroups is ONE hetjob; Slurm
    preempting it marks the composite and both PodGroups."""
    composites = Resource(SCHED, "v1alpha3", "compositepodgroups", "CompositePodGroup", True)
    podgroups = Resource(SCHED, "v1beta1", "podgroups", "PodGroup", True)
    with higher_tier(sandbox, 20, "CANCEL") as urgent:
        async with running_bridge(
            sandbox, tmp_path, controller=True, kube_version="1.37", scheduler=HET
        ) as b:
            ref = {"workloadName": "train", "templateName": "cpg"}
            spec = {"workloadRef": ref, "schedulingPolicy": {"gang": {"minGroupCount": 2}}}
            await b.kube.create(composites, {"metadata": {"name": "cpg"}, "spec": spec}, NS)
            for part in ("a", "b"):
                child = {
                    "workloadRef": {"workloadName": "train", "templateName": part},
                    "schedulingPolicy": {"gang": {"minCount": 1}},
                    "parentCompositePodGroupName": "cpg",
                }
                await b.kube.create(
                    podgroups, {"metadata": {"name": f"cpg-{part}"}, "spec": child}, NS
                )
                # two shapes (a CPU pod, a GPU pod): two components of one hetjob
                gpus = sandbox.node_gpus if part == "b" else 0
                await b.kube.create(PODS, member(f"cpg-{part}0", f"cpg-{part}", "1", gpus), NS)
            job = await bound_hetjob(b, [["cpg-a0"], ["cpg-b0"]])

            async def seen() -> bool:
                return b.ctl is not None and job.job_id in b.ctl.poller.views

            await b.wait_for("the controller to see the hetjob", seen)
            preempting = await b.slurm.submit(preemptor(sandbox, urgent))
            try:
                for res, name in ((podgroups, "cpg-a"), (podgroups, "cpg-b"), (composites, "cpg")):

                    async def disrupted(res: Resource = res, name: str = name) -> Any:
                        obj = await b.kube.get(res, name, NS)
                        return conditions(obj).get(CONDITION_DISRUPTION_TARGET)

                    cond = await b.wait_for(f"{name}'s DisruptionTarget", disrupted, 60)
                    assert (cond["status"], cond["reason"]) == ("True", PREEMPTED_REASON)
                    assert f"Slurm job {job.job_id}" in cond["message"]
            finally:
                await b.slurm.cancel(preempting)
