"""The controller's word on a preempted gang's built-in PodGroup (controller.apply:
DisruptPodGroup) against the sandbox API server of each release: ``DisruptionTarget=True``,
reason ``PreemptionByScheduler``, the message naming the Slurm job, written at the version
discovery finds (1.36's v1alpha2, 1.37's v1beta1), the other conditions kept; a repeat
writes nothing and a PodGroup gone is done. A gang CompositePodGroup (1.37) its PodGroup
belongs to is told too; a basic one is not."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from bridge.kube.client import KubeClient
from bridge.kube.resources import Resource
from bridge.slurm.client import SlurmClient
from bridge.wellknown import CONDITION_DISRUPTION_TARGET
from bridge.workloads.builtin import PREEMPTED_REASON
from controller.apply import Applier
from controller.model import DisruptPodGroup
from sandbox.cluster import SandboxCluster
from sandbox.kubeapi import SANDBOX_TOKEN
from tests.clients import kube_for_host

NS = "default"
G = "scheduling.k8s.io"
# the release -> the version its PodGroups are served at, and a PodGroup's spec there
SERVED = {
    "1.36": (
        "v1alpha2",
        {"podGroupTemplateRef": {"workload": {"workloadName": "w", "podGroupTemplateName": "t"}}},
    ),
    "1.37": ("v1beta1", {"workloadRef": {"workloadName": "w", "templateName": "t"}}),
}


@pytest.fixture(params=sorted(SERVED), ids=[f"kube{v}" for v in sorted(SERVED)])
async def served(request: pytest.FixtureRequest) -> AsyncIterator[tuple[KubeClient, str]]:
    release = str(request.param)
    async with (
        SandboxCluster(nodes=["n1"], kube_version=release) as srv,
        kube_for_host(srv.url, request_timeout=5, token=SANDBOX_TOKEN) as client,
    ):
        yield client, release


async def a_podgroup(kube: KubeClient, release: str, name: str) -> Resource:
    version, ref = SERVED[release]
    workloads = Resource(G, version, "workloads", "Workload", True)
    podgroups = Resource(G, version, "podgroups", "PodGroup", True)
    gang = {"gang": {"minCount": 1}}
    template = {"name": "t", "schedulingPolicy": gang}
    await kube.create(
        workloads, {"metadata": {"name": "w"}, "spec": {"podGroupTemplates": [template]}}, NS
    )
    spec: dict[str, Any] = {**ref, "schedulingPolicy": gang}
    await kube.create(podgroups, {"metadata": {"name": name}, "spec": spec}, NS)
    return podgroups


async def test_a_preempted_gangs_podgroup_gets_disruption_target_at_the_served_version(
    served: tuple[KubeClient, str],
) -> None:
    kube, release = served
    podgroups = await a_podgroup(kube, release, "gpu")
    await kube.set_status_condition(
        podgroups, NS, "gpu", "PodGroupScheduled", True, reason="Scheduled", message="started"
    )
    applier = Applier(cast(SlurmClient, None), kube)  # nothing here reaches Slurm
    said = "Slurm job 42 ended with state PREEMPTED"
    await applier.apply([DisruptPodGroup(NS, "gpu", said)])

    pg = await kube.get(podgroups, "gpu", NS)
    conds = {c["type"]: c for c in pg["status"]["conditions"]}
    cond = conds[CONDITION_DISRUPTION_TARGET]
    assert (cond["status"], cond["reason"], cond["message"]) == ("True", PREEMPTED_REASON, said)
    assert cond["lastTransitionTime"]
    assert conds["PodGroupScheduled"]["status"] == "True"  # the other conditions kept

    version = pg["metadata"]["resourceVersion"]
    await applier.apply([DisruptPodGroup(NS, "gpu", said)])  # a repeat writes nothing
    assert (await kube.get(podgroups, "gpu", NS))["metadata"]["resourceVersion"] == version
    await applier.apply([DisruptPodGroup(NS, "gone", said)])  # a PodGroup gone: done


@pytest.mark.parametrize(("policy", "marked"), [("gang", True), ("basic", False)])
async def test_a_gang_composite_of_a_preempted_podgroup_is_told_too_a_basic_one_is_not(
    policy: str, marked: bool
) -> None:
    """Kubernetes 1.37: a gang CompositePodGroup's children are ONE hetjob, so Slurm's
    preemption of it preempts the whole composite; a basic composite's children are jobs
    of their own."""
    async with (
        SandboxCluster(nodes=["n1"], kube_version="1.37") as srv,
        kube_for_host(srv.url, request_timeout=5, token=SANDBOX_TOKEN) as kube,
    ):
        gang = {"gang": {"minGroupCount": 2}} if policy == "gang" else {"basic": {}}
        tree = {
            "name": "job",
            "schedulingPolicy": gang,
            "podGroupTemplates": [
                {"name": t, "schedulingPolicy": {"gang": {"minCount": 1}}} for t in ("cpu", "gpu")
            ],
        }
        workloads = Resource(G, "v1beta1", "workloads", "Workload", True)
        composites = Resource(G, "v1alpha3", "compositepodgroups", "CompositePodGroup", True)
        podgroups = Resource(G, "v1beta1", "podgroups", "PodGroup", True)
        await kube.create(
            workloads,
            {"metadata": {"name": "train"}, "spec": {"compositePodGroupTemplates": [tree]}},
            NS,
        )
        ref = {"workloadName": "train", "templateName": "job"}
        spec = {"workloadRef": ref, "schedulingPolicy": gang}
        await kube.create(composites, {"metadata": {"name": "train-job"}, "spec": spec}, NS)
        for t in ("cpu", "gpu"):
            child = {
                "workloadRef": {"workloadName": "train", "templateName": t},
                "schedulingPolicy": {"gang": {"minCount": 1}},
                "parentCompositePodGroupName": "train-job",
            }
            await kube.create(podgroups, {"metadata": {"name": f"train-{t}"}, "spec": child}, NS)
        applier = Applier(cast(SlurmClient, None), kube)
        said = "Slurm job 42 ended with state PREEMPTED in hetjob component 42+1"
        await applier.apply([DisruptPodGroup(NS, "train-cpu", said)])

        pg = await kube.get(podgroups, "train-cpu", NS)
        assert pg["status"]["conditions"][0]["reason"] == PREEMPTED_REASON
        cpg = await kube.get(composites, "train-job", NS)
        conds = {c["type"]: c for c in (cpg.get("status") or {}).get("conditions") or []}
        if marked:
            cond = conds[CONDITION_DISRUPTION_TARGET]
            assert (cond["status"], cond["reason"], cond["message"]) == (
                "True",
                PREEMPTED_REASON,
                said,
            )
        else:
            assert CONDITION_DISRUPTION_TARGET not in conds
