"""DRA requests -> Slurm CPUs/GRES (tables), refusals naming claim, request and reason,
and the allocation of Slurm's devices onto a node's ResourceSlices."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.devices.allocation import (
    DeviceId,
    Picked,
    SlurmNodeView,
    allocate_pod,
    allocated_node,
    allocation_result,
    cpuset_text,
    taken_devices,
)
from bridge.errors import DeviceAllocationError, DeviceMismatch, InvalidInput
from bridge.translate.dra import DraInputs, pod_devices
from bridge.translate.job import translate_group
from bridge.translate.settings import TranslateSettings

GRES = {"gpu.nvidia.com": "gpu"}
GPU = "deviceclass.resource.kubernetes.io/gpu.nvidia.com"
CPU = "deviceclass.resource.kubernetes.io/dra.cpu"


def ctr(name: str = "c", **requests: str) -> dict[str, Any]:
    return {"name": name, "image": "x", "resources": {"requests": dict(requests)}}


def pod(*containers: dict[str, Any], claims: list[Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": list(containers) or [ctr()]}
    if claims is not None:
        spec["resourceClaims"] = claims
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": spec}


def claim_spec(*requests: dict[str, Any], **devices: Any) -> dict[str, Any]:
    return {"devices": {"requests": list(requests), **devices}}


def exactly(name: str, cls: str, count: int = 1, **more: Any) -> dict[str, Any]:
    return {
        "name": name,
        "exactly": {
            "deviceClassName": cls,
            "allocationMode": "ExactCount",
            "count": count,
            **more,
        },
    }


TEMPLATES = {"two-gpus": {"spec": {"spec": claim_spec(exactly("gpus", "gpu.nvidia.com", 2))}}}
CLAIMS = {
    "mine": {"spec": claim_spec(exactly("cpus", "dra.cpu", 4))},
    "grouped": {
        "spec": claim_spec(
            {
                "name": "cpus",
                "exactly": {
                    "deviceClassName": "dra.cpu",
                    "capacity": {"requests": {"dra.cpu/cpu": "40"}},
                },
            }
        )
    },
}
CLASSES = {
    "gpu.nvidia.com": {"spec": {"extendedResourceName": "example.com/gpu"}},
    "fpga.example.com": {
        "spec": {"selectors": [{"cel": {"expression": 'device.driver == "fpga.dra.io"'}}]}
    },
}
INPUTS = DraInputs(
    classes=CLASSES,
    claims=CLAIMS,
    templates=TEMPLATES,
    device_class_gres={**GRES, "fpga.example.com": "fpga"},
)


@pytest.mark.parametrize(
    ("p", "cpus", "gres", "requests"),
    [
        pytest.param(
            pod(ctr(**{GPU: "1"})),
            0,
            {"gpu": 1},
            [(None, "container-0-request-0")],
            id="extended-gpu",
        ),
        pytest.param(
            pod(ctr(**{CPU: "3"})), 3, {}, [(None, "container-0-request-0")], id="extended-cpu"
        ),
        pytest.param(
            pod(ctr("a", **{GPU: "1"}), ctr("b", **{GPU: "2"})),
            0,
            {"gpu": 3},
            [(None, "container-0-request-0"), (None, "container-1-request-0")],
            id="two-containers-one-request-each",
        ),
        pytest.param(
            pod(ctr(**{"example.com/gpu": "2"})),
            0,
            {"gpu": 2},
            [(None, "container-0-request-0")],
            id="deviceclass-extendedResourceName",
        ),
        pytest.param(
            pod(claims=[{"name": "g", "resourceClaimTemplateName": "two-gpus"}]),
            0,
            {"gpu": 2},
            [("g", "gpus")],
            id="user-template",
        ),
        pytest.param(
            pod(claims=[{"name": "c", "resourceClaimName": "mine"}]),
            4,
            {},
            [("c", "cpus")],
            id="user-claim-cpus",
        ),
        pytest.param(
            pod(claims=[{"name": "c", "resourceClaimName": "grouped"}]),
            40,
            {},
            [("c", "cpus")],
            id="user-claim-grouped-cpu-capacity",
        ),
        pytest.param(pod(ctr(cpu="2")), 0, {}, [], id="no-dra"),
    ],
)
def test_dra_requests_become_slurm_cpus_and_gres(
    p: dict[str, Any], cpus: int, gres: dict[str, int], requests: list[tuple[str | None, str]]
) -> None:
    got = pod_devices(p, INPUTS)
    assert got.cpus == cpus
    assert got.gres == gres
    assert [(r.claim, r.request) for r in got.requests] == requests


def test_device_class_driver_comes_from_its_cel_selector() -> None:
    p = pod(ctr(**{"deviceclass.resource.kubernetes.io/fpga.example.com": "1"}))
    (r,) = pod_devices(p, INPUTS).requests
    assert (r.driver, r.gres) == ("fpga.dra.io", "fpga")


@pytest.mark.parametrize(
    ("p", "words"),
    [
        pytest.param(
            pod(ctr(**{"deviceclass.resource.kubernetes.io/tpu.example.com": "1"})),
            ["tpu.example.com", "scheduler.deviceClassGres"],
            id="unknown-class",
        ),
        pytest.param(
            pod(claims=[{"name": "g", "resourceClaimName": "nope"}]),
            ["spec.resourceClaims[0]", "ResourceClaim 'nope' not found"],
            id="missing-claim",
        ),
        pytest.param(
            pod(claims=[{"name": "g", "resourceClaimTemplateName": "sel"}]),
            [
                "spec.resourceClaims[0]: ResourceClaimTemplate 'sel'",
                'request "r": spec.devices.requests[0].exactly.selectors[0].cel.expression',
                "undeclared reference to 'compareTo'",
            ],
            id="selector-kubernetes-cel-library",
        ),
        pytest.param(
            pod(claims=[{"name": "g", "resourceClaimTemplateName": "all"}]),
            ['request "r"', "allocationMode All"],
            id="allocation-mode-all",
        ),
        pytest.param(
            pod(claims=[{"name": "g", "resourceClaimTemplateName": "first"}]),
            ['request "r"', "firstAvailable"],
            id="first-available",
        ),
        pytest.param(
            pod(claims=[{"name": "g", "resourceClaimTemplateName": "constrained"}]),
            ['pod claim "g"', "constraints"],
            id="constraints",
        ),
    ],
)
def test_what_slurm_cannot_express_is_refused_naming_claim_request_and_reason(
    p: dict[str, Any], words: list[str]
) -> None:
    templates = {
        "sel": {
            "spec": {
                "spec": claim_spec(
                    exactly(
                        "r",
                        "gpu.nvidia.com",
                        selectors=[
                            {
                                "cel": {
                                    "expression": 'device.attributes["gpu.nvidia.com"].memory'
                                    '.compareTo(quantity("10Gi")) >= 0'
                                }
                            }
                        ],
                    )
                )
            }
        },
        "all": {
            "spec": {
                "spec": claim_spec(
                    {
                        "name": "r",
                        "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"},
                    }
                )
            }
        },
        "first": {
            "spec": {
                "spec": claim_spec(
                    {
                        "name": "r",
                        "firstAvailable": [{"name": "a", "deviceClassName": "gpu.nvidia.com"}],
                    }
                )
            }
        },
        "constrained": {
            "spec": {
                "spec": claim_spec(
                    exactly("r", "gpu.nvidia.com", 2),
                    constraints=[{"matchAttribute": "gpu.nvidia.com/productName"}],
                )
            }
        },
    }
    inputs = DraInputs(classes=CLASSES, templates=templates, device_class_gres=GRES)
    with pytest.raises(InvalidInput) as e:
        pod_devices(p, inputs)
    for w in words:
        assert w in str(e.value)


@pytest.mark.parametrize(
    ("native", "dra", "cpus"),
    [("", "3", 3), ("3", "3", 3), ("4", "3", 4), ("2", "3", 3)],
)
def test_slurm_cpus_are_the_larger_of_dra_cpus_and_the_cpu_request(
    native: str, dra: str, cpus: int
) -> None:
    requests = {CPU: dra, **({"cpu": native} if native else {})}
    spec = translate_group([pod(ctr(**requests))], None, [], TranslateSettings(), dra=INPUTS)
    assert spec.cpus_per_task == cpus  # type: ignore[union-attr]


def test_group_job_asks_slurm_for_the_dra_gres_and_cpus() -> None:
    p = pod(ctr(**{GPU: "2", CPU: "3"}))
    spec = translate_group([p], None, [], TranslateSettings(), dra=INPUTS)
    assert not hasattr(spec, "want")
    assert spec.tres_per_node == "gres/gpu:2"  # type: ignore[union-attr]
    assert spec.cpus_per_task == 3  # type: ignore[union-attr]


# ------------------------------------------------------------------ allocation


def gpu_slice(node: str, n: int, driver: str = "gpu.nvidia.com") -> dict[str, Any]:
    return {
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node},
            "devices": [
                {"name": f"gpu-{i}", "attributes": {"index": {"int": i}}} for i in range(n)
            ],
        }
    }


def cpu_slice(node: str, cores: int, threads: int = 1) -> dict[str, Any]:
    devices = []
    for core in range(cores):
        for t in range(threads):
            cpu = core + t * cores
            devices.append(
                {
                    "name": f"cpudev{cpu:03d}",
                    "attributes": {
                        "dra.cpu/cpuID": {"int": cpu},
                        "dra.cpu/coreID": {"int": core % 4},
                        "dra.cpu/socketID": {"int": core // 4},
                    },
                }
            )
    return {
        "spec": {"driver": "dra.cpu", "nodeName": node, "pool": {"name": node}, "devices": devices}
    }


def reqs(p: dict[str, Any]) -> Any:
    return pod_devices(p, INPUTS).requests


def names(picked: dict[Any, Picked]) -> dict[Any, list[str]]:
    return {k: [d.device for d in v.devices] for k, v in picked.items()}


KEY = (None, "container-0-request-0")
COUNTED_1 = SlurmNodeView(gres={"gpu": None}, counts={"gpu": 1})  # an external node's answer


@pytest.mark.parametrize(
    ("slurm", "taken", "want"),
    [
        pytest.param(SlurmNodeView(gres={"gpu": (1,)}), set(), ["gpu-1"], id="slurm-index"),
        pytest.param(COUNTED_1, set(), ["gpu-0"], id="count-only-first-free"),
        pytest.param(
            COUNTED_1,
            {DeviceId("gpu.nvidia.com", "n1", "gpu-0")},
            ["gpu-1"],
            id="count-only-skips-taken",
        ),
    ],
)
def test_gpu_is_the_device_slurm_picked_or_a_free_one(
    slurm: SlurmNodeView, taken: set[DeviceId], want: list[str]
) -> None:
    got = allocate_pod("n1", reqs(pod(ctr(**{GPU: "1"}))), slurm, [gpu_slice("n1", 2)], taken)
    assert names(got) == {KEY: want}


@pytest.mark.parametrize(
    ("slurm", "count", "words"),
    [
        # the job's GRES lowered to gpu:0 (an annotation): no "any free device" fallback
        pytest.param(SlurmNodeView(), 1, ["gave the job no gpu", "asks for 1"], id="none-given"),
        # an external node: Slurm counted 1, the claim asks 2
        pytest.param(
            COUNTED_1, 2, ["gave the job 1 gpu on the node", "asks for 2"], id="counted-fewer"
        ),
        pytest.param(
            SlurmNodeView(gres={"gpu": (0,)}),
            2,
            ["gave the job 1 gpu on the node", "asks for 2"],
            id="indexed-fewer",
        ),
        pytest.param(
            SlurmNodeView(gres={"gpu:1g.10gb": None}, counts={"gpu:1g.10gb": 2}),
            1,
            ["gave gpu:1g.10gb", "asks for whole devices"],
            id="counted-other-kind",
        ),
    ],
)
def test_a_claim_gets_only_devices_slurm_gave_its_job_in_number_and_kind(
    slurm: SlurmNodeView, count: int, words: list[str]
) -> None:
    taken: set[DeviceId] = set()
    with pytest.raises(DeviceMismatch) as e:
        allocate_pod(
            "n1",
            reqs(pod(ctr(**{GPU: str(count)}))),
            slurm,
            [gpu_slice("n1", 2)],
            taken,
            {"gpu:1g.10gb": "1g.10gb"},
        )
    for w in words:
        assert w in str(e.value), str(e.value)
    assert not taken  # nothing picked, nothing to write


@pytest.mark.parametrize(
    "view", [COUNTED_1, SlurmNodeView(gres={"gpu": (0,)})], ids=["counted", "indexed"]
)
def test_pods_of_one_job_on_a_node_share_what_slurm_gave_it(view: SlurmNodeView) -> None:
    taken: set[DeviceId] = set()
    p, slices = pod(ctr(**{GPU: "1"})), [gpu_slice("n1", 2)]
    assert names(allocate_pod("n1", reqs(p), view, slices, taken)) == {KEY: ["gpu-0"]}
    with pytest.raises(DeviceMismatch) as e:
        allocate_pod("n1", reqs(p), view, slices, taken)
    assert "(1 to its other claims already)" in str(e.value)


def test_two_pods_of_one_job_on_one_node_get_distinct_devices() -> None:
    taken: set[DeviceId] = set()
    view = SlurmNodeView(cores=(2, 3, 4, 5), gres={"gpu": (0, 1)})
    slices = [gpu_slice("n1", 2), cpu_slice("n1", 8)]
    p = pod(ctr(**{GPU: "1", CPU: "2"}))
    a = allocate_pod("n1", reqs(p), view, slices, taken)
    b = allocate_pod("n1", reqs(p), view, slices, taken)
    flat_a = {d for v in a.values() for d in v.devices}
    flat_b = {d for v in b.values() for d in v.devices}
    assert not flat_a & flat_b
    assert sorted(d.device for d in flat_a | flat_b) == [
        "cpudev002",
        "cpudev003",
        "cpudev004",
        "cpudev005",
        "gpu-0",
        "gpu-1",
    ]


def test_cpus_are_exactly_the_cores_of_slurms_bitmap_with_their_threads() -> None:
    view = SlurmNodeView(cores=(5, 6))
    got = allocate_pod(
        "n1", reqs(pod(ctr(**{CPU: "4"}))), view, [cpu_slice("n1", 8, threads=2)], set()
    )
    # core 5 = socket 1 core 1 -> CPUs 5 and 13; core 6 -> CPUs 6 and 14
    assert names(got) == {KEY: ["cpudev005", "cpudev013", "cpudev006", "cpudev014"]}


@pytest.mark.parametrize(
    ("slurm", "slices", "words"),
    [
        pytest.param(
            SlurmNodeView(gres={"gpu": None}, counts={"gpu": 2}),
            [],
            ["node n1", "gpu.nvidia.com", "no ResourceSlice"],
            id="no-slice",
        ),
        pytest.param(
            SlurmNodeView(gres={"gpu": None}, counts={"gpu": 2}),
            [gpu_slice("n1", 1)],
            ["node n1", "gpu.nvidia.com", "2 free", "leave 1"],
            id="too-few",
        ),
        pytest.param(
            SlurmNodeView(gres={"gpu": (0, 5)}),
            [gpu_slice("n1", 2)],
            ["node n1", "index 5"],
            id="index-without-device",
        ),
    ],
)
def test_missing_or_too_few_devices_name_node_and_driver(
    slurm: SlurmNodeView, slices: list[Any], words: list[str]
) -> None:
    with pytest.raises(DeviceAllocationError) as e:
        allocate_pod("n1", reqs(pod(ctr(**{GPU: "2"}))), slurm, slices, set())
    for w in words:
        assert w in str(e.value)


def test_allocation_result_carries_devices_config_and_node() -> None:
    picked = {"gpus": Picked((DeviceId("gpu.nvidia.com", "n1", "gpu-1"),))}
    cfg = {"gpu.nvidia.com": [{"opaque": {"driver": "gpu.nvidia.com", "parameters": {"a": 1}}}]}
    alloc = allocation_result(
        "n1", picked, class_config=cfg, request_classes={"gpus": "gpu.nvidia.com"}
    )
    assert alloc["devices"]["results"] == [
        {"request": "gpus", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-1"}
    ]
    assert alloc["devices"]["config"][0]["source"] == "FromClass"
    assert allocated_node({"status": {"allocation": alloc}}) == "n1"


def test_a_claim_never_holds_more_than_32_devices() -> None:
    picked = {"cpus": Picked(tuple(DeviceId("dra.cpu", "n1", f"cpudev{i:03d}") for i in range(33)))}
    with pytest.raises(DeviceAllocationError, match="at most 32"):
        allocation_result("n1", picked)


def test_taken_devices_skips_the_claims_asked_for() -> None:
    alloc = allocation_result("n1", {"g": Picked((DeviceId("gpu.nvidia.com", "n1", "gpu-0"),))})
    claims = [{"metadata": {"uid": "a"}, "status": {"allocation": alloc}}]
    assert taken_devices(claims) == {DeviceId("gpu.nvidia.com", "n1", "gpu-0")}
    assert taken_devices(claims, skip_uids=["a"]) == set()


def grouped_slice(node: str, groups: list[tuple[int, int]]) -> dict[str, Any]:
    """The DRA CPU driver in grouped mode: (socketID, CPUs) per group device."""
    return {
        "spec": {
            "driver": "dra.cpu",
            "nodeName": node,
            "pool": {"name": node},
            "devices": [
                {
                    "name": f"cpudevsocket{sock:03d}",
                    "allowMultipleAllocations": True,
                    "attributes": {"dra.cpu/socketID": {"int": sock}},
                    "capacity": {"dra.cpu/cpu": {"value": str(n)}},
                }
                for sock, n in groups
            ],
        }
    }


def test_grouped_mode_gives_more_than_32_cpus_as_shares_with_slurms_cpuset() -> None:
    view = SlurmNodeView(cores=tuple(range(8, 48)), cores_per_socket=32)
    slices = [grouped_slice("n1", [(0, 32), (1, 32)])]
    taken: set[DeviceId] = set()
    got = allocate_pod("n1", reqs(pod(ctr(**{CPU: "40"}))), view, slices, taken)
    p = got[KEY]
    assert [d.device for d in p.devices] == ["cpudevsocket000", "cpudevsocket001"]
    assert p.consumed == (24, 16)
    assert p.cpuset == tuple(range(8, 48))
    alloc = allocation_result("n1", {"container-0-request-0": p}, share_seed="uid")
    results = alloc["devices"]["results"]
    assert [r["consumedCapacity"] for r in results] == [
        {"dra.cpu/cpu": "24"},
        {"dra.cpu/cpu": "16"},
    ]
    assert all(r["shareID"] for r in results)
    (cfg,) = alloc["devices"]["config"]
    assert cfg["opaque"]["parameters"]["cpuConfig"]["cpuset"] == "8-47"
    # another pod of the job on the node gets none of these cores
    claims = [{"metadata": {"uid": "x"}, "status": {"allocation": alloc}}]
    again = taken_devices(claims)
    with pytest.raises(DeviceAllocationError, match="leave 0"):
        allocate_pod("n1", reqs(pod(ctr(**{CPU: "1"}))), view, slices, again)


@pytest.mark.parametrize(
    ("cores", "text"),
    [((0,), "0"), ((2, 3, 4, 5), "2-5"), ((0, 2, 3, 7), "0,2-3,7")],
)
def test_cpuset_text_is_linux_cpuset_format(cores: tuple[int, ...], text: str) -> None:
    assert cpuset_text(cores) == text
