"""The decide step: one table row per situation a group can be in."""

from dataclasses import replace

import pytest

from bridge.errors import InvalidInput
from bridge.models import GroupId, JobSpec
from scheduler.decide import (
    ALLOCATE,
    SUBMIT,
    AwaitSweep,
    Bind,
    Cancel,
    Decision,
    Ended,
    GroupSnapshot,
    JobSnapshot,
    PartitionView,
    Pending,
    PodView,
    ReadJob,
    Reject,
    Submit,
    Unreachable,
    Update,
    Wait,
    decide,
    decide_start,
    shape_of,
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
        snap(job=JobSnapshot(7, "PENDING", "Resources", spec_hash=H)),
        Pending,
        "Slurm job 7 is pending: Resources",
        id="pending-job-shows-slurm-reason",
    ),
    pytest.param(
        snap(job=JobSnapshot(7, "PENDING", "Priority", spec_hash=spec_hash(SPEC2))),
        Update,
        "",
        id="pending-job-with-changed-spec-is-updated",
    ),
    pytest.param(
        snap(pods=PODS[:1], job=JobSnapshot(7, "PENDING", "Resources", spec_hash=H)),
        Cancel,
        "lost members",
        id="gang-losing-members-before-allocation-cancels",
    ),
    pytest.param(
        snap(job=JobSnapshot(7, "RUNNING", nodes=("n1", "n2"))),
        Bind,
        "",
        id="running-job-binds",
    ),
    pytest.param(
        snap(pods=PODS[:1], job=JobSnapshot(7, "RUNNING", nodes=("n1", "n2"))),
        Bind,
        "",
        id="running-job-binds-the-rest-after-a-restart",
    ),
    pytest.param(
        snap(pods=PODS[:1], spec=None, job=JobSnapshot(7, "RUNNING", nodes=("n1", "n2"))),
        Bind,
        "",
        id="running-job-binds-the-rest-when-bound-members-make-the-group-look-incomplete",
    ),
    pytest.param(
        snap(job=JobSnapshot(7, "CANCELLED", "None")),
        Ended,
        "CANCELLED",
        id="job-cancelled-before-allocation-ends",
    ),
    pytest.param(
        snap(job=JobSnapshot(7, "CONFIGURING")),
        Pending,
        "CONFIGURING",
        id="transient-state-waits",
    ),
    pytest.param(
        snap(job=JobSnapshot(7, "RUNNING"), job_unread=True),
        ReadJob,
        "",
        id="job-the-poller-stopped-following-before-it-could-be-bound-is-read-again-never-stalls",
    ),
    pytest.param(
        snap(job=JobSnapshot(7, "SUSPENDED"), job_unread=True),
        ReadJob,
        "",
        id="suspended-job-marked-unread-is-read-again",
    ),
    pytest.param(
        snap(job=JobSnapshot(7, "PENDING", "Resources", spec_hash=H), job_unread=True),
        Pending,
        "Slurm job 7 is pending: Resources",
        id="restored-pending-job-is-left-alone-unread",
    ),
    pytest.param(
        snap(
            pods=PODS[:1], job=JobSnapshot(7, "PENDING", "Resources", spec_hash=H), job_unread=True
        ),
        ReadJob,
        "",
        id="restored-job-is-read-before-a-member-loss-cancels-it",
    ),
    pytest.param(
        snap(
            job=JobSnapshot(7, "PENDING", "Priority", spec_hash=spec_hash(SPEC2)), job_unread=True
        ),
        ReadJob,
        "",
        id="restored-job-is-read-before-a-new-spec-updates-it",
    ),
    pytest.param(snap(may_create=False), AwaitSweep, "", id="new-job-waits-for-the-sweep"),
    pytest.param(
        snap(may_create=False, job=JobSnapshot(7, "RUNNING", nodes=("n1", "n2"))),
        Bind,
        "",
        id="binding-does-not-wait-for-the-sweep",
    ),
    pytest.param(
        snap(slurm_unreachable="Slurm REST API unreachable: x"),
        Unreachable,
        "unreachable",
        id="no-blind-submit-while-slurm-is-unreachable",
    ),
    pytest.param(
        snap(
            slurm_unreachable="Slurm REST API unreachable: x",
            job=JobSnapshot(7, "PENDING", "Resources", spec_hash=H),
        ),
        Unreachable,
        "unreachable",
        id="pending-pods-say-slurm-is-unreachable-not-a-stale-reason",
    ),
    pytest.param(
        snap(slurm_unreachable="x", job=JobSnapshot(7, "RUNNING", nodes=("n1", "n2"))),
        Bind,
        "",
        id="an-allocated-job-binds-during-an-outage",
    ),
    pytest.param(
        snap(slurm_unreachable="x", pods=PODS[:1], job=None),
        Wait,
        "1 of 2 pods",
        id="an-incomplete-group-still-waits-during-an-outage",
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


def bind(job: JobSnapshot, pods: tuple[PodView, ...]) -> Bind:
    d = decide(snap(job=job, pods=pods, expected=len(pods)))
    assert isinstance(d, Bind)
    return d


def test_an_exclusive_job_binds_one_pod_per_node() -> None:
    d = bind(JobSnapshot(7, "RUNNING", nodes=("n1", "n2")), PODS)
    assert d.tasks_per_node is None


def test_a_shared_job_without_cpu_counts_spreads_pods_as_slurm_blocks_them() -> None:
    three = (*PODS, PodView("default/c", "uc"))
    d = bind(JobSnapshot(7, "RUNNING", nodes=("n1", "n2"), shared=True), three)
    assert d.tasks_per_node == (("n1", 2), ("n2", 1))


def test_a_shared_job_puts_as_many_pods_on_a_node_as_its_cpus_hold_tasks() -> None:
    job = JobSnapshot(
        7, "RUNNING", nodes=("n1", "n2"), shared=True, cpus=(("n1", 4), ("n2", 2)), cpus_per_task=2
    )
    assert bind(job, PODS).tasks_per_node == (("n1", 2), ("n2", 1))


def test_fewer_nodes_than_pods_binds_several_per_node_even_when_exclusive() -> None:
    d = bind(JobSnapshot(7, "RUNNING", nodes=("n1",)), PODS)
    assert d.tasks_per_node == (("n1", 2),)


@pytest.mark.parametrize(
    ("s", "start"),
    [
        (snap(), ALLOCATE),
        (snap(immediate_allocation="never"), SUBMIT),
        (snap(partition=PartitionView(pending=1)), SUBMIT),
        (snap(spec=SPEC.model_copy(update={"user_id": "1000"})), SUBMIT),
        (snap(spec=SPEC.model_copy(update={"group_id": "1000"})), SUBMIT),
        (snap(spec=SPEC.model_copy(update={"external": False})), SUBMIT),
    ],
    ids=["free", "never", "pending-in-partition", "user-identity", "group-identity", "batch"],
)
def test_the_submit_decision_carries_how_the_job_is_started(s: GroupSnapshot, start: str) -> None:
    """The start rule is decided here, not by the Starter: job/allocate runs a job as the
    token's user, so a job with an identity is always queued."""
    d = decide(s)
    assert isinstance(d, Submit)
    assert (d.start, bool(d.why)) == (start, True)


_PARTS = [
    PartitionView(),
    PartitionView(pending=1),
    PartitionView(nodes=1),
    PartitionView(max_node_cpus=1),
    PartitionView(refused=(shape_of(SPEC),)),
]
_SUBMITTING = [
    snap(),
    snap(immediate_allocation="never"),
    snap(partition=PartitionView(pending=1)),
    snap(spec=SPEC.model_copy(update={"user_id": "1000"})),
    snap(spec=SPEC.model_copy(update={"external": False})),
    snap(spec=SPEC.model_copy(update={"cpus_per_task": 8})),
]


@pytest.mark.parametrize("part", _PARTS)
@pytest.mark.parametrize("s", _SUBMITTING)
def test_deciding_the_start_again_equals_deciding_the_group_again(
    s: GroupSnapshot, part: PartitionView
) -> None:
    """The cycle decides a Submit again on the partition as it is once its allocation turn
    comes: decide_start (no second spec hash) gives what a whole decide would."""
    first = decide(s)
    assert isinstance(first, Submit)
    assert decide_start(first, s, part) == decide(replace(s, partition=part))


def test_a_pending_job_slurm_has_not_looked_at_yet_is_left_quiet() -> None:
    job = JobSnapshot(7, "PENDING", spec_hash=H)
    assert decide(snap(job=job, job_reason_awaited=True)) == Pending(
        7, "Slurm job 7 is pending: None", H, quiet=True
    )
    said = decide(snap(job=job))
    assert isinstance(said, Pending)
    assert not said.quiet
