"""resource.k8s.io/v1 as kube-apiserver 1.36 serves it (DeviceClass, ResourceSlice,
ResourceClaim with status, ResourceClaimTemplate), and the resourceclaim controller
stand-in: one claim per pod and template, owned by the pod, named in
``pod.status.resourceClaimStatuses``; released and deleted when the pod ends."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.cluster import SandboxCluster
from sandbox.controllers import dra_driver as sandbox_dra
from tests.component.kubeapi.helpers import eventually, pod_body
from tests.component.kubeapi.webhook_server import call

R = "/apis/resource.k8s.io/v1"
NSR = f"{R}/namespaces/default"


def _claim_spec(cls: str = "gpu.nvidia.com", count: int | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": cls}
    if count is not None:
        exactly["count"] = count
    return {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}


def _slice(node: str, n: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{node}-gpu"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": f"gpu-{i}", "attributes": {"index": {"int": i}}} for i in range(n)
            ],
        },
    }


def _allocation(*devices: str) -> dict[str, Any]:
    return {
        "devices": {
            "results": [
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": d}
                for d in devices
            ]
        }
    }


async def test_resource_group_is_discoverable_with_the_four_kinds(srv: SandboxCluster) -> None:
    status, body = await call(srv, "GET", R)
    assert status == 200
    kinds = {r["name"]: (r["kind"], r["namespaced"]) for r in body["resources"]}
    assert kinds["deviceclasses"] == ("DeviceClass", False)
    assert kinds["resourceslices"] == ("ResourceSlice", False)
    assert kinds["resourceclaims"] == ("ResourceClaim", True)
    assert kinds["resourceclaims/status"] == ("ResourceClaim", True)
    assert kinds["resourceclaimtemplates"] == ("ResourceClaimTemplate", True)


async def test_claim_requests_are_defaulted_to_exact_count_one(srv: SandboxCluster) -> None:
    status, claim = await call(
        srv,
        "POST",
        f"{NSR}/resourceclaims",
        {"metadata": {"name": "c"}, "spec": _claim_spec(), "status": {"x": 1}},
    )
    assert status == 201
    exactly = claim["spec"]["devices"]["requests"][0]["exactly"]
    assert exactly == {
        "deviceClassName": "gpu.nvidia.com",
        "allocationMode": "ExactCount",
        "count": 1,
    }
    assert "status" not in claim


async def test_claim_without_device_class_is_invalid_naming_the_field(
    srv: SandboxCluster,
) -> None:
    status, body = await call(
        srv,
        "POST",
        f"{NSR}/resourceclaims",
        {
            "metadata": {"name": "c"},
            "spec": {"devices": {"requests": [{"name": "a", "exactly": {}}]}},
        },
    )
    assert status == 422
    assert "spec.devices.requests[0].exactly.deviceClassName: Required value" in body["message"]


async def test_claim_spec_is_immutable(srv: SandboxCluster) -> None:
    await call(
        srv, "POST", f"{NSR}/resourceclaims", {"metadata": {"name": "c"}, "spec": _claim_spec()}
    )
    status, body = await call(
        srv,
        "PATCH",
        f"{NSR}/resourceclaims/c",
        {"spec": _claim_spec(count=2)},
        content_type="application/merge-patch+json",
    )
    assert status == 422
    assert "field is immutable" in body["message"]


async def test_claim_status_allocation_is_set_once_and_reserved_only_when_allocated(
    srv: SandboxCluster,
) -> None:
    await call(
        srv, "POST", f"{NSR}/resourceclaims", {"metadata": {"name": "c"}, "spec": _claim_spec()}
    )
    merge = "application/merge-patch+json"
    path = f"{NSR}/resourceclaims/c/status"
    _, pod = await call(srv, "POST", "/api/v1/namespaces/default/pods", pod_body("p"))
    pod_ref = {"resource": "pods", "name": "p", "uid": pod["metadata"]["uid"]}
    status, body = await call(
        srv, "PATCH", path, {"status": {"reservedFor": [pod_ref]}}, content_type=merge
    )
    assert status == 422
    assert "status.reservedFor" in body["message"]
    status, claim = await call(
        srv,
        "PATCH",
        path,
        {"status": {"allocation": _allocation("gpu-0"), "reservedFor": [pod_ref]}},
        content_type=merge,
    )
    assert status == 200
    assert claim["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    status, body = await call(
        srv, "PATCH", path, {"status": {"allocation": _allocation("gpu-1")}}, content_type=merge
    )
    assert status == 422
    assert "status.allocation: Invalid value: field is immutable" in body["message"]


async def test_claim_allocation_holds_at_most_32_results(srv: SandboxCluster) -> None:
    await call(
        srv,
        "POST",
        f"{NSR}/resourceclaims",
        {"metadata": {"name": "c"}, "spec": _claim_spec(count=33)},
    )
    devices = [f"cpu{i}" for i in range(33)]
    status, body = await call(
        srv,
        "PATCH",
        f"{NSR}/resourceclaims/c/status",
        {"status": {"allocation": _allocation(*devices)}},
        content_type="application/merge-patch+json",
    )
    assert status == 422
    assert "must have at most 32 items" in body["message"]


async def test_resource_slices_are_selected_by_node_and_driver(srv: SandboxCluster) -> None:
    for node in ("n1", "n2"):
        status, _ = await call(srv, "POST", f"{R}/resourceslices", _slice(node, 2))
        assert status == 201
    status, body = await call(
        srv, "GET", f"{R}/resourceslices?fieldSelector=spec.nodeName=n2,spec.driver=gpu.nvidia.com"
    )
    assert status == 200
    assert [s["metadata"]["name"] for s in body["items"]] == ["n2-gpu"]


async def test_resource_slice_needs_exactly_one_node_scope(srv: SandboxCluster) -> None:
    body = _slice("n1", 1)
    body["spec"]["allNodes"] = True
    status, err = await call(srv, "POST", f"{R}/resourceslices", body)
    assert status == 422
    assert "exactly one of `nodeName`" in err["message"]


async def test_stand_in_mig_pool_is_accepted_as_a_real_1_36_server_accepts_it(
    srv: SandboxCluster,
) -> None:
    # a mixed node: gpu-0 whole, gpu-1 partitionable (full device + every MIG placement)
    for body in sandbox_dra.mig_slices("n1", 1, full_gpus=1):
        status, got = await call(srv, "POST", f"{R}/resourceslices", body)
        assert status == 201, got
    status, body = await call(srv, "GET", f"{R}/resourceslices?fieldSelector=spec.nodeName=n1")
    specs = [s["spec"] for s in body["items"]]
    assert {s["pool"]["resourceSliceCount"] for s in specs} == {2}
    assert [("devices" in s, "sharedCounters" in s) for s in specs] == [
        (True, False),
        (False, True),
    ]


def _counter_slice(**spec: Any) -> dict[str, Any]:
    body = _slice("n1", 0)
    del body["spec"]["devices"]
    body["spec"].update(spec)
    return body


def _consuming(n: int, consumes: list[dict[str, Any]]) -> dict[str, Any]:
    body = _slice("n1", n)
    for d in body["spec"]["devices"]:
        d["consumesCounters"] = consumes
    return body


def _sets(n: int, counters: int = 1) -> list[dict[str, Any]]:
    c = {f"c{i}": {"value": "1"} for i in range(counters)}
    return [{"name": f"s{i}", "counters": c} for i in range(n)]


_ONE = {"counterSet": "gpu-0-counter-set", "counters": {"memory-slice-0": {"value": "1"}}}


@pytest.mark.parametrize(
    ("body", "field", "why"),
    [
        (
            _counter_slice(
                devices=[{"name": "gpu-0"}],
                sharedCounters=[{"name": "s", "counters": {"c": {"value": "1"}}}],
            ),
            "spec",
            "only one of `sharedCounters` or `devices` is allowed",
        ),
        (
            _counter_slice(sharedCounters=_sets(9)),
            "spec.sharedCounters",
            "must have at most 8 items",
        ),
        (
            _counter_slice(sharedCounters=_sets(1, 33)),
            "spec.sharedCounters[0].counters",
            "must have at most 32 items",
        ),
        (
            _counter_slice(sharedCounters=[{"name": "s", "counters": {}}]),
            "spec.sharedCounters[0].counters",
            "Required value",
        ),
        (
            _counter_slice(sharedCounters=[{"name": "S_1", "counters": {"c": {"value": "1"}}}]),
            "spec.sharedCounters[0].name",
            "RFC 1123 label",
        ),
        (
            _counter_slice(
                sharedCounters=[
                    {"name": "s", "counters": {"c": {"value": "1"}}},
                    {"name": "s", "counters": {"c": {"value": "1"}}},
                ]
            ),
            "spec.sharedCounters[1].name",
            "Duplicate value",
        ),
        (
            _counter_slice(sharedCounters=[{"name": "s", "counters": {"c": {"value": "ten"}}}]),
            "spec.sharedCounters[0].counters[c].value",
            "quantities must match",
        ),
        (_consuming(65, [_ONE]), "spec.devices", "must have at most 64 items"),
        (
            _consuming(1, [_ONE, {**_ONE, "counterSet": "b"}, {**_ONE, "counterSet": "c"}]),
            "spec.devices[0].consumesCounters",
            "must have at most 2 items",
        ),
        (
            _consuming(1, [_ONE, _ONE]),
            "spec.devices[0].consumesCounters[1].counterSet",
            "Duplicate value",
        ),
        (
            _consuming(1, [{"counterSet": "s", "counters": {}}]),
            "spec.devices[0].consumesCounters[0].counters",
            "Required value",
        ),
    ],
)
async def test_partitionable_slice_is_refused_past_kube_apiserver_limits_naming_the_field(
    srv: SandboxCluster, body: dict[str, Any], field: str, why: str
) -> None:
    status, err = await call(srv, "POST", f"{R}/resourceslices", body)
    assert status == 422
    assert f"{field}:" in err["message"], err["message"]
    assert why in err["message"], err["message"]


async def test_slice_of_128_devices_without_counters_is_accepted(srv: SandboxCluster) -> None:
    status, _ = await call(srv, "POST", f"{R}/resourceslices", _slice("n1", 128))
    assert status == 201


async def test_pod_claim_entries_need_exactly_one_source(srv: SandboxCluster) -> None:
    status, body = await call(
        srv,
        "POST",
        "/api/v1/namespaces/default/pods",
        pod_body("p", resourceClaims=[{"name": "gpu"}]),
    )
    assert status == 422
    assert "spec.resourceClaims[0]" in body["message"]


async def test_container_claim_reference_must_name_a_pod_claim(srv: SandboxCluster) -> None:
    pod = pod_body("p")
    pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "nope"}]}
    status, body = await call(srv, "POST", "/api/v1/namespaces/default/pods", pod)
    assert status == 422
    assert "spec.containers[0].resources.claims[0].name" in body["message"]


async def _pod_claim_statuses(srv: SandboxCluster, name: str) -> list[dict[str, Any]]:
    _, pod = await call(srv, "GET", f"/api/v1/namespaces/default/pods/{name}")
    return list((pod.get("status") or {}).get("resourceClaimStatuses") or [])


async def test_template_gives_each_pod_its_own_claim_owned_by_the_pod(
    srv: SandboxCluster,
) -> None:
    tmpl = {"metadata": {"name": "t"}, "spec": {"spec": _claim_spec(count=2)}}
    status, _ = await call(srv, "POST", f"{NSR}/resourceclaimtemplates", tmpl)
    assert status == 201
    uids = {}
    for name in ("a", "b"):
        status, pod = await call(
            srv,
            "POST",
            "/api/v1/namespaces/default/pods",
            pod_body(name, resourceClaims=[{"name": "gpus", "resourceClaimTemplateName": "t"}]),
        )
        assert status == 201
        uids[name] = pod["metadata"]["uid"]

    async def named() -> bool:
        return all([bool(await _pod_claim_statuses(srv, n)) for n in uids])

    await eventually(named)
    claims = {}
    for name, uid in uids.items():
        (st,) = await _pod_claim_statuses(srv, name)
        assert st["name"] == "gpus"
        assert st["resourceClaimName"].startswith(f"{name}-gpus-")
        _, claim = await call(srv, "GET", f"{NSR}/resourceclaims/{st['resourceClaimName']}")
        (owner,) = claim["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"], owner["controller"]) == ("Pod", uid, True)
        assert claim["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] == "gpus"
        assert claim["spec"]["devices"]["requests"][0]["exactly"]["count"] == 2
        claims[name] = claim["metadata"]["name"]
    assert len(set(claims.values())) == 2


async def test_claim_of_a_finished_pod_is_deallocated_and_deleted(srv: SandboxCluster) -> None:
    await call(
        srv,
        "POST",
        f"{NSR}/resourceclaimtemplates",
        {"metadata": {"name": "t"}, "spec": {"spec": _claim_spec()}},
    )
    _, pod = await call(
        srv,
        "POST",
        "/api/v1/namespaces/default/pods",
        pod_body("p", resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "t"}]),
    )

    async def named() -> bool:
        return bool(await _pod_claim_statuses(srv, "p"))

    await eventually(named)
    (st,) = await _pod_claim_statuses(srv, "p")
    claim_path = f"{NSR}/resourceclaims/{st['resourceClaimName']}"
    merge = "application/merge-patch+json"
    await call(
        srv,
        "PATCH",
        claim_path,
        {"metadata": {"finalizers": ["resource.kubernetes.io/delete-protection"]}},
        content_type=merge,
    )
    ref = {"resource": "pods", "name": "p", "uid": pod["metadata"]["uid"]}
    status, _ = await call(
        srv,
        "PATCH",
        f"{claim_path}/status",
        {"status": {"allocation": _allocation("gpu-0"), "reservedFor": [ref]}},
        content_type=merge,
    )
    assert status == 200
    status, _ = await call(
        srv,
        "PATCH",
        "/api/v1/namespaces/default/pods/p/status",
        {"status": {"phase": "Succeeded"}},
        content_type=merge,
    )
    assert status == 200

    async def gone() -> bool:
        return (await call(srv, "GET", claim_path))[0] == 404

    await eventually(gone)


async def test_shared_claim_is_released_but_kept_when_its_pod_ends(srv: SandboxCluster) -> None:
    await call(
        srv, "POST", f"{NSR}/resourceclaims", {"metadata": {"name": "c"}, "spec": _claim_spec()}
    )
    _, pod = await call(
        srv,
        "POST",
        "/api/v1/namespaces/default/pods",
        pod_body("p", resourceClaims=[{"name": "gpu", "resourceClaimName": "c"}]),
    )
    ref = {"resource": "pods", "name": "p", "uid": pod["metadata"]["uid"]}
    merge = "application/merge-patch+json"
    await call(
        srv,
        "PATCH",
        f"{NSR}/resourceclaims/c/status",
        {"status": {"allocation": _allocation("gpu-0"), "reservedFor": [ref]}},
        content_type=merge,
    )
    await call(srv, "DELETE", "/api/v1/namespaces/default/pods/p?gracePeriodSeconds=0")

    async def released() -> bool:
        _, claim = await call(srv, "GET", f"{NSR}/resourceclaims/c")
        return not (claim.get("status") or {})

    await eventually(released)


async def test_pod_status_names_its_extended_resource_claim_with_request_mappings(
    srv: SandboxCluster,
) -> None:
    await call(srv, "POST", "/api/v1/namespaces/default/pods", pod_body("p"))
    merge = "application/merge-patch+json"
    path = "/api/v1/namespaces/default/pods/p/status"
    good = {
        "resourceClaimName": "p-extended-resources-abcde",
        "requestMappings": [
            {
                "containerName": "main",
                "resourceName": "deviceclass.resource.kubernetes.io/gpu.nvidia.com",
                "requestName": "container-0-request-0",
            }
        ],
    }
    status, pod = await call(
        srv, "PATCH", path, {"status": {"extendedResourceClaimStatus": good}}, content_type=merge
    )
    assert status == 200
    assert pod["status"]["extendedResourceClaimStatus"] == good
    bad = {**good, "requestMappings": [{**good["requestMappings"][0], "containerName": "x"}]}
    status, body = await call(
        srv, "PATCH", path, {"status": {"extendedResourceClaimStatus": bad}}, content_type=merge
    )
    assert status == 422
    assert "requestMappings[0].containerName" in body["message"]
    status, body = await call(
        srv,
        "PATCH",
        path,
        {"status": {"resourceClaimStatuses": [{"name": "nope", "resourceClaimName": "c"}]}},
        content_type=merge,
    )
    assert status == 422
    assert "status.resourceClaimStatuses[0].name" in body["message"]


async def test_stand_in_pool_of_eight_partitionable_gpus_is_split_within_the_limits(
    srv: SandboxCluster,
) -> None:
    bodies = sandbox_dra.mig_slices("n8", 8)
    for body in bodies:
        status, got = await call(srv, "POST", f"{R}/resourceslices", body)
        assert status == 201, got
    devices = [d for b in bodies for d in b["spec"].get("devices") or []]
    sets = [c for b in bodies for c in b["spec"].get("sharedCounters") or []]
    assert (len(devices), len(sets)) == (8 * 19, 8)  # the full GPU and 18 placements each
    assert {b["spec"]["pool"]["resourceSliceCount"] for b in bodies} == {len(bodies)}
