"""Discovery, /version, OpenAPI v3, Table output and kubeconfig/TLS."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import trustme
from kubernetes_asyncio import client, config

from bridge.errors import KubeNotFound
from sandbox.cluster import SandboxCluster
from sandbox.kubeapi import SANDBOX_TOKEN
from tests.clients import kube_for_host

from .helpers import ADMIN_HEADERS, NS, binding_body, pod_body

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


async def _get(srv: SandboxCluster, path: str, accept: str = "application/json") -> Any:
    async with (
        aiohttp.ClientSession(headers=ADMIN_HEADERS) as s,
        s.get(srv.url + path, headers={"Accept": accept}) as r,
    ):
        assert r.status == 200, path
        assert r.content_type == "application/json"
        return await r.json()


async def test_core_discovery_lists_resources_and_subresources(srv: SandboxCluster) -> None:
    doc = await _get(srv, "/api/v1")
    names = {r["name"] for r in doc["resources"]}
    assert names >= {
        "pods",
        "pods/binding",
        "pods/status",
        "nodes",
        "nodes/status",
        "namespaces",
        "events",
        "serviceaccounts",
        "configmaps",
        "secrets",
    }
    assert (await _get(srv, "/api"))["versions"] == ["v1"]


async def test_group_discovery_lists_builtin_and_crd_groups(srv: SandboxCluster) -> None:
    groups = {g["name"] for g in (await _get(srv, "/apis"))["groups"]}
    assert groups >= {
        "coordination.k8s.io",
        "batch",
        "apiextensions.k8s.io",
        "scheduling.x-k8s.io",
        "jobset.x-k8s.io",
        "leaderworkerset.x-k8s.io",
    }
    doc = await _get(srv, "/apis/coordination.k8s.io/v1")
    assert [r["name"] for r in doc["resources"]] == ["leases"]


async def test_aggregated_discovery_request_falls_back_to_plain_json(
    srv: SandboxCluster,
) -> None:
    accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
    doc = await _get(srv, "/apis", accept)
    assert doc["kind"] == "APIGroupList"


async def test_version_endpoint(api: client.ApiClient, kube_version: str) -> None:
    info = await client.VersionApi(api).get_code()
    assert (info.major, info.minor) == tuple(kube_version.split("."))


async def test_openapi_v3_lists_group_versions_with_field_validation(
    srv: SandboxCluster,
) -> None:
    root = await _get(srv, "/openapi/v3")
    assert "api/v1" in root["paths"]
    doc = await _get(srv, root["paths"]["api/v1"]["serverRelativeURL"])
    patch = doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]


async def test_pod_table_has_kubectl_columns(srv: SandboxCluster, core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod(NS, pod_body("p"))
    await core.create_namespaced_pod_binding(
        "p", NS, binding_body("p", "n"), _preload_content=False
    )
    tab = await _get(srv, f"/api/v1/namespaces/{NS}/pods", TABLE)
    assert tab["kind"] == "Table"
    cols = [c["name"] for c in tab["columnDefinitions"]]
    assert cols[:5] == ["Name", "Ready", "Status", "Restarts", "Age"]
    assert "Node" in cols
    row = dict(zip(cols, tab["rows"][0]["cells"], strict=True))
    assert (row["Name"], row["Ready"], row["Status"], row["Node"]) == ("p", "0/1", "Pending", "n")
    assert tab["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


async def test_table_for_a_single_object_and_custom_resources(srv: SandboxCluster) -> None:
    tab = await _get(srv, "/api/v1/namespaces/default", TABLE)
    assert tab["rows"][0]["cells"][:2] == ["default", "Active"]
    tab = await _get(srv, f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{NS}/podgroups", TABLE)
    assert [c["name"] for c in tab["columnDefinitions"]] == ["Name", "Age"]


@pytest.fixture
def tls_files(tmp_path: Path) -> tuple[str, str, str]:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    paths = [tmp_path / n for n in ("ca.pem", "cert.pem", "key.pem")]
    ca.cert_pem.write_to_path(str(paths[0]))
    cert.cert_chain_pems[0].write_to_path(str(paths[1]))
    cert.private_key_pem.write_to_path(str(paths[2]))
    return str(paths[0]), str(paths[1]), str(paths[2])


async def test_tls_listener_and_kubeconfig_with_ca(
    tmp_path: Path, tls_files: tuple[str, str, str]
) -> None:
    ca, cert, key = tls_files
    async with SandboxCluster(port=0, tls_cert=cert, tls_key=key) as srv:
        assert srv.url.startswith("https://")
        path = srv.write_kubeconfig(tmp_path / "kc", ca_file=ca)
        cfg = client.Configuration()
        await config.load_kube_config(config_file=str(path), client_configuration=cfg)
        async with client.ApiClient(cfg) as api:
            nss = await client.CoreV1Api(api).list_namespace()
        assert "default" in [n.metadata.name for n in nss.items]
        ctx = ssl.create_default_context(cafile=ca)
        async with (
            aiohttp.ClientSession(headers=ADMIN_HEADERS) as s,
            s.get(srv.url + "/version", ssl=ctx) as r,
        ):
            assert r.status == 200


@pytest.mark.parametrize("kube_version", ["1.36"], indirect=True)
async def test_the_builtin_workload_api_is_served_at_v1alpha2_as_kubernetes_1_36_does(
    srv: SandboxCluster,
) -> None:
    """1.36 (GenericWorkload on) serves Workload and PodGroup at scheduling.k8s.io/v1alpha2
    only; the bridge finds that version by discovery (KubeClient.served_versions)."""
    group = await _get(srv, "/apis/scheduling.k8s.io")
    assert [v["version"] for v in group["versions"]] == ["v1alpha2"]
    names = {r["name"] for r in (await _get(srv, "/apis/scheduling.k8s.io/v1alpha2"))["resources"]}
    assert {"workloads", "podgroups", "podgroups/status"} <= names
    async with kube_for_host(srv.url, token=SANDBOX_TOKEN, request_timeout=10) as kube:
        assert await kube.served_versions("scheduling.k8s.io") == ("v1alpha2",)
        assert await kube.served_versions("no-such.example.com") == ()


@pytest.mark.parametrize("kube_version", ["1.37"], indirect=True)
async def test_kubernetes_1_37_serves_v1beta1_and_v1alpha3_and_no_longer_v1alpha2(
    srv: SandboxCluster,
) -> None:
    """1.37 removes scheduling.k8s.io/v1alpha2, serves Workload and PodGroup at v1beta1
    (preferred) and v1alpha3, CompositePodGroup at v1alpha3 only, and DeviceTaintRule at
    resource.k8s.io/v1; /version says 1.37. The bridge's discovery finds each."""
    group = await _get(srv, "/apis/scheduling.k8s.io")
    assert [v["version"] for v in group["versions"]] == ["v1beta1", "v1alpha3"]
    assert group["preferredVersion"]["version"] == "v1beta1"
    beta = {r["name"] for r in (await _get(srv, "/apis/scheduling.k8s.io/v1beta1"))["resources"]}
    assert {"workloads", "podgroups", "podgroups/status"} <= beta
    assert "compositepodgroups" not in beta
    alpha = {r["name"] for r in (await _get(srv, "/apis/scheduling.k8s.io/v1alpha3"))["resources"]}
    assert {"workloads", "podgroups", "compositepodgroups", "compositepodgroups/status"} <= alpha
    dra = {r["name"] for r in (await _get(srv, "/apis/resource.k8s.io/v1"))["resources"]}
    assert {"devicetaintrules", "devicetaintrules/status", "resourceslices"} <= dra
    assert (await _get(srv, "/version"))["minor"] == "37"
    async with kube_for_host(srv.url, token=SANDBOX_TOKEN, request_timeout=10) as kube:
        assert await kube.served_versions("scheduling.k8s.io") == ("v1beta1", "v1alpha3")
        with pytest.raises(KubeNotFound):
            await kube.request("GET", "/apis/scheduling.k8s.io/v1alpha2", what="discovery")


@pytest.mark.parametrize("kube_version", ["1.36"], indirect=True)
async def test_kubernetes_1_36_serves_no_device_taint_rules(srv: SandboxCluster) -> None:
    """DeviceTaintRule is beta (off) in 1.36: the bridge must not watch it there."""
    dra = {r["name"] for r in (await _get(srv, "/apis/resource.k8s.io/v1"))["resources"]}
    assert "devicetaintrules" not in dra
    assert (await _get(srv, "/version"))["minor"] == "36"
