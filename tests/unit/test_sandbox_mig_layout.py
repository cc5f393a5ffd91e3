"""The sandbox's MIG node layout (``up --mig-layout``, sandbox/slurm/mig.py): what Slurm
is told (Gres=, gres.conf in index order), and layouts a GPU cannot hold are refused."""

from __future__ import annotations

import pytest

from bridge.devices.mig import nvidia_mig_gpu
from bridge.errors import ConfigError
from sandbox.controllers import dra_driver
from sandbox.slurm.launcher import Settings, mig_node_conf, render_gres_conf
from sandbox.slurm.mig import Device, MigLayout

MIXED = "a100,3g.40gb+2g.20gb+1g.10gb*2"


def test_a_mixed_layout_numbers_its_devices_gpu_by_gpu() -> None:
    layout = MigLayout.parse(MIXED)
    assert layout.devices == (
        Device(0, 0, "a100"),
        Device(1, 1, "3g.40gb"),
        Device(2, 1, "2g.20gb"),
        Device(3, 1, "1g.10gb"),
        Device(4, 1, "1g.10gb"),
    )
    assert layout.devices[0].whole
    assert not layout.devices[1].whole
    assert layout.gres == "gpu:a100:1,gpu:3g.40gb:1,gpu:2g.20gb:1,gpu:1g.10gb:2"
    assert str(layout) == MIXED
    assert MigLayout.parse(str(layout)) == layout


def test_gres_conf_lists_the_devices_in_index_order_a_file_each() -> None:
    s = Settings(external_nodes=0, node_gpus=0, mig_nodes=2, mig_layout=MIXED)
    assert render_gres_conf(s).splitlines()[1:] == [
        "NodeName=mig-node-[0-1] Name=gpu Type=a100 File=/var/lib/fakegpu/mig0",
        "NodeName=mig-node-[0-1] Name=gpu Type=3g.40gb File=/var/lib/fakegpu/mig1",
        "NodeName=mig-node-[0-1] Name=gpu Type=2g.20gb File=/var/lib/fakegpu/mig2",
        "NodeName=mig-node-[0-1] Name=gpu Type=1g.10gb File=/var/lib/fakegpu/mig[3-4]",
    ]
    assert "Gres=gpu:a100:1,gpu:3g.40gb:1,gpu:2g.20gb:1,gpu:1g.10gb:2 " in mig_node_conf(s)


def test_without_a_layout_a_node_is_one_gpu_of_the_profile_and_slices_as_before() -> None:
    s = Settings(external_nodes=0, node_gpus=0, mig_nodes=1, mig_slices=3)
    assert str(s.mig) == "1g.10gb*3"
    assert s.mig.gres == "gpu:1g.10gb:3"


@pytest.mark.parametrize(
    ("layout", "gpu", "why"),
    [
        pytest.param("4g.40gb*2", "A100-80GB", "takes 8 compute", id="over-compute"),
        pytest.param("3g.40gb*2+1g.10gb", "A100-80GB", "and 9 memory", id="over-memory"),
        pytest.param("1g.5gb", "A100-80GB", "has no MIG profile '1g.5gb'", id="other-models"),
        pytest.param("a100+1g.10gb", "A100-80GB", "neither a whole GPU", id="whole-in-mig"),
        pytest.param("1g.10gb*9", "A100-80GB", "repeats 1..7 times", id="too-many"),
        pytest.param("1g.10gb", "V100", "not a MIG GPU model", id="unknown-model"),
    ],
)
def test_a_layout_no_gpu_can_hold_is_refused_naming_it(layout: str, gpu: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why) as e:
        Settings(mig_nodes=1, mig_layout=layout, mig_gpu=gpu)
    assert e.value.key in {"mig_layout", "mig_gpu"}


def test_every_gpu_of_the_default_benchmark_layout_fits_an_a100_80gb() -> None:
    MigLayout.parse(MIXED).check(nvidia_mig_gpu("A100-80GB"))


def test_whole_gpus_before_the_slices_make_a_mixed_node() -> None:
    s = Settings(external_nodes=0, node_gpus=0, mig_nodes=1, mig_full_gpus=1)
    assert str(s.mig) == "a100,1g.10gb*7"
    assert s.mig.gres == "gpu:a100:1,gpu:1g.10gb:7"
    assert "Gres=gpu:a100:1,gpu:1g.10gb:7 " in mig_node_conf(s)
    with pytest.raises(ConfigError, match="part of --mig-layout"):
        Settings(mig_nodes=1, mig_full_gpus=1, mig_layout=MIXED)


ISSUE = "3g.40gb+2g.20gb+1g.10gb*2,1g.10gb*7"


def test_a_multi_gpu_layout_as_users_write_it_is_numbered_gpu_by_gpu_each_type_together() -> None:
    s = Settings(external_nodes=0, node_gpus=0, mig_nodes=1, mig_layout=ISSUE)
    assert s.mig.gres == "gpu:3g.40gb:1,gpu:2g.20gb:1,gpu:1g.10gb:9"
    assert render_gres_conf(s).splitlines()[1:] == [
        "NodeName=mig-node-0 Name=gpu Type=3g.40gb File=/var/lib/fakegpu/mig0",
        "NodeName=mig-node-0 Name=gpu Type=2g.20gb File=/var/lib/fakegpu/mig1",
        "NodeName=mig-node-0 Name=gpu Type=1g.10gb File=/var/lib/fakegpu/mig[2-10]",
    ]
    # where the instances sit on a real A100-80GB: NVIDIA's balanced layout
    assert MigLayout.parse(ISSUE).placements(nvidia_mig_gpu("A100-80GB"))[0] == (
        ("3g.40gb", 4),
        ("2g.20gb", 0),
        ("1g.10gb", 2),
        ("1g.10gb", 3),
    )


@pytest.mark.parametrize(
    ("key", "value"), [("mig_publish", "sometimes"), ("mig_naming", "gpu-<uuid>")]
)
def test_an_unknown_publication_form_or_naming_scheme_is_refused_naming_the_key(
    key: str, value: str
) -> None:
    with pytest.raises(ConfigError) as e:
        Settings(mig_nodes=1, **{key: value})  # type: ignore[arg-type]
    assert e.value.key == key


@pytest.mark.parametrize("publish", ["dynamic", "static"])
@pytest.mark.parametrize("naming", ["profile-id-start", "id-start-size", "profile-start-end"])
def test_the_stand_in_publishes_a_layout_in_each_form_and_naming(publish: str, naming: str) -> None:
    pool = dra_driver.mig_pool("n", MigLayout.parse(ISSUE), publish=publish, naming=naming)
    devices = [d for s in pool for d in s["spec"].get("devices") or []]
    migs = [d for d in devices if d["attributes"]["type"] == {"string": "mig"}]
    if publish == "static":
        assert len(devices) == len(migs) == 11  # the instances only, no counters
        assert not any("consumesCounters" in d for d in devices)
    else:
        assert len(migs) == 2 * 18  # every placement of each GPU
        assert all("consumesCounters" in d for d in migs)
    parent = "parentMinor" if naming == "profile-start-end" else "parentIndex"
    assert all(parent in d["attributes"] for d in migs)
