"""The decide step for a heterogeneous job: one unit across its components."""

from __future__ import annotations

import pytest

from bridge.models import GroupId, JobSpec
from scheduler.decide import (
    ALLOCATE,
    SUBMIT,
    Bind,
    Cancel,
    Ended,
    GroupSnapshot,
    JobPart,
    JobView,
    PartitionView,
    Pending,
    PodView,
    Submit,
    Update,
    bind,
    decide,
    het_state,
    pending_message,
    pending_reason,
    shape_of,
    spec_hash,
    start_how,
)

G = GroupId(kind="JobSet", namespace="default", name="js", uid="u-1")
DRIVER = JobSpec(name="js", min_nodes=1, tasks=1, exclusive=False)
WORKERS = JobSpec(name="js", min_nodes=2, max_nodes=2, tasks=2, tres_per_node="gres/gpu:2")
HET = DRIVER.model_copy(update={"het_components": (WORKERS,)})
H = spec_hash(HET)
PODS = (PodView("default/d", "ud"), PodView("default/w0", "u0"), PodView("default/w1", "u1"))


def part(
    offset: int, state: str, reason: str | None = None, nodes: tuple[str, ...] = ()
) -> JobPart:
    pods = ("default/d",) if offset == 0 else ("default/w0", "default/w1")
    return JobPart(10 + offset, offset, state, reason, nodes, pods)


def view(*parts: JobPart) -> JobView:
    shown = het_state(parts)
    return JobView(
        10,
        shown.state,
        shown.reason,
        tuple(n for p in parts for n in p.nodes),
        spec_hash=H,
        parts=parts,
        shown=shown.offset,
    )


def snap(job: JobView | None = None, spec: JobSpec = HET) -> GroupSnapshot:
    return GroupSnapshot(group=G, pods=PODS, expected=3, spec=spec, job=job)


def test_a_hetjob_is_always_submitted_never_allocated_at_once() -> None:
    assert isinstance(decide(snap()), Submit)
    assert start_how("auto", shape_of(HET), PartitionView())[0] == SUBMIT
    assert start_how("auto", shape_of(DRIVER), PartitionView())[0] == ALLOCATE


def test_pods_of_component_k_bind_to_component_ks_nodes() -> None:
    d = decide(
        snap(view(part(0, "RUNNING", nodes=("n0",)), part(1, "RUNNING", nodes=("n1", "n2"))))
    )
    assert isinstance(d, Bind)
    assert [(p.nodes, [v.key for v in p.pods], p.job_id) for p in d.parts] == [
        (("n0",), ["default/d"], 10),
        (("n1", "n2"), ["default/w0", "default/w1"], 11),
    ]


def test_one_component_running_and_one_pending_is_pending_with_that_components_reason() -> None:
    job = view(part(0, "RUNNING", nodes=("n0",)), part(1, "PENDING", "Resources"))
    d = decide(snap(job))
    assert isinstance(d, Pending)
    assert d.message == "Slurm job 10 is pending: Resources (hetjob component 10+1 of 2)"
    assert pending_reason(d.message, 10) == "Resources"
    assert pending_message(job) == d.message


@pytest.mark.parametrize("ended", [0, 1])
def test_any_component_ended_ends_the_whole_gang_naming_the_component(ended: int) -> None:
    parts = [part(0, "PENDING", "Priority"), part(1, "PENDING", "Priority")]
    parts[ended] = part(ended, "CANCELLED")
    d = decide(snap(view(*parts)))
    assert isinstance(d, Ended)
    assert f"component 10+{ended}" in d.message


def test_a_changed_gang_updates_every_component_of_its_pending_hetjob() -> None:
    job = view(part(0, "PENDING", "Priority"), part(1, "PENDING", "Priority"))
    changed = HET.model_copy(update={"time_limit_minutes": 30})
    d = decide(snap(job, changed))
    assert isinstance(d, Update)
    assert d.component_ids == (10, 11)


def test_a_gang_whose_number_of_shapes_changed_gets_a_new_job() -> None:
    job = view(part(0, "PENDING", "Priority"), part(1, "PENDING", "Priority"))
    d = decide(snap(job, WORKERS.model_copy(update={"min_nodes": 3, "tasks": 3})))
    assert isinstance(d, Cancel)
    assert "shape" in d.message


def test_a_plain_job_hash_is_unchanged_by_the_hetjob_field() -> None:
    assert spec_hash(DRIVER) == spec_hash(DRIVER.model_copy(update={"het_components": ()}))
    assert spec_hash(HET) != spec_hash(DRIVER)


def test_bind_of_a_shared_component_packs_its_pods_by_its_own_cpus() -> None:
    shared = JobPart(11, 1, "RUNNING", None, ("n1",), ("default/w0", "default/w1"), True)
    job = JobView(
        10, "RUNNING", nodes=("n0", "n1"), parts=(part(0, "RUNNING", nodes=("n0",)), shared)
    )
    d = bind(job, PODS)
    assert d.parts[1].tasks_per_node == (("n1", 2),)
    assert d.parts[0].tasks_per_node is None
