"""What a restarted scheduler takes from a group's pods without asking Slurm: the pending
job they record (job-id label, spec-hash annotation, Slurm's pending reason for that job),
or nothing (the job is then read by id). Pure: tables."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.models import JobSpec
from bridge.wellknown import ANNOTATION_SPEC_HASH, CONDITION_POD_SCHEDULED, LABEL_JOB_ID
from scheduler.decide import JobSnapshot, parse_pending, pending_message, pending_reason
from scheduler.snapshot import SPEC_MARK, restored_job, spec_hash_of


def pod(
    job_id: str | None = "42", spec_hash: str | None = "abc123", message: str | None = None
) -> dict[str, Any]:
    said = pending_message(JobSnapshot(42, "PENDING", "Priority")) if message is None else message
    return {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "labels": {LABEL_JOB_ID: job_id} if job_id else {},
            "annotations": {ANNOTATION_SPEC_HASH: spec_hash} if spec_hash else {},
        },
        "status": {
            "conditions": [{"type": CONDITION_POD_SCHEDULED, "status": "False", "message": said}]
        },
    }


@pytest.mark.parametrize(
    ("message", "job_id", "reason"),
    [
        ("Slurm job 42 is pending: Priority", 42, "Priority"),
        ("Slurm job 42 is pending: None", 42, "None"),
        ("Slurm job 42 is pending: ", 42, None),
        ("Slurm job 43 is pending: Priority", 42, None),  # another job's reason
        ("Slurm job 42 is CONFIGURING", 42, None),
        ("waiting for group ns/g: 1 of 2 pods exist", 42, None),
    ],
)
def test_pending_reason_reads_back_only_pending_message_of_that_job(
    message: str, job_id: int, reason: str | None
) -> None:
    assert pending_reason(message, job_id) == reason


@pytest.mark.parametrize(
    ("message", "parsed"),
    [
        ("Slurm job 42 is pending: Priority", (42, "Priority")),
        (
            "Slurm job 42 is pending: Resources; topology request: at most 1 leaf switch, "
            "waiting up to 600 s",
            (42, "Resources"),
        ),
        ("Slurm job 42 is pending: ", (42, "")),
        ("Slurm job 42 is pending: Resources (hetjob component 42+1 of 2)", (42, "Resources")),
        ("Slurm job x is pending: Priority", None),
        ("Slurm job 42 is CONFIGURING", None),
        ("Slurm rejected the job: pending: no", None),
        ("waiting for group ns/g: 1 of 2 pods exist", None),
    ],
)
def test_the_one_parser_of_the_pending_message_reads_back_only_what_pending_message_wrote(
    message: str, parsed: tuple[int, str] | None
) -> None:
    assert parse_pending(message) == parsed


def test_pods_that_record_job_hash_and_reason_restore_a_pending_job() -> None:
    spec = JobSpec(name="p", partition="part", min_nodes=1, tasks=1)
    job = restored_job([pod()], spec)
    assert job is not None
    assert (job.job_id, job.state.primary, job.state_reason) == (42, "PENDING", "Priority")
    assert job.partition == "part"
    assert job.comment == f"{SPEC_MARK}abc123"
    assert spec_hash_of(job) == "abc123"


@pytest.mark.parametrize(
    "pods",
    [
        [pod(job_id=None)],  # never linked
        [pod(spec_hash=None)],  # linked by a scheduler that did not note the hash
        [pod(message="Slurm job 42 is RUNNING")],
        [pod(message="Slurm job 7 is pending: Priority")],  # the reason of another job
        [],
    ],
    ids=["no-label", "no-hash", "not-pending", "other-job", "no-pods"],
)
def test_pods_missing_part_of_the_record_restore_nothing(pods: list[dict[str, Any]]) -> None:
    assert restored_job(pods, None) is None


def test_the_first_pod_with_a_whole_record_gives_the_job() -> None:
    job = restored_job([pod(spec_hash=None), pod()], None)
    assert job is not None
    assert job.job_id == 42
    assert job.partition == ""
