"""MIG slices through DRA (issue #33): a claim's DeviceClass and CEL selectors pick a
profile (-> the typed GRES of the config's table), and the claim gets exactly the slices
Slurm gave, never past a GPU's shared counters, never one slice twice."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    taken_devices,
)
from bridge.errors import DeviceAllocationError, DeviceMismatch, InvalidInput
from bridge.translate.dra import DeviceRequest, DraInputs, pod_devices
from bridge.translate.job import with_devices
from bridge.translate.resources import pod_resources
from bridge.translate.selectors import compile_selectors, device_variable, matches
from sandbox.controllers import dra_driver

DRIVER = "gpu.nvidia.com"
GRES = {"gpu.nvidia.com": "gpu"}
PROFILES = {"gpu:1g.10gb": "1g.10gb", "gpu:2g.20gb": "2g.20gb", "gpu:3g.40gb": "3g.40gb"}
CLASSES = {c["metadata"]["name"]: c for c in dra_driver.device_classes()}
SLICES = dra_driver.mig_slices("n1", 1, full_gpus=1)  # gpu-0 whole, gpu-1 partitionable


def attr(name: str, op: str = "==", value: str = '"1g.10gb"') -> dict[str, Any]:
    return {"cel": {"expression": f'device.attributes["{DRIVER}"].{name} {op} {value}'}}


def inputs(**kw: Any) -> DraInputs:
    base: dict[str, Any] = {
        "classes": CLASSES,
        "device_class_gres": GRES,
        "gres_mapping": DEFAULT_GRES_MAPPING,
        "slices": SLICES,
    }
    return DraInputs(**{**base, **kw})


def claim_pod(cls: str, selectors: list[Any] | None = None, count: int = 1) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": cls, "count": count}
    if selectors:
        exactly["selectors"] = selectors
    template = {"spec": {"spec": {"devices": {"requests": [{"name": "r", "exactly": exactly}]}}}}
    return {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {
            "containers": [{"name": "c"}],
            "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "t"}],
        },
        "_template": template,
    }


def translate(p: dict[str, Any], **kw: Any) -> DeviceRequest:
    (r,) = pod_devices(p, inputs(templates={"t": p.pop("_template")}, **kw)).requests
    return r


# --- which GRES a claim asks Slurm for ---------------------------------------------------


@pytest.mark.parametrize(
    "selectors",
    [
        [attr("profile")],
        [attr("type", value='"mig"'), attr("profile")],
        [attr("profile", "in", '["1g.10gb"]')],
        [{"cel": {"expression": f'device.attributes["{DRIVER}"].profile.startsWith("1g.1")'}}],
        [attr("profile"), attr("parentIndex", "==", "1")],
    ],
    ids=["profile", "type-and-profile", "in-list", "startsWith", "parent-check"],
)
def test_mig_class_and_cel_selector_become_the_profiles_typed_gres(
    selectors: list[Any],
) -> None:
    r = translate(claim_pod("mig.nvidia.com", selectors, count=2))
    assert (r.gres, r.profile, r.count) == ("gpu:1g.10gb", "1g.10gb", 2)


def test_per_profile_class_needs_no_request_selector() -> None:
    cls = dra_driver.mig_profile_class("2g.20gb")
    r = translate(
        claim_pod(cls["metadata"]["name"]), classes={**CLASSES, cls["metadata"]["name"]: cls}
    )
    assert (r.gres, r.profile) == ("gpu:2g.20gb", "2g.20gb")


def class_and_pod(resource: str, n: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A 1g.10gb DeviceClass naming ``resource`` as its extendedResourceName, and a pod
    with a limit of ``n`` of it."""
    cls = dra_driver.mig_profile_class("1g.10gb", resource)
    containers = [{"name": "c", "resources": {"limits": {resource: n}}}]
    return cls, {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": containers}}


def test_dra_extended_resource_form_of_a_mig_class_is_the_typed_gres() -> None:
    cls, p = class_and_pod("example.com/mig-1g.10gb", "3")
    (r,) = pod_devices(p, inputs(classes={**CLASSES, cls["metadata"]["name"]: cls})).requests
    assert (r.claim, r.gres, r.profile, r.count) == (None, "gpu:1g.10gb", "1g.10gb", 3)


def test_a_site_gres_name_for_a_profile_comes_from_the_config_table() -> None:
    table = {**DEFAULT_GRES_MAPPING, "nvidia.com/mig-1g.10gb": "gpu:a100_1g.10gb"}
    r = translate(claim_pod("mig.nvidia.com", [attr("profile")]), gres_mapping=table)
    assert r.gres == "gpu:a100_1g.10gb"


def test_whole_gpu_class_with_attribute_selector_keeps_the_class_gres() -> None:
    sel = [{"cel": {"expression": f'device.attributes["{DRIVER}"].productName == "Sandbox GPU"'}}]
    r = translate(claim_pod("gpu.nvidia.com", sel))
    assert (r.gres, r.profile) == ("gpu", None)


@pytest.mark.parametrize(
    ("cls", "selectors", "words"),
    [
        (
            "mig.nvidia.com",
            [],
            ["several profiles", "1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb", "profile =="],
        ),
        (
            "mig.nvidia.com",
            [attr("profile", "in", '["1g.10gb", "2g.20gb"]')],
            ["several profiles (1g.10gb, 2g.20gb)"],
        ),
        ("mig.nvidia.com", [attr("profile", value='"9g.99gb"')], ["no device", "matches"]),
        (
            "gpu.nvidia.com",
            [{"cel": {"expression": "device.capacity['gpu.nvidia.com'].memory == 1"}}],
            ["spec.devices.requests[0].exactly.selectors[0].cel.expression", "device.capacity"],
        ),
        (
            "gpu.nvidia.com",
            [{"cel": {"expression": 'request.name == "x"'}}],
            ["selectors[0].cel.expression", "only `device` may be read"],
        ),
        (
            "gpu.nvidia.com",
            [{"cel": {"expression": "device.driver =="}}],
            ["selectors[0].cel.expression", "CEL:"],
        ),
    ],
    ids=["no-profile", "two-profiles", "no-match", "capacity", "other-variable", "syntax"],
)
def test_selectors_slurm_cannot_be_asked_for_are_refused_naming_the_field(
    cls: str, selectors: list[Any], words: list[str]
) -> None:
    with pytest.raises(InvalidInput) as e:
        translate(claim_pod(cls, selectors))
    assert "spec.resourceClaims[0]" in str(e.value)
    for w in words:
        assert w in str(e.value), str(e.value)


def test_selectors_matching_slices_and_whole_gpus_are_refused() -> None:
    everything = {
        "metadata": {"name": "any.nvidia.com"},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }
    with pytest.raises(InvalidInput) as e:
        translate(
            claim_pod("any.nvidia.com", [{"cel": {"expression": "true"}}]),
            classes={**CLASSES, "any.nvidia.com": everything},
        )
    assert "both whole GPUs and MIG slices" in str(e.value)


def test_profile_missing_from_the_table_is_refused_naming_gres_mapping() -> None:
    table = {k: v for k, v in DEFAULT_GRES_MAPPING.items() if k != "nvidia.com/mig-1g.10gb"}
    with pytest.raises(InvalidInput) as e:
        translate(claim_pod("mig.nvidia.com", [attr("profile")]), gres_mapping=table)
    assert "'nvidia.com/mig-1g.10gb: gpu:1g.10gb' to scheduler.gresMapping" in str(e.value)


def test_selector_on_a_missing_attribute_does_not_match_instead_of_failing() -> None:
    (sel,) = compile_selectors([attr("profile")], "f", "selectors", "obj")
    whole = node_devices(SLICES, DRIVER)[0]
    assert not matches((sel,), device_variable(DRIVER, whole.raw))


# --- which slices the claim gets ----------------------------------------------------------


def mig_request(profile: str = "1g.10gb", count: int = 1, name: str = "r") -> DeviceRequest:
    return DeviceRequest(
        claim="g",
        request=name,
        device_class="mig.nvidia.com",
        driver=DRIVER,
        gres=f"gpu:{profile}",
        count=count,
        profile=profile,
    )


def whole_request(gres: str = "gpu:a100") -> DeviceRequest:
    return DeviceRequest(
        claim="g", request="r", device_class=DRIVER, driver=DRIVER, gres=gres, count=1
    )


# Slurm's numbering of the mixed node: gpu:a100:1(IDX:0),gpu:1g.10gb:7(IDX:1-7)
MIXED = (("gpu:a100", 1), ("gpu:1g.10gb", 7))


def view(gres: dict[str, tuple[int, ...] | None], count: int = 14) -> SlurmNodeView:
    """Slurm's answer: indices, or (None) ``count`` of the GRES."""
    return SlurmNodeView(
        gres=gres, gres_layout=MIXED, counts={k: len(v) if v else count for k, v in gres.items()}
    )


def counted(counts: dict[str, int]) -> SlurmNodeView:
    """Slurm's answer on a node where it only counts."""
    return SlurmNodeView(gres=dict.fromkeys(counts), counts=counts)


def picked(got: dict[Any, Any]) -> list[str]:
    return [d.device for p in got.values() for d in p.devices]


def test_slurm_indices_name_the_slices_of_the_profile_counted_across_types() -> None:
    got = allocate_pod(
        "n1", [mig_request(count=2)], view({"gpu:1g.10gb": (1, 3)}), SLICES, set(), PROFILES
    )
    assert picked(got) == ["gpu-1-mig-1g10gb-19-0", "gpu-1-mig-1g10gb-19-2"]
    got = allocate_pod("n1", [whole_request()], view({"gpu:a100": (0,)}), SLICES, set(), PROFILES)
    assert picked(got) == ["gpu-0"]


def test_where_slurm_only_counts_the_claim_gets_free_slices_of_the_profile() -> None:
    taken: set[DeviceId] = set()
    a = allocate_pod(
        "n1", [mig_request(count=3)], view({"gpu:1g.10gb": None}), SLICES, taken, PROFILES
    )
    b = allocate_pod(
        "n1", [mig_request(count=3)], view({"gpu:1g.10gb": None}), SLICES, taken, PROFILES
    )
    assert not set(picked(a)) & set(picked(b))
    assert len(set(picked(a)) | set(picked(b))) == 6


def test_a_slice_is_never_given_on_a_gpu_whose_full_device_is_allocated() -> None:
    taken = {DeviceId(DRIVER, "n1", "gpu-1")}
    with pytest.raises(DeviceMismatch) as e:
        allocate_pod("n1", [mig_request()], view({"gpu:1g.10gb": None}), SLICES, taken, PROFILES)
    assert "GPU-n1-1 is allocated whole" in str(e.value)


def test_the_full_device_is_never_given_beside_a_slice() -> None:
    taken = {DeviceId(DRIVER, "n1", "gpu-1-mig-1g10gb-19-6")}
    r = DeviceRequest(
        claim="g", request="r", device_class=DRIVER, driver=DRIVER, gres="gpu", count=2
    )
    with pytest.raises(DeviceMismatch) as e:
        allocate_pod("n1", [r], counted({"gpu": 2}), SLICES, taken, PROFILES)
    assert "leave 1 free of 2" in str(e.value)


def test_a_placement_overlapping_an_allocated_slice_does_not_fit() -> None:
    # 2g.20gb at 0 takes memory slices 0-1: 1g.10gb at placement 1 overlaps it
    taken = {DeviceId(DRIVER, "n1", "gpu-1-mig-2g20gb-14-0")}
    got = allocate_pod("n1", [mig_request()], view({"gpu:1g.10gb": None}), SLICES, taken, PROFILES)
    assert picked(got) == ["gpu-1-mig-1g10gb-19-2"]


@pytest.mark.parametrize(
    ("gres", "req", "words"),
    [
        ({"gpu:1g.10gb": (9,)}, mig_request(), ["index 9", "do not show", "numbered from 1"]),
        ({"gpu:2g.20gb": (1,)}, mig_request(), ["gave gpu:2g.20gb", "asks for gpu:1g.10gb"]),
        ({"gpu:1g.10gb": (1,)}, whole_request("gpu"), ["is a MIG slice (1g.10gb)", "whole GPUs"]),
    ],
    ids=["index-beyond-the-slices", "other-profile-given", "slice-for-a-whole-gpu"],
)
def test_slurm_and_the_slices_disagreeing_is_a_mismatch(
    gres: dict[str, Any], req: DeviceRequest, words: list[str]
) -> None:
    v = SlurmNodeView(gres=gres, gres_layout=MIXED)
    with pytest.raises(DeviceMismatch) as e:
        allocate_pod("n1", [req], v, SLICES, set(), PROFILES)
    for w in words:
        assert w in str(e.value), str(e.value)


def test_whole_gpus_without_partitions_still_fail_softly() -> None:
    plain = [dra_driver.gpu_slice("n1", 1)]
    r = whole_request("gpu")
    with pytest.raises(DeviceAllocationError) as e:
        allocate_pod("n1", [r, r], counted({"gpu": 2}), plain, set())
    assert not isinstance(e.value, DeviceMismatch)


# --- property: any claim set, any Slurm answer: 0 overcommits, 0 doubles ------------------

KINDS = ["1g.10gb", "2g.20gb", "3g.40gb", "whole"]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(KINDS),
            st.integers(min_value=1, max_value=3),
            st.one_of(st.none(), st.lists(st.integers(0, 8), min_size=1, max_size=3)),
        ),
        max_size=12,
    ),
    st.sampled_from(
        [(), (("gpu:1g.10gb", 14),), (("gpu:3g.40gb", 2), ("gpu:2g.20gb", 2), ("gpu:1g.10gb", 4))]
    ),
)
def test_random_claim_sets_never_overcommit_a_counter_nor_share_a_device(
    claims: list[tuple[str, int, list[int] | None]], layout: tuple[tuple[str, int], ...]
) -> None:
    slices = dra_driver.mig_slices("n1", 2)  # two partitionable GPUs
    taken: set[DeviceId] = set()
    held: list[tuple[str, ...]] = []
    for kind, count, indices in claims:
        gres = "gpu" if kind == "whole" else f"gpu:{kind}"
        req = DeviceRequest(
            claim="g",
            request="r",
            device_class=DRIVER,
            driver=DRIVER,
            gres=gres,
            count=count,
            profile=None if kind == "whole" else kind,
        )
        v = SlurmNodeView(
            gres={gres: tuple(indices) if indices else None},
            gres_layout=layout,
            counts={gres: len(indices) if indices else count},
        )
        before = set(taken)
        try:
            got = allocate_pod("n1", [req], v, slices, taken, PROFILES)
        except DeviceAllocationError:
            taken.clear()
            taken.update(before)  # the scheduler writes nothing for a failed pod
            continue
        held.append(tuple(picked(got)))
    devices = node_devices(slices, DRIVER)
    all_held = [d for h in held for d in h]
    assert len(all_held) == len(set(all_held))  # 0 double allocations
    ledger = Ledger.of(devices, slices, {DeviceId(DRIVER, "n1", d) for d in all_held})
    assert ledger.overcommitted() == []  # 0 counter overcommits
    assert not (ledger.whole & ledger.sliced)  # never a slice beside its full GPU


