"""Consecutive ranks land in one block: the allocation is ordered by topology unit before
pods (in rank order) are assigned, whatever order Slurm's node table lists the nodes in."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from bridge.translate.placement import NodeSet
from bridge.translate.topology import TopologyPolicy
from bridge.wellknown import ANNOTATION_TOPOLOGY_SPEC
from scheduler.assign import assign, network_order

# dynamic nodes registered in arrival order: the node table interleaves the two blocks
SLURM_ORDER = ["gpu-a", "gpu-e", "gpu-b", "gpu-f", "gpu-c", "gpu-g", "gpu-d", "gpu-h"]
UNIT = {n: "net:block-0" if n < "gpu-e" else "net:block-1" for n in SLURM_ORDER}


def test_ranks_0_to_3_share_a_block_and_4_to_7_the_other() -> None:
    pods = [f"ns/train-{i}" for i in range(8)]  # completion index order
    plan = assign(pods, network_order(SLURM_ORDER, UNIT), to_kube={})
    blocks = [UNIT[a.node] for a in plan]
    assert blocks == ["net:block-0"] * 4 + ["net:block-1"] * 4
    assert [a.node for a in plan][:4] == ["gpu-a", "gpu-b", "gpu-c", "gpu-d"]  # Slurm's order


def test_nodes_without_a_unit_keep_slurms_order() -> None:
    assert network_order(["c", "a", "b"], {}) == ["c", "a", "b"]
    assert network_order(["x", "a1", "y", "a2"], {"a1": "t:a", "a2": "t:a"}) == [
        "x",
        "a1",
        "a2",
        "y",
    ]


@given(st.lists(st.tuples(st.sampled_from("abcd"), st.booleans()), max_size=12))
def test_network_order_is_a_permutation_with_each_unit_contiguous(
    spec: list[tuple[str, bool]],
) -> None:
    names = [f"n{i}" for i in range(len(spec))]
    unit = {n: f"t:{u}" for n, (u, has) in zip(names, spec, strict=True) if has}
    got = network_order(names, unit)
    assert sorted(got) == sorted(names)
    units = [unit[n] for n in got if n in unit]
    for u in set(units):
        first, last = units.index(u), len(units) - 1 - units[::-1].index(u)
        assert units[first : last + 1] == [u] * (last - first + 1)


def node(name: str, spec: str | None = None, labels: dict[str, str] | None = None) -> Any:
    ann = {ANNOTATION_TOPOLOGY_SPEC: spec} if spec else {}
    return {"metadata": {"name": name, "annotations": ann, "labels": labels or {}}}


def test_node_set_reads_each_nodes_unit_from_annotation_or_labels() -> None:
    nodes = NodeSet(
        [
            node("a", spec="net:block-0"),
            node("b", labels={"x.io/block": "b1"}),
            node("c", spec="bad"),
            node("d"),
        ]
    )
    policy = TopologyPolicy(node_topology_name="net", node_topology_labels=("x.io/block",))
    assert nodes.topology_of(["a", "b", "c", "d", "gone"], policy) == {
        "a": "net:block-0",
        "b": "net:b1",
    }
