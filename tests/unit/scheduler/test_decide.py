"""The decide step: one table row per situation a group can be in."""

import pytest

from bridge.errors import InvalidInput
from bridge.models import GroupId, JobSpec
from scheduler.decide import (
    Bind,
    Cancel,
    Decision,
    Ended,
    GroupSnapshot,
    JobView,
    Pending,
    PodView,
    Reject,
    Submit,
    Update,
    Wait,
    decide,
    spec_hash,
)

G = GroupId(kind="PodGroup", namespace="default", name="pg-1", uid="u-1")
SPEC = JobSpec(name="pg-1", min_nodes=2, tasks=2)
SPEC2 = SPEC.model_copy(update={"time_limit_minutes": 30})
H = spec_hash(SPEC)
PODS = (PodView("default/a", "ua"), PodView("default/b", "ub"))


def snap(**kw: object) -> GroupSnapshot:
    base: dict[str, object] = {"group": G, "pods": PODS, "expected": 2, "spec": SPEC}
    base.update(kw)
    return GroupSnapshot(**base)  # type: ignore[arg-type]


CASES = [
    pytest.param(snap(pods=PODS[:1]), Wait, "1 of 2 pods", id="incomplete-group-waits"),
    pytest.param(snap(), Submit, "", id="complete-group-without-job-submits"),
    pytest.param(
        snap(
            spec=None, invalid=InvalidInput("slurmjob.slinky.slurm.net/timelimit", "not an integer")
        ),
        Reject,
        "timelimit",
        id="invalid-group-is-rejected-naming-the-field",
    ),
    pytest.param(
        snap(job=JobView(7, "PENDING", "Resources", spec_hash=H)),
        Pending,
        "Slurm job 7 is pending: Resources",
        id="pending-job-shows-slurm-reason",
    ),
    pytest.param(
        snap(job=JobView(7, "PENDING", "Priority", spec_hash=spec_hash(SPEC2))),
        Update,
        "",
        id="pending-job-with-changed-spec-is-updated",
    ),
    pytest.param(
        snap(pods=PODS[:1], job=JobView(7, "PENDING", "Resources", spec_hash=H)),
        Cancel,
        "lost members",
        id="gang-losing-members-before-allocation-cancels",
    ),
    pytest.param(
        snap(job=JobView(7, "RUNNING", nodes=("n1", "n2"))),
        Bind,
        "",
        id="running-job-binds",
    ),
    pytest.param(
        snap(pods=PODS[:1], job=JobView(7, "RUNNING", nodes=("n1", "n2"))),
        Bind,
        "",
        id="running-job-binds-the-rest-after-a-restart",
    ),
    pytest.param(
        snap(pods=PODS[:1], spec=None, job=JobView(7, "RUNNING", nodes=("n1", "n2"))),
        Bind,
        "",
        id="running-job-binds-the-rest-when-bound-members-make-the-group-look-incomplete",
    ),
    pytest.param(
        snap(job=JobView(7, "CANCELLED", "None")),
        Ended,
        "CANCELLED",
        id="job-cancelled-before-allocation-ends",
    ),
    pytest.param(
        snap(job=JobView(7, "CONFIGURING")),
        Pending,
        "CONFIGURING",
        id="transient-state-waits",
    ),
]


@pytest.mark.parametrize(("s", "kind", "text"), CASES)
def test_decide(s: GroupSnapshot, kind: type[Decision], text: str) -> None:
    got = decide(s)
    assert isinstance(got, kind)
    if text:
        assert text in getattr(got, "message", "")


def test_spec_hash_ignores_the_comment_but_not_the_request() -> None:
    assert spec_hash(SPEC) == spec_hash(SPEC.model_copy(update={"comment": "x"}))
    assert spec_hash(SPEC) != spec_hash(SPEC2)
