"""``slurm-bridge sandbox slurm up --topology``: the topology.yaml and slurm.conf it renders."""

from __future__ import annotations

import pytest

from bridge.errors import ConfigError
from sandbox.slurm.launcher import (
    Settings,
    Topology,
    build_parser,
    render_conf_files,
    render_slurm_conf,
    render_topology_yaml,
)


def test_block_topology_puts_the_external_nodes_in_blocks_of_the_given_size() -> None:
    text = render_topology_yaml(Settings(external_nodes=8, topology="block:2x4"))
    assert text is not None
    assert "- topology: flat\n  cluster_default: true\n  flat: true\n" in text
    assert (
        "- topology: net\n  cluster_default: false\n  block:\n    block_sizes:\n      - 4\n" in text
    )
    assert "      - block: block-0\n        nodes: kube-node-[0-3]\n" in text
    assert "      - block: block-1\n        nodes: kube-node-[4-7]\n" in text


def test_tree_topology_has_leaf_switches_under_one_spine() -> None:
    text = render_topology_yaml(Settings(external_nodes=6, topology="tree:3x2"))
    assert text is not None
    assert "      - switch: spine\n        children: leaf-[0-2]\n" in text
    assert "      - switch: leaf-2\n        nodes: kube-node-[4-5]\n" in text


def test_the_external_partition_uses_the_topology_and_tree_raises_the_switch_wait() -> None:
    conf = render_slurm_conf(Settings(external_nodes=8, topology="tree:2x4"))
    assert "PartitionName=slurm-bridge Nodes=kube-node-[0-7] Default=YES" in conf
    assert conf.count(" Topology=net") == 1
    assert "max_switch_wait=86400" in conf
    block = render_slurm_conf(Settings(external_nodes=8, topology="block:2x4"))
    assert "max_switch_wait" not in block


def test_without_a_topology_no_file_is_written() -> None:
    assert "topology.yaml" not in render_conf_files(Settings())
    assert "Topology=" not in render_slurm_conf(Settings())
    assert "topology.yaml" in render_conf_files(Settings(external_nodes=8, topology="block:2x4"))


@pytest.mark.parametrize("text", ["block", "block:2", "ring:2x4", "block:0x4", "tree:2x0"])
def test_a_bad_topology_names_the_field(text: str) -> None:
    with pytest.raises(ConfigError, match="topology"):
        Topology.parse(text)


def test_the_topology_must_cover_exactly_the_external_nodes() -> None:
    with pytest.raises(ConfigError, match="--external-nodes 8"):
        Settings(external_nodes=3, topology="block:2x4")


def test_unit_of_a_node_follows_name_order() -> None:
    topo = Topology.parse("block:2x4")
    assert [topo.unit_of(i) for i in (0, 3, 4, 7)] == ["block-0", "block-0", "block-1", "block-1"]


def test_parser_takes_the_topology_option() -> None:
    ns = build_parser().parse_args(["up", "--topology", "block:2x4", "--external-nodes", "8"])
    assert ns.topology == "block:2x4"
