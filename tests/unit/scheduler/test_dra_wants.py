"""Which pods make the scheduler read DRA objects at all (the others cost no request)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.dra import gres_layout, wants_dra


def pod(requests: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    containers = [{"name": "c", "resources": {"requests": requests or {}}}]
    return {"metadata": {"name": "p"}, "spec": {"containers": containers, **spec}}


@pytest.mark.parametrize(
    ("p", "want"),
    [
        pytest.param(pod({"cpu": "2", "memory": "1Gi"}), False, id="native-only"),
        pytest.param(pod({"nvidia.com/gpu": "1"}), False, id="device-plugin-gpu"),
        pytest.param(pod({"example.com/fpga": "1"}), False, id="configured-gres"),
        pytest.param(pod({"hugepages-2Mi": "1Gi"}), False, id="hugepages"),
        pytest.param(
            pod({"deviceclass.resource.kubernetes.io/gpu.nvidia.com": "1"}), True, id="extended"
        ),
        pytest.param(pod({"example.com/gpu": "1"}), True, id="maybe-a-class-extended-name"),
        pytest.param(
            pod(resourceClaims=[{"name": "g", "resourceClaimTemplateName": "t"}]),
            True,
            id="user-claims",
        ),
    ],
)
def test_only_pods_that_may_have_dra_requests_read_dra_objects(
    p: dict[str, Any], want: bool
) -> None:
    assert wants_dra(p, {"example.com/fpga": "fpga"}) is want


def test_a_gres_table_name_a_device_class_claims_goes_through_dra() -> None:
    p = pod({"nvidia.com/mig-1g.10gb": "1"})
    table = {"nvidia.com/mig-1g.10gb": "gpu:1g.10gb"}
    assert wants_dra(p, table) is False
    assert wants_dra(p, table, claimed={"nvidia.com/mig-1g.10gb"}) is True


def test_a_nodes_gres_is_read_as_its_typed_layout_in_slurms_order() -> None:
    assert gres_layout("gpu:a100:1(S:0),gpu:1g.10gb:7(S:0-1),gpu:2") == (
        ("gpu:a100", 1),
        ("gpu:1g.10gb", 7),
    )
