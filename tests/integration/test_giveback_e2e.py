"""An allocation is never held for pods that cannot be bound, against real Slurm: with
the ResourceClaim write refused by RBAC (the chart without ``resourceclaims/binding``, as
on Kubernetes 1.36), or the binding itself refused, the scheduler gives the started job
back to Slurm after ``scheduler.bindGiveUpAttempts`` tries (cancelled, not left RUNNING),
says which step failed, and once the write is allowed again a new job binds the pod."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bridge.kube.resources import EVENTS, Resource
from bridge.kube.resources import PODS as PODS_RES
from tests.integration.bridge_harness import NS, Bridge, job_of, running_bridge
from tests.integration.conftest import SlurmSandbox
from tests.integration.identities import identities_for
from tests.integration.test_dra_e2e import GPU, dra_bridge, dra_pod

pytestmark = pytest.mark.slurm


async def reason_message(b: Bridge, name: str, reason: str) -> str:
    """The PodScheduled message of pod ``name`` when its reason is ``reason``, else ""."""
    pod = await b.get_pod(name)
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("reason") == reason:
            return str(c.get("message"))
    return ""


CLUSTER_ROLES = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False)
BINDING = "resourceclaims/binding"


async def test_a_refused_claim_write_gives_the_job_back_to_slurm_then_a_new_job_binds(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    sched = {"rejectBackoffSeconds": 0.5, "workers": 4, "bindGiveUpAttempts": 3,
             "bindGiveUpSeconds": 3600}  # fmt: skip
    async with dra_bridge(sandbox, tmp_path, scheduler=sched) as b:
        role_name = identities_for(b.cfg).service_accounts["scheduler"][1]
        role = await b.kube.get(CLUSTER_ROLES, role_name)
        rules = role["rules"]
        without = [r for r in rules if BINDING not in r.get("resources", [])]
        assert len(without) == len(rules) - 1, "the chart grants resourceclaims/binding"
        await b.kube.patch(CLUSTER_ROLES, role_name, {"rules": without})

        await b.kube.create(PODS_RES, dra_pod("gb", requests={GPU: "1"}), NS)

        async def given_back() -> str:
            return await reason_message(b, "gb", "ClaimAllocationFailed")

        message = await b.wait_for("the job given back (ClaimAllocationFailed)", given_back)
        found = re.match(r"Slurm job (\d+) given back to Slurm", message)
        assert found, message
        first = int(found.group(1))
        assert "writing the ResourceClaims' allocation failed 3 times" in message
        assert "resourceclaims/binding" in message  # the refusal, in kube's words
        # Slurm no longer holds it: the job was cancelled, not left RUNNING
        job = await b.slurm.get_job(first)
        assert not job.state.active, job.state
        assert job.state.primary == "CANCELLED"
        events = await b.kube.list(EVENTS, NS, field_selector="involvedObject.name=gb")
        warnings = [e for e in events.items if e.get("type") == "Warning"]
        assert any(str(e.get("message", "")).startswith(f"Slurm job {first} given back")
                   for e in warnings)  # fmt: skip

        # the permission back: the group was queued afresh and a new job binds it
        await b.kube.patch(CLUSTER_ROLES, role_name, {"rules": rules})
        await b.bound("gb")
        assert job_of(await b.get_pod("gb")) != first


async def test_a_binding_refused_every_time_gives_the_job_back_then_a_new_job_binds(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    sched = {"rejectBackoffSeconds": 0.5, "workers": 4, "bindGiveUpAttempts": 2,
             "bindGiveUpSeconds": 3600}  # fmt: skip
    async with running_bridge(sandbox, tmp_path, scheduler=sched) as b:
        fault = b.api.inject_fault(r"/pods/nb/binding$", method="POST", status=403, count=None)
        await b.create_pod("nb")

        async def given_back() -> str:
            return await reason_message(b, "nb", "BindingFailed")

        message = await b.wait_for("the job given back (BindingFailed)", given_back)
        found = re.match(r"Slurm job (\d+) given back to Slurm", message)
        assert found, message
        first = int(found.group(1))
        assert "binding the pods failed 2 times" in message
        assert fault.hits >= 2
        assert not (await b.slurm.get_job(first)).state.active
        b.api.clear_faults()
        await b.bound("nb")
        assert job_of(await b.get_pod("nb")) != first
