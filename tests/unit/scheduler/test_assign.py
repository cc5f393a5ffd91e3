"""Pod-to-node assignment is deterministic, respects capacity and resumes after a restart."""

import pytest

from scheduler.assign import Assignment, AssignmentError, assign, tasks_per_node_even


def test_exclusive_gang_gets_one_pod_per_node_in_order() -> None:
    got = assign(["ns/lws-0", "ns/lws-0-1", "ns/lws-0-2"], ["n1", "n2", "n3"], to_kube={})
    assert got == [
        Assignment("ns/lws-0", "n1"),
        Assignment("ns/lws-0-1", "n2"),
        Assignment("ns/lws-0-2", "n3"),
    ]


def test_slurm_names_map_to_kubernetes_names() -> None:
    got = assign(["ns/a"], ["slurm-7"], to_kube={"slurm-7": "worker-7"})
    assert got == [Assignment("ns/a", "worker-7")]


def test_shared_packing_fills_each_node_to_its_task_count() -> None:
    pods = [f"ns/p{i}" for i in range(5)]
    got = assign(pods, ["n1", "n2"], to_kube={}, tasks_per_node={"n1": 3, "n2": 2})
    assert [a.node for a in got] == ["n1", "n1", "n1", "n2", "n2"]


def test_restart_keeps_earlier_choices_and_fills_the_rest() -> None:
    got = assign(
        ["ns/p0", "ns/p1", "ns/p2"], ["n1", "n2", "n3"], to_kube={}, already={"ns/p1": "n1"}
    )
    assert got == [
        Assignment("ns/p0", "n2"),
        Assignment("ns/p1", "n1"),
        Assignment("ns/p2", "n3"),
    ]


@pytest.mark.parametrize(
    ("pods", "nodes", "already"),
    [
        pytest.param(["a", "b"], ["n1"], {}, id="more-pods-than-slots"),
        pytest.param(["a"], ["n1"], {"a": "elsewhere"}, id="earlier-choice-not-allocated"),
    ],
)
def test_impossible_assignment_raises(
    pods: list[str], nodes: list[str], already: dict[str, str]
) -> None:
    with pytest.raises(AssignmentError):
        assign(pods, nodes, to_kube={}, already=already)


@pytest.mark.parametrize(
    ("tasks", "want"),
    [(3, {"a": 2, "b": 1}), (4, {"a": 2, "b": 2}), (1, {"a": 1, "b": 0})],
    ids=["odd", "even", "fewer-than-nodes"],
)
def test_even_spread_matches_block_distribution(tasks: int, want: dict[str, int]) -> None:
    assert tasks_per_node_even(["a", "b"], tasks) == want
