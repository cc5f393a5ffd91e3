"""Codec bodies for external-node registration: comment, partition membership, GRES."""

from __future__ import annotations

import pytest

from bridge.errors import InvalidInput
from bridge.slurm.codec import SUPPORTED_VERSIONS, codec_for


def test_partition_node_change_body_uses_scontrols_plus_syntax() -> None:
    body = codec_for("v0.0.45").encode_partition_nodes("slurm-bridge", "+ext-1")
    assert body == {"partitions": [{"name": "slurm-bridge", "nodes": {"configured": "+ext-1"}}]}


@pytest.mark.parametrize("name", ["", "a b", "a,b", "a=b"], ids=["empty", "space", "comma", "eq"])
def test_partition_node_change_rejects_bad_partition_names(name: str) -> None:
    with pytest.raises(InvalidInput) as e:
        codec_for("v0.0.45").encode_partition_nodes(name, "+n")
    assert e.value.field == "partition"


@pytest.mark.parametrize(
    ("version", "supported"),
    [pytest.param(v, v >= "v0.0.45", id=v) for v in SUPPORTED_VERSIONS],
)
def test_partition_update_only_from_v0045(version: str, supported: bool) -> None:
    assert codec_for(version).supports_partition_update is supported


def test_node_comment_body_sets_only_the_comment() -> None:
    assert codec_for("v0.0.44").encode_node_comment("mark") == {"comment": "mark"}


def test_new_node_line_carries_gres_and_features() -> None:
    body = codec_for("v0.0.45").encode_new_node(
        "ext-1", cpus=4, memory_mib=1024, features=["a", "b"], gres="gpu:2"
    )
    assert body == {
        "node_conf": "NodeName=ext-1 State=EXTERNAL CPUs=4 RealMemory=1024 Features=a,b Gres=gpu:2"
    }
