"""An external node's place in the network (upstream's annotation, else configured labels)
becomes its Slurm Topology=, set again whenever the two differ; a bad value is a Warning on
the node, naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.slurm.models import SlurmNode
from bridge.translate.topology import TopologyPolicy
from bridge.wellknown import ANNOTATION_TOPOLOGY_SPEC, LABEL_EXTERNAL_NODE
from controller import nodes
from controller.model import NodeWarning, RegisterExternalNode, SetNodeTopology

MARK = "slurm-bridge:external-node:kubernetes"
BLOCK = "network.example.com/block"
SPINE, LEAF = "network.example.com/spine", "network.example.com/leaf"


def policy(name: str | None = None, labels: tuple[str, ...] = ()) -> nodes.NodePolicy:
    return nodes.NodePolicy(
        scheduler_name="slurm-bridge-scheduler",
        mcs_label="kubernetes",
        default_partition="sb",
        bridge_partitions=frozenset({"sb"}),
        topology=TopologyPolicy(node_topology_name=name, node_topology_labels=labels),
    )


def knode(labels: dict[str, str] | None = None, spec: str | None = None) -> dict[str, Any]:
    ann = {ANNOTATION_TOPOLOGY_SPEC: spec} if spec is not None else {}
    return {
        "metadata": {
            "name": "n1",
            "labels": {LABEL_EXTERNAL_NODE: "true", **(labels or {})},
            "annotations": ann,
        },
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi"}},
    }


def ours(topology: str = "") -> SlurmNode:
    return SlurmNode(
        name="n1",
        state=frozenset({"IDLE", "EXTERNAL", "DYNAMIC_NORM"}),
        partitions=("sb",),
        comment=MARK,
        topology=topology,
    )


def topo_actions(actions: list[Any]) -> list[Any]:
    return [a for a in actions if isinstance(a, SetNodeTopology | NodeWarning)]


@pytest.mark.parametrize(
    ("node", "pol", "slurm_has", "want"),
    [
        pytest.param(knode(spec="net:block-1"), policy(), "", "net:block-1", id="annotation"),
        pytest.param(
            knode({BLOCK: "b7"}, spec="net:block-1"),
            policy("net", (BLOCK,)),
            "",
            "net:block-1",
            id="annotation-over-labels",
        ),
        pytest.param(knode({BLOCK: "b7"}), policy("net", (BLOCK,)), "", "net:b7", id="block-label"),
        pytest.param(
            knode({SPINE: "s0", LEAF: "l3"}),
            policy("fabric", (SPINE, LEAF)),
            "",
            "fabric:s0:l3",
            id="tree-labels-top-down",
        ),
        pytest.param(
            knode({BLOCK: "b7"}), policy("net", (BLOCK,)), "net:b1", "net:b7", id="changed-label"
        ),
        pytest.param(knode({BLOCK: "b7"}), policy("net", (BLOCK,)), "net:b7", None, id="in-sync"),
        pytest.param(
            knode({SPINE: "s0"}), policy("f", (SPINE, LEAF)), "", None, id="label-missing"
        ),
        pytest.param(knode(), policy(), "net:b1", None, id="nothing-asked-nothing-changed"),
    ],
)
def test_node_topology_is_synced_into_slurm(
    node: dict[str, Any], pol: nodes.NodePolicy, slurm_has: str, want: str | None
) -> None:
    got = topo_actions(nodes.plan(node, ours(slurm_has), pol))
    assert got == ([SetNodeTopology("n1", "n1", want)] if want else [])


def test_a_new_node_is_registered_first_and_gets_its_topology_on_the_next_pass() -> None:
    actions = nodes.plan(knode(spec="net:block-0"), None, policy())
    assert [type(a) for a in actions if not isinstance(a, NodeWarning)][:1] == [
        RegisterExternalNode
    ]
    assert not topo_actions(actions)


@pytest.mark.parametrize(
    ("node", "pol", "field"),
    [
        (knode(spec="block-0"), policy(), f"metadata.annotations[{ANNOTATION_TOPOLOGY_SPEC}]"),
        (knode({BLOCK: "b 7"}), policy("net", (BLOCK,)), f"metadata.labels[{BLOCK}]"),
    ],
    ids=["annotation-without-topology-name", "label-value-with-space"],
)
def test_bad_topology_is_a_warning_naming_the_field(
    node: dict[str, Any], pol: nodes.NodePolicy, field: str
) -> None:
    (warning,) = topo_actions(nodes.plan(node, ours(), pol))
    assert isinstance(warning, NodeWarning)
    assert field in warning.message
