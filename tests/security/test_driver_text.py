"""Driver text is data, not syntax (issue 39, seventh row, first half): every value from a
ResourceSlice that reaches Slurm is checked against one token pattern
(:data:`bridge.text.SLURM_TOKEN`) before use.

The attack: a forged ResourceSlice whose MIG device has ``profile: "Weight=1
Features=team-a-gpus,x:1"``. The profile became the GRES type of the external node's
registration line, and slurmctld took ``Weight=1 Features=team-a-gpus,x:1`` as fields of
the node, replacing the bridge's own features. Now the node's devices are refused, naming
the slice, the device and the attribute (a Warning event on the node; nothing is
registered), and the codec refuses any ``Gres=`` that is not words of Slurm's GRES
syntax, whatever made it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.devices.node_gres import GresTable, gres_text, registration_gres, slice_inventory
from bridge.errors import InvalidInput
from bridge.slurm.codec import codec_for
from bridge.text import gres_problem
from bridge.wellknown import EVENT_EXTERNAL_NODE_INVALID, LABEL_EXTERNAL_NODE
from controller import nodes
from controller.model import NodeWarning, RegisterExternalNode

ATTACK = "Weight=1 Features=team-a-gpus,x:1"
DRIVERS = {"gpu.nvidia.com": "gpu"}
TABLE = GresTable.of({"nvidia.com/gpu": "gpu"})
FIELD = "ResourceSlice forged: device gpu-0-mig-x: attributes.profile"
POLICY = nodes.NodePolicy(
    scheduler_name="slurm-bridge-scheduler",
    mcs_label="kubernetes",
    default_partition="sb",
    bridge_partitions=frozenset({"sb"}),
)


def forged(profile: str) -> dict[str, Any]:
    device = {
        "name": "gpu-0-mig-x",
        "attributes": {"type": {"string": "mig"}, "profile": {"string": profile}},
    }
    return {
        "metadata": {"name": "forged"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "n1",
            "pool": {"name": "n1"},
            "devices": [device],
        },
    }


def external_node() -> dict[str, Any]:
    return {
        "metadata": {"name": "n1", "labels": {LABEL_EXTERNAL_NODE: "true"}},
        "spec": {},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi"}},
    }


@pytest.mark.parametrize(
    "profile",
    [ATTACK, "1g.10gb Weight=1", "1g.10gb:7", "x,gpu:9", "a(b)", "a\nb", "a=b", "p" * 65],
    ids=["features", "space", "colon", "comma", "paren", "newline", "equals", "too-long"],
)
def test_a_forged_mig_profile_never_reaches_the_node_registration(profile: str) -> None:
    with pytest.raises(InvalidInput) as e:
        slice_inventory([forged(profile)], DRIVERS, TABLE)
    assert e.value.field == FIELD
    assert "is not a Slurm word" in str(e.value)
    devices = nodes.node_devices(external_node(), [forged(profile)], POLICY)
    actions = nodes.plan(external_node(), None, POLICY, devices=devices)
    assert not [a for a in actions if isinstance(a, RegisterExternalNode)]
    (warning,) = [a for a in actions if isinstance(a, NodeWarning)]
    assert warning.reason == EVENT_EXTERNAL_NODE_INVALID
    assert warning.message.startswith(FIELD)


def test_a_real_profile_is_registered_as_its_typed_gres() -> None:
    inv = slice_inventory([forged("1g.10gb+me")], DRIVERS, TABLE)
    assert gres_text(registration_gres(inv)) == "gpu:1g.10gb+me:1"


@pytest.mark.parametrize("version", ["v0.0.43", "v0.0.44", "v0.0.45"])
@pytest.mark.parametrize(
    "gres",
    [f"gpu:{ATTACK}:1", "gpu:1 Weight=1", "gpu:a:b:1", "gpu", "gpu:1,", "gpu:x=y:1"],
)
def test_the_codec_never_pastes_a_gres_that_is_not_slurm_words(version: str, gres: str) -> None:
    with pytest.raises(InvalidInput) as e:
        codec_for(version).encode_new_node("n1", cpus=1, memory_mib=1, gres=gres)
    assert e.value.field == "gres"


def test_the_codec_keeps_a_gres_of_words() -> None:
    body = codec_for("v0.0.45").encode_new_node(
        "n1", cpus=1, memory_mib=1, gres="gpu:1,gpu:1g.10gb+me:7"
    )
    assert body["node_conf"].endswith(" Gres=gpu:1,gpu:1g.10gb+me:7")


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=80))
def test_any_profile_text_is_a_slurm_word_or_refused(profile: str) -> None:
    try:
        inv = slice_inventory([forged(profile)], DRIVERS, TABLE)
    except InvalidInput as e:
        refused = e.field
    else:
        refused = None
    if refused is not None:
        assert refused == FIELD
        return
    text = gres_text(registration_gres(inv))
    assert gres_problem(text) is None, text
    line = codec_for("v0.0.45").encode_new_node("n1", cpus=1, memory_mib=1, gres=text)
    assert line["node_conf"].count("=") == 5  # NodeName State CPUs RealMemory Gres
