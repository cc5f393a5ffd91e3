"""A job started at once, as binding needs it, from its ``GET /resources`` answer
(:func:`scheduler.start.held_job`): what its record would say, or None (the record is
read). Against the real slurmrestd: tests/integration/test_held_job.py."""

from __future__ import annotations

from bridge.models import JobSpec
from bridge.slurm.models import JobState, NodeResources, SlurmJob
from scheduler.decide import PodView, _bind
from scheduler.snapshot import job_view
from scheduler.start import held_job

KNOWN = SlurmJob(
    job_id=7,
    name="g",
    state=JobState(primary="PENDING"),
    partition="p",
    comment="x spec=abc start=now",
    admin_comment="{}",
)
SHARED = JobSpec(name="g", min_nodes=1, tasks=10, max_nodes=3, exclusive=False, cpus_per_task=2)
ONE_THREAD = {"n0": 8, "n1": 8, "n2": 8}


def held(node: str, cores: int, *, sockets: int = 2, per_socket: int = 4) -> NodeResources:
    return NodeResources(
        node=node,
        cores=tuple(range(cores)),
        sockets_per_node=sockets,
        cores_per_socket=per_socket,
    )


def test_a_group_on_one_thread_per_core_nodes_holds_the_cpus_of_its_cores() -> None:
    job = held_job(KNOWN, SHARED, [held("n0", 8), held("n1", 2)], ONE_THREAD, pods=5)
    assert job is not None
    assert job.state.primary == "RUNNING"
    assert job.nodes == ("n0", "n1")  # Slurm's order, as its record lists them
    assert [(a.name, a.cpus) for a in job.allocation] == [("n0", 8), ("n1", 2)]
    assert job.cpus_per_task == 2
    assert job.comment == KNOWN.comment  # the spec hash the record would show
    pods = tuple(PodView(f"ns/p{i}", f"u{i}") for i in range(5))
    assert _bind(job_view(job), pods).tasks_per_node == (("n0", 4), ("n1", 1))


def test_an_exclusive_group_is_not_shared_like_its_record() -> None:
    exclusive = SHARED.model_copy(update={"exclusive": True})
    job = held_job(KNOWN, exclusive, [held("n0", 8), held("n1", 8)], ONE_THREAD, pods=2)
    assert job is not None
    assert not job_view(job).shared
    pods = (PodView("ns/a", "ua"), PodView("ns/b", "ub"))
    assert _bind(job_view(job), pods).tasks_per_node is None  # one pod per node


def test_a_node_of_two_threads_per_core_sends_the_group_to_its_record() -> None:
    two_threads = {**ONE_THREAD, "n1": 16}
    assert held_job(KNOWN, SHARED, [held("n0", 8), held("n1", 2)], two_threads, pods=5) is None


def test_a_node_missing_from_slurms_node_list_sends_the_group_to_its_record() -> None:
    assert held_job(KNOWN, SHARED, [held("n0", 8), held("n9", 2)], ONE_THREAD, pods=5) is None


def test_a_node_without_its_socket_layout_or_cores_sends_the_group_to_its_record() -> None:
    bare = NodeResources(node="n0", cores=(0, 1))
    assert held_job(KNOWN, SHARED, [bare], ONE_THREAD, pods=2) is None
    assert held_job(KNOWN, SHARED, [held("n0", 0)], ONE_THREAD, pods=2) is None


def test_nothing_held_yet_sends_the_job_to_its_record() -> None:
    assert held_job(KNOWN, SHARED, [], ONE_THREAD, pods=1) is None
    assert held_job(KNOWN, SHARED, [], ONE_THREAD, pods=3) is None


def test_one_pod_needs_its_node_only() -> None:
    job = held_job(KNOWN, SHARED, [NodeResources(node="n5")], {}, pods=1)
    assert job is not None
    assert job.nodes == ("n5",)
    assert job.allocation == ()
