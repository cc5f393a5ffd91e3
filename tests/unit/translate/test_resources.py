"""Per-pod resources by Kubernetes' pod-request rule, in Slurm units."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.errors import InvalidInput
from bridge.translate.resources import pod_resources, tres_string


def c(
    cpu: str | None = None,
    mem: str | None = None,
    limits: dict[str, str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", mem)) if v is not None}
    return {"name": "c", "resources": {"requests": requests, "limits": limits or {}}, **extra}


def pod(containers: list[Any], init: list[Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": containers, "initContainers": init or [], **spec},
    }


@pytest.mark.parametrize(
    ("p", "cpus", "mib"),
    [
        pytest.param(pod([]), 0, 0, id="nothing-requested"),
        pytest.param(pod([c("3000m", "500Mi")]), 3, 500, id="podgroup-nginx"),
        pytest.param(pod([c("500m", "100Mi"), c("600m", "100Mi")]), 2, 200, id="sum-then-ceil"),
        pytest.param(
            pod([c("1", "1Gi", limits={"cpu": "2", "memory": "2Gi"})]),
            2,
            2048,
            id="limit-larger-than-request",
        ),
        pytest.param(pod([c("1")], init=[c("4", "4Gi")]), 4, 4096, id="init-container-peak"),
        pytest.param(
            pod([c("1")], init=[c("1", restartPolicy="Always"), c("3")]),
            4,
            0,
            id="init-after-sidecar-adds-sidecar",
        ),
        pytest.param(
            pod([c("2")], init=[c("1", restartPolicy="Always")]), 3, 0, id="sidecar-adds-to-app"
        ),
        pytest.param(
            pod([c("1", "1Mi")], overhead={"cpu": "250m", "memory": "1Mi"}),
            2,
            2,
            id="overhead-added",
        ),
        pytest.param(
            pod([c("1")], resources={"requests": {"cpu": "8"}}), 8, 0, id="pod-level-resources-win"
        ),
        pytest.param(pod([c(mem="1G")]), 0, 954, id="decimal-memory-rounded-up"),
    ],
)
def test_pod_request_rule(p: dict[str, Any], cpus: int, mib: int) -> None:
    r = pod_resources(p, {})
    assert (r.cpus, r.memory_mib) == (cpus, mib)


@pytest.mark.parametrize(
    ("limits", "mapping", "gres"),
    [
        pytest.param({"nvidia.com/gpu": "2"}, {}, {"gpu": 2}, id="nvidia"),
        pytest.param({"amd.com/gpu": "1"}, {}, {"gpu": 1}, id="amd"),
        pytest.param(
            {"example.com/fpga": "1"},
            {"example.com/fpga": "fpga"},
            {"fpga": 1},
            id="configured-mapping",
        ),
        pytest.param({"example.com/fpga": "1"}, {}, {}, id="unmapped-ignored"),
    ],
)
def test_gres_from_limits(
    limits: dict[str, str], mapping: dict[str, str], gres: dict[str, int]
) -> None:
    assert dict(pod_resources(pod([c(limits=limits)]), mapping).gres) == gres


def test_fractional_gpu_is_rejected_naming_the_field() -> None:
    with pytest.raises(InvalidInput, match="whole number") as e:
        pod_resources(pod([c(limits={"nvidia.com/gpu": "500m"})]), {})
    assert e.value.field == "spec.containers[0].resources.limits.nvidia.com/gpu"
    assert e.value.obj == "Pod ns/p"


def test_bad_cpu_quantity_names_the_container_field() -> None:
    with pytest.raises(InvalidInput) as e:
        pod_resources(pod([c("1"), c("lots")]), {})
    assert e.value.field == "spec.containers[1].resources.requests.cpu"


def test_tres_string_is_sorted_and_skips_zero() -> None:
    assert tres_string({"gpu": 2, "fpga": 1, "x": 0}) == "gres/fpga:1,gres/gpu:2"
    assert tres_string({}) is None
