"""Kubernetes 1.37's Workload API end to end against real Slurm: the sandbox API server
serving 1.37 (``--kube-version 1.37``: scheduling.k8s.io v1beta1 and v1alpha3, no
v1alpha2) and the scheduler with ``gangSizing: hetjob``, which finds the versions by
discovery (docs/hetjob.md):

- a v1beta1 Workload of a CPU and a GPU PodGroup (``spec.workloadRef``) is ONE hetjob;
- a gang CompositePodGroup (v1alpha3) of two PodGroups (``parentCompositePodGroupName``)
  is ONE hetjob, its PodGroups the components.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from bridge.kube.resources import PODS, Resource
from tests.integration.bridge_harness import NS, Bridge, running_bridge
from tests.integration.conftest import SlurmSandbox
from tests.integration.test_hetjob_e2e import HET, bound_hetjob, member

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]

SCHED = "scheduling.k8s.io"
WORKLOADS = Resource(SCHED, "v1beta1", "workloads", "Workload", True)
PODGROUPS = Resource(SCHED, "v1beta1", "podgroups", "PodGroup", True)
COMPOSITES = Resource(SCHED, "v1alpha3", "compositepodgroups", "CompositePodGroup", True)


@pytest.fixture
async def bridge(sandbox: SlurmSandbox, tmp_path: Path) -> AsyncIterator[Bridge]:
    async with running_bridge(sandbox, tmp_path, kube_version="1.37", scheduler=HET) as b:
        yield b


def podgroup(name: str, min_count: int, template: str, parent: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "workloadRef": {"workloadName": "train", "templateName": template},
        "schedulingPolicy": {"gang": {"minCount": min_count}},
    }
    if parent:
        spec["parentCompositePodGroupName"] = parent
    return {
        "apiVersion": f"{SCHED}/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": spec,
    }


async def test_a_v1beta1_workload_of_a_cpu_and_a_gpu_podgroup_is_one_hetjob(
    bridge: Bridge, sandbox: SlurmSandbox
) -> None:
    served = await bridge.kube.served_versions(SCHED)
    assert "v1beta1" in served
    assert "v1alpha2" not in served
    templates = {"driver": 1, "workers": 2}
    await bridge.kube.create(
        WORKLOADS,
        {
            "apiVersion": f"{SCHED}/v1beta1",
            "kind": "Workload",
            "metadata": {"name": "train"},
            "spec": {
                "podGroupTemplates": [
                    {"name": t, "schedulingPolicy": {"gang": {"minCount": n}}}
                    for t, n in templates.items()
                ]
            },
        },
        NS,
    )
    for t, n in templates.items():
        await bridge.kube.create(PODGROUPS, podgroup(f"train-{t}", n, t), NS)
    workers = ["train-w0", "train-w1"]
    for n in workers:
        await bridge.kube.create(PODS, member(n, "train-workers", "2", sandbox.node_gpus), NS)
    await bridge.kube.create(PODS, member("train-d0", "train-driver"), NS)
    job = await bound_hetjob(bridge, [["train-d0"], workers])
    assert "slurm-bridge: Workload slurm-bridge/train" in job.comment


async def test_a_composite_podgroup_of_two_podgroups_is_one_hetjob(
    bridge: Bridge, sandbox: SlurmSandbox
) -> None:
    await bridge.kube.create(
        COMPOSITES,
        {
            "apiVersion": f"{SCHED}/v1alpha3",
            "kind": "CompositePodGroup",
            "metadata": {"name": "cpg"},
            "spec": {
                "workloadRef": {"workloadName": "train", "templateName": "cpg"},
                "schedulingPolicy": {"gang": {"minGroupCount": 2}},
            },
        },
        NS,
    )
    await bridge.kube.create(PODGROUPS, podgroup("cpg-cpu", 1, "cpu", parent="cpg"), NS)
    await bridge.kube.create(PODGROUPS, podgroup("cpg-gpu", 2, "gpu", parent="cpg"), NS)
    workers = ["cpg-w0", "cpg-w1"]
    for n in workers:
        await bridge.kube.create(PODS, member(n, "cpg-gpu", "2", sandbox.node_gpus), NS)
    await bridge.kube.create(PODS, member("cpg-d0", "cpg-cpu"), NS)
    job = await bound_hetjob(bridge, [["cpg-d0"], workers])
    assert "slurm-bridge: CompositePodGroup slurm-bridge/cpg" in job.comment
    # as kube-scheduler would: the composite and each of its PodGroups say so
    for res, name in ((COMPOSITES, "cpg"), (PODGROUPS, "cpg-cpu"), (PODGROUPS, "cpg-gpu")):
        await bridge.wait_for(f"{name} PodGroupInitiallyScheduled", scheduled(bridge, res, name))


def scheduled(b: Bridge, res: Resource, name: str) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        obj = await b.kube.get(res, name, NS)
        conditions = (obj.get("status") or {}).get("conditions") or []
        return any(
            c.get("type") == "PodGroupInitiallyScheduled" and c.get("status") == "True"
            for c in conditions
        )

    return check
