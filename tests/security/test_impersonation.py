"""Impersonation by annotation: a pod cannot choose its Slurm user, group or priority, and
the jobs of a namespace run as the Slurm identity its admin-set policy names.

Against REAL Slurm: the job of a policed namespace runs as the configured user and group
(read back from slurmrestd); a pod asking ``user-id: "0"`` is denied by the webhook's
verdict and, with the webhook bypassed (the harness runs none), stays pending with the
reason on its PodScheduled condition and never gets a job.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from admission.policy import AdmissionContext
from admission.review import parse_review
from admission.validate import validate
from bridge.wellknown import LABEL_JOB_ID, slurmjob_annotation
from tests.admission_helpers import make_pod, make_review
from tests.integration.bridge_harness import Bridge, job_of, running_bridge
from tests.integration.conftest import SlurmSandbox

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]

USER_ID = slurmjob_annotation("user-id")
# The sandbox's unprivileged user (sandbox/slurm/slurm-sandbox.sh: uid/gid 2000, in
# Slurm's account "default").
TENANT_UID = 2000
POLICY = {
    "namespaces": ["slurm-bridge"],
    "user": str(TENANT_UID),
    "group": str(TENANT_UID),
    "accounts": ["default"],
    "defaultAccount": "default",
}


@pytest.fixture
async def bridge(sandbox: SlurmSandbox, tmp_path: Path) -> AsyncIterator[Bridge]:
    async with running_bridge(sandbox, tmp_path, namespacePolicies=[POLICY]) as b:
        try:
            yield b
        finally:
            await b.cancel_jobs()


async def test_a_policed_namespaces_job_runs_as_the_configured_user_and_group(
    bridge: Bridge,
) -> None:
    await bridge.create_pod("tenant")
    await bridge.bound("tenant")
    job = await bridge.slurm.get_job(job_of(await bridge.get_pod("tenant")))
    assert job.user_id == TENANT_UID
    assert job.group_id == TENANT_UID


async def test_a_pod_asking_for_root_is_denied_by_the_webhook_and_held_by_the_scheduler(
    bridge: Bridge,
) -> None:
    asks_root = {USER_ID: "0"}
    # The webhook's verdict, with the very config the scheduler runs with.
    review = parse_review(make_review(make_pod(name="root", annotations=asks_root)))
    answer: dict[str, Any] = validate(review, AdmissionContext(bridge.cfg)).to_review()
    message = answer["response"]["status"]["message"]
    assert answer["response"]["allowed"] is False
    assert USER_ID in message
    assert "'0'" in message
    assert "namespacePolicies[0].allowPodUserId" in message

    # The webhook bypassed: the scheduler enforces the same policy before any submit.
    await bridge.create_pod("root", annotations=asks_root)

    async def held() -> str:
        msg = await bridge.scheduled_message("root")
        return msg if "allowPodUserId" in msg else ""

    said = await bridge.wait_for("the pod to say why it waits", held)
    assert said.startswith("False Unschedulable:")
    assert USER_ID in said
    pod = await bridge.get_pod("root")
    assert LABEL_JOB_ID not in (pod["metadata"].get("labels") or {})
    assert not (pod.get("spec") or {}).get("nodeName")
