"""The one packer (issue #40): Slurm's whole MIG layout of a node placed on the devices
NVIDIA's DRA driver publishes, exactly (whenever a packing exists), by attributes and
counters (never names), the same in every process; the claims, the GRES condition and
the registration all use it."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from bridge.config import DEFAULT_GRES_MAPPING
from bridge.devices import packing
from bridge.devices.allocation import (
    DeviceId,
    Ledger,
    SlurmLayout,
    SlurmNodeView,
    allocate_pod,
    node_devices,
    packing_node,
)
from bridge.devices.node_gres import (
    Agreement,
    GresTable,
    compare,
    gres_text,
    registration_gres,
    slice_inventory,
)
from bridge.errors import DeviceMismatch
from bridge.translate.dra import DeviceRequest
from sandbox.controllers import dra_driver
from sandbox.controllers.dra_driver import (
    NAMINGS,
    NVIDIA_CURRENT,
    PUBLISH_STATIC,
    MigPublish,
)

DRIVER = "gpu.nvidia.com"
TABLE = GresTable.of(DEFAULT_GRES_MAPPING)
PROFILES = {f"gpu:{p}": p for p in ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb")}
# the issue's node: two A100-80GB, GPU 0 NVIDIA's "balanced" layout, GPU 1 seven 1g.10gb
BALANCED = (("3g.40gb", 4), ("2g.20gb", 0), ("1g.10gb", 2), ("1g.10gb", 3))
SEVEN = tuple(("1g.10gb", k) for k in range(7))
# Slurm's Gres= (types in gres.conf order) and its numbering: 3g IDX 0, 2g 1, 1g 2-10
LAYOUT = (("gpu:3g.40gb", 1), ("gpu:2g.20gb", 1), ("gpu:1g.10gb", 9))
GRES = "gpu:3g.40gb:1,gpu:2g.20gb:1,gpu:1g.10gb:9"


def issue_node(form: MigPublish = NVIDIA_CURRENT) -> list[dict[str, Any]]:
    return dra_driver.mig_slices("n1", 2, form=form, static=(BALANCED, SEVEN))


def request(profile: str, count: int = 1) -> DeviceRequest:
    return DeviceRequest(
        claim="g",
        request="r",
        device_class="mig.nvidia.com",
        driver=DRIVER,
        gres=f"gpu:{profile}",
        count=count,
        profile=profile,
    )


def parent_of(slices: list[dict[str, Any]], device: str) -> int:
    d = next(x for x in node_devices(slices, DRIVER) if x.id.device == device)
    return int(d.gpu_number if d.gpu_number is not None else -1)


def test_nvidias_current_publication_has_counters_and_devices_in_separate_slices() -> None:
    slices = issue_node()
    assert [bool(s["spec"].get("sharedCounters")) for s in slices] == [False, True]
    names = {d["name"] for d in slices[0]["spec"]["devices"]}
    assert {"gpu-0-mig-3g40gb-4-7", "gpu-1-mig-1g10gb-6", "gpu-0"} <= names
    mig = next(d for d in slices[0]["spec"]["devices"] if d["name"] == "gpu-0-mig-3g40gb-4-7")
    assert set(mig["attributes"]) >= {"type", "profile", "parentUUID", "parentMinor"}
    assert "placement" not in mig["attributes"]


def test_the_issues_layout_is_compatible_not_only_8_of_9_fit() -> None:
    inv = slice_inventory(issue_node(), {DRIVER: "gpu"}, TABLE)
    v = compare(GRES, inv, slurm_node="n1", table=TABLE)
    assert v.status is Agreement.COMPATIBLE, v.message


def test_the_issues_layout_packs_with_the_3g_at_4_and_seven_1g_on_gpu_1() -> None:
    slices = issue_node()
    layout = SlurmLayout.of(LAYOUT, PROFILES)
    found = packing.pack(packing_node(node_devices(slices, DRIVER), slices, layout), layout.want)
    assert isinstance(found, packing.Packing), str(found)
    assert found.devices["gpu:3g.40gb"] == ("n1/gpu-0-mig-3g40gb-4-7",)
    ones = [parent_of(slices, k.split("/")[1]) for k in found.devices["gpu:1g.10gb"]]
    assert ones == [0, 0] + [1] * 7  # Slurm's order: GPU by GPU


def test_slurms_indices_of_the_issues_layout_give_every_job_its_own_fitting_slice() -> None:
    slices = issue_node()
    taken: set[DeviceId] = set()
    got: dict[int, str] = {}
    order = list(range(11))
    random.Random(40).shuffle(order)
    for idx in order:
        profile = "3g.40gb" if idx == 0 else "2g.20gb" if idx == 1 else "1g.10gb"
        view = SlurmNodeView(gres={f"gpu:{profile}": (idx,)}, gres_layout=LAYOUT)
        picked = allocate_pod("n1", [request(profile)], view, slices, taken, PROFILES)
        (p,) = picked.values()
        got[idx] = p.devices[0].device
    assert len(set(got.values())) == 11
    ledger = Ledger.of(node_devices(slices, DRIVER), slices, taken)
    assert ledger.overcommitted() == []
    assert [parent_of(slices, got[i]) for i in range(2, 11)] == [0, 0] + [1] * 7


def test_where_slurm_only_counts_every_order_of_the_issues_jobs_fits() -> None:
    slices = issue_node()
    jobs = ["3g.40gb", "2g.20gb"] + ["1g.10gb"] * 9
    for seed in range(5):
        random.Random(seed).shuffle(jobs)
        taken: set[DeviceId] = set()
        for profile in jobs:
            gres = f"gpu:{profile}"
            view = SlurmNodeView(gres={gres: None}, gres_layout=LAYOUT, counts={gres: 1})
            allocate_pod("n1", [request(profile)], view, slices, taken, PROFILES)
            # each job's count is its own: the next job starts from the claims alone
            taken = {d for d in taken if d.driver == DRIVER}
        assert len(taken) == 11
        ledger = Ledger.of(node_devices(slices, DRIVER), slices, taken)
        assert ledger.overcommitted() == []


@pytest.mark.parametrize(
    "form",
    [
        *(
            MigPublish(naming=n, parent_attr=a)
            for n in NAMINGS
            for a in ("parentIndex", "parentMinor")
        ),
        MigPublish(PUBLISH_STATIC, parent_attr="parentMinor", placement=False),
        MigPublish(PUBLISH_STATIC),
    ],
    ids=lambda f: f"{f.publish}-{f.naming}-{f.parent_attr}",
)
def test_every_publication_form_gives_the_same_answer(form: MigPublish) -> None:
    slices = issue_node(form)
    inv = slice_inventory(slices, {DRIVER: "gpu"}, TABLE)
    assert compare(GRES, inv, slurm_node="n1", table=TABLE).status is Agreement.COMPATIBLE
    taken: set[DeviceId] = set()
    for idx in range(11):
        profile = "3g.40gb" if idx == 0 else "2g.20gb" if idx == 1 else "1g.10gb"
        view = SlurmNodeView(gres={f"gpu:{profile}": (idx,)}, gres_layout=LAYOUT)
        allocate_pod("n1", [request(profile)], view, slices, taken, PROFILES)
    assert Ledger.of(node_devices(slices, DRIVER), slices, taken).overcommitted() == []


def test_names_are_not_read_renamed_devices_pack_the_same() -> None:
    slices = issue_node()
    renamed = []
    for s in slices:
        s = {**s, "spec": dict(s["spec"])}
        if "devices" in s["spec"]:
            s["spec"]["devices"] = [
                {**d, "name": f"dev-{i:03d}"} for i, d in enumerate(s["spec"]["devices"])
            ]
        renamed.append(s)
    inv = slice_inventory(renamed, {DRIVER: "gpu"}, TABLE)
    assert compare(GRES, inv, slurm_node="n1", table=TABLE).status is Agreement.COMPATIBLE


def test_the_packing_does_not_depend_on_the_order_of_the_slices_or_devices() -> None:
    slices = issue_node()
    layout = SlurmLayout.of(LAYOUT, PROFILES)
    first = packing.pack(packing_node(node_devices(slices, DRIVER), slices, layout), layout.want)
    for seed in range(3):
        shuffled = [{**s, "spec": dict(s["spec"])} for s in reversed(slices)]
        for s in shuffled:
            if "devices" in s["spec"]:
                devices = list(s["spec"]["devices"])
                random.Random(seed).shuffle(devices)
                s["spec"]["devices"] = devices
        again = packing.pack(
            packing_node(node_devices(shuffled, DRIVER), shuffled, layout), layout.want
        )
        assert again == first


def test_an_unpackable_layout_names_the_short_type_and_gives_the_job_back() -> None:
    slices = issue_node()
    bad = (("gpu:3g.40gb", 4), ("gpu:1g.10gb", 2))  # four 3g.40gb fill both GPUs
    view = SlurmNodeView(gres={"gpu:1g.10gb": (3,)}, gres_layout=bad)
    with pytest.raises(DeviceMismatch) as e:
        allocate_pod("n1", [request("1g.10gb")], view, slices, set(), PROFILES)
    assert "gpu:1g.10gb: 2 wanted, only 0 fit" in str(e.value)
    assert "counter-set/memory" in str(e.value)  # the counter in the way
    inv = slice_inventory(slices, {DRIVER: "gpu"}, TABLE)
    v = compare("gpu:3g.40gb:5,gpu:1g.10gb:2", inv, slurm_node="n1", table=TABLE)
    assert v.status is Agreement.INCOMPATIBLE
    assert "Slurm has gpu:3g.40gb:5 but the node's ResourceSlices have 4" in v.message
    assert "Slurm has gpu:1g.10gb:2 but only 0 of them fit" in v.message


def test_static_mig_needs_slurm_to_have_every_created_instance() -> None:
    slices = issue_node(MigPublish(PUBLISH_STATIC))
    inv = slice_inventory(slices, {DRIVER: "gpu"}, TABLE)
    assert gres_text(registration_gres(inv)) == "gpu:1g.10gb:9,gpu:2g.20gb:1,gpu:3g.40gb:1"
    v = compare("gpu:3g.40gb:1,gpu:2g.20gb:1,gpu:1g.10gb:8", inv, slurm_node="n1", table=TABLE)
    assert v.status is Agreement.INCOMPATIBLE


def test_a_static_slice_and_its_gpus_full_device_exclude_each_other_without_counters() -> None:
    units = [
        packing.Unit("gpu-0", "whole", uuid="U0"),
        packing.Unit("m0", "1g", part=True, parent="U0"),
        packing.Unit("m1", "1g", part=True, parent="U0"),
    ]
    node = packing.node_of(units, {})
    assert isinstance(packing.pack(node, {"1g": 2}), packing.Packing)
    assert isinstance(packing.pack(node, {"whole": 1}), packing.Packing)
    assert isinstance(packing.pack(node, {"whole": 1, "1g": 1}), packing.Unpackable)


def test_held_devices_stay_in_the_packing_or_it_says_so() -> None:
    slices = issue_node()
    layout = SlurmLayout.of(LAYOUT, PROFILES)
    node = packing_node(node_devices(slices, DRIVER), slices, layout)
    # 1g.10gb slices held at placements 0 and 4 of both GPUs leave no room for a 3g.40gb
    held = {f"n1/gpu-{g}-mig-1g10gb-{k}" for g in (0, 1) for k in (0, 4)}
    found = packing.pack(node, layout.want, fixed=held)
    assert isinstance(found, packing.Unpackable)
    assert "the devices held already cannot be part of a packing" in str(found)
    ok = packing.pack(node, layout.want, fixed={"n1/gpu-0-mig-1g10gb-4"})
    assert isinstance(ok, packing.Packing)  # GPU 1 takes the 3g.40gb then
    assert "n1/gpu-0-mig-1g10gb-4" in ok.devices["gpu:1g.10gb"]
    # a held device of a kind Slurm's layout lacks can never be part of it
    alien = packing.pack(node, layout.want, fixed={"n1/gpu-0-mig-4g40gb-0-3"})
    assert isinstance(alien, packing.Unpackable)


@pytest.mark.parametrize("gpus", [1, 2, 3])
def test_every_count_of_one_kind_up_to_what_the_gpus_hold_packs(gpus: int) -> None:
    slices = dra_driver.mig_slices("n1", gpus)
    for profile, most in (("1g.10gb", 7), ("2g.20gb", 3), ("3g.40gb", 2), ("1g.20gb", 4)):
        for n in range(1, most * gpus + 2):
            layout = SlurmLayout.of(((f"gpu:{profile}", n),), PROFILES)
            node = packing_node(node_devices(slices, DRIVER), slices, layout)
            found = packing.pack(node, layout.want)
            assert isinstance(found, packing.Packing) == (n <= most * gpus), (profile, n)


def test_natural_order_puts_gpu_10_after_gpu_9() -> None:
    names = [f"gpu-{i}" for i in (10, 9, 1, 0)]
    assert sorted(names, key=packing.natural) == ["gpu-0", "gpu-1", "gpu-9", "gpu-10"]
    assert list(itertools.islice(sorted(names), 1)) == ["gpu-0"]
