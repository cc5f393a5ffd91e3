"""A pod whose job waits with a topology request says so next to Slurm's own reason, and a
restarted scheduler still reads back just Slurm's reason."""

from __future__ import annotations

import pytest

from bridge.models import GroupId, JobSpec
from scheduler.decide import (
    GroupSnapshot,
    JobSnapshot,
    Pending,
    PodView,
    decide,
    pending_message,
    pending_reason,
    spec_hash,
)

BASE = JobSpec(name="g", min_nodes=4, tasks=4)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({}, "Slurm job 7 is pending: Resources"),
        (
            {"segment_size": 4},
            "Slurm job 7 is pending: Resources; topology request: segments of 4 nodes, "
            "each inside one block",
        ),
        (
            {"required_switches": 1, "wait_for_switch_seconds": 600},
            "Slurm job 7 is pending: Resources; topology request: at most 1 leaf switch, "
            "waiting up to 600 s",
        ),
        (
            {"required_switches": 2},
            "Slurm job 7 is pending: Resources; topology request: at most 2 leaf switches, "
            "waiting up to max_switch_wait",
        ),
    ],
    ids=["none", "segment", "switch-with-wait", "switches-slurm-default-wait"],
)
def test_pending_message_names_the_topology_request(
    changes: dict[str, object], message: str
) -> None:
    spec = BASE.model_copy(update=changes)
    snap = GroupSnapshot(
        group=GroupId(kind="PodGroup", namespace="ns", name="g", uid="u"),
        pods=tuple(PodView(key=f"ns/p{i}", uid=f"u{i}") for i in range(4)),
        expected=4,
        spec=spec,
        job=JobSnapshot(7, "PENDING", "Resources", spec_hash=spec_hash(spec)),
    )
    assert decide(snap) == Pending(7, message, spec_hash(spec))
    assert pending_reason(message, 7) == "Resources"


def test_slurms_topology_reason_is_shown_as_slurm_words_it() -> None:
    job = JobSnapshot(7, "PENDING", "No suitable topology unit found")
    msg = pending_message(job, BASE.model_copy(update={"segment_size": 4}))
    assert msg.startswith("Slurm job 7 is pending: No suitable topology unit found; ")
    assert pending_reason(msg, 7) == "No suitable topology unit found"


def test_a_job_without_a_topology_request_keeps_the_hash_it_had_before_topology() -> None:
    """Pending jobs carry their spec hash; a new field must not make them all "changed"."""
    spec = JobSpec(name="g", min_nodes=4, tasks=4, excluded_nodes=("a",), priority=3)
    assert spec_hash(spec) == "3b4e352627f6"  # as computed before the topology fields
    assert spec_hash(spec.model_copy(update={"segment_size": 4})) != spec_hash(spec)