def test_taken_devices_of_claims_feed_the_counters() -> None:
    claim = {
        "metadata": {"uid": "u1"},
        "status": {
            "allocation": {
                "devices": {
                    "results": [{"request": "r", "driver": DRIVER, "pool": "n1", "device": "gpu-1"}]
                }
            }
        },
    }
    taken = taken_devices([claim])
    with pytest.raises(DeviceMismatch):
        allocate_pod("n1", [mig_request()], view({"gpu:1g.10gb": (1,)}), SLICES, taken, PROFILES)


def test_a_device_plugin_name_a_device_class_claims_is_counted_once() -> None:
    cls, p = class_and_pod("nvidia.com/mig-1g.10gb", "2")
    name = cls["metadata"]["name"]
    own = pod_resources(p, DEFAULT_GRES_MAPPING)
    assert own.gres == {"gpu:1g.10gb": 2}
    both = with_devices(p, own, inputs(classes={**CLASSES, name: cls}))
    assert both.gres == {"gpu:1g.10gb": 2}


def test_a_resolved_selector_is_kept_in_the_callers_memo() -> None:
    memo: dict[Any, Any] = {}
    r = translate(claim_pod("mig.nvidia.com", [attr("profile")]), kinds=memo)
    assert list(memo) == [
        ("mig.nvidia.com", (f'device.attributes["{DRIVER}"].profile == "1g.10gb"',))
    ]
    # the same class and selectors again: answered from the memo (no slice is read)
    again = translate(claim_pod("mig.nvidia.com", [attr("profile")]), kinds=memo, slices=())
    assert (again.gres, again.profile) == (r.gres, r.profile)


def test_a_gpu_cut_into_several_profiles_gets_placements_that_coexist() -> None:
    # migbench's layout a100,3g.40gb+2g.20gb+1g.10gb*2: IDX 0 whole, 1 3g, 2 2g, 3-4 1g;
    # the k-th placement of each type (3g at 0, 2g at 0, 1g at 0) would overlap
    layout = (("gpu:a100", 1), ("gpu:3g.40gb", 1), ("gpu:2g.20gb", 1), ("gpu:1g.10gb", 2))
    asks = [
        (whole_request(), {"gpu:a100": (0,)}),
        (mig_request("3g.40gb"), {"gpu:3g.40gb": (1,)}),
        (mig_request("2g.20gb"), {"gpu:2g.20gb": (2,)}),
        (mig_request("1g.10gb"), {"gpu:1g.10gb": (3,)}),
        (mig_request("1g.10gb"), {"gpu:1g.10gb": (4,)}),
    ]
    taken: set[DeviceId] = set()
    got = []
    for req, gres in asks:
        v = SlurmNodeView(gres=gres, gres_layout=layout)
        got += picked(allocate_pod("n1", [req], v, SLICES, taken, PROFILES))
    assert got == [
        "gpu-0",
        "gpu-1-mig-3g40gb-9-4",
        "gpu-1-mig-2g20gb-14-0",
        "gpu-1-mig-1g10gb-19-2",
        "gpu-1-mig-1g10gb-19-3",
    ]
    ledger = Ledger.of(node_devices(SLICES, DRIVER), SLICES, taken)
    assert ledger.overcommitted() == []


def test_a_layout_no_gpu_can_hold_is_not_packed() -> None:
    layout = SlurmLayout.of((("gpu:4g.40gb", 2),), {"gpu:4g.40gb": "4g.40gb"})
    node = packing_node(node_devices(SLICES, DRIVER), SLICES, layout)
    found = packing.pack(node, layout.want)
    assert isinstance(found, packing.Unpackable)
    assert found.short == {"gpu:4g.40gb": 1}
