"""KUBE.md: what admission adds (node not-ready taint, pod default tolerations, phase
Pending, default scheduler) and the ServiceAccount requirement for pods."""

from __future__ import annotations

import json

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from sandbox.cluster import SandboxCluster

from .helpers import NS, eventually, pod_body


async def test_client_created_node_gets_not_ready_no_schedule_taint(
    core: client.CoreV1Api,
) -> None:
    node = await core.create_node({"metadata": {"name": "n1"}})
    assert [(t.key, t.effect) for t in node.spec.taints] == [
        ("node.kubernetes.io/not-ready", "NoSchedule")
    ]


async def test_node_helper_marks_node_ready_and_removes_taint(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    await core.create_node({"metadata": {"name": "n1"}})
    srv.set_node_ready("n1")
    node = await core.read_node("n1")
    assert not node.spec.taints
    assert {c.type: c.status for c in node.status.conditions}["Ready"] == "True"


async def test_node_helper_without_heartbeats_sets_unknown_and_unreachable_taints(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    srv.set_node_ready("n1")
    srv.set_node_ready("n1", False)
    node = await core.read_node("n1")
    assert [(t.key, t.effect) for t in node.spec.taints] == [
        ("node.kubernetes.io/unreachable", "NoSchedule"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
    ]
    assert {c.type: c.status for c in node.status.conditions}["Ready"] == "Unknown"


async def test_server_started_with_nodes_has_them_ready() -> None:
    async with SandboxCluster(port=0, nodes=["kube-node-0", "kube-node-1"]) as srv:
        rd = srv.api.resolve("", "v1", "nodes")
        nodes = srv.api.list(rd, "")["items"]
        assert [n["metadata"]["name"] for n in nodes] == ["kube-node-0", "kube-node-1"]
        assert all("taints" not in n["spec"] for n in nodes)


async def test_pod_gets_default_not_ready_and_unreachable_tolerations_300s(
    core: client.CoreV1Api,
) -> None:
    pod = await core.create_namespaced_pod(NS, pod_body("p"))
    tol = {(t.key, t.operator, t.effect, t.toleration_seconds) for t in pod.spec.tolerations}
    assert tol == {
        ("node.kubernetes.io/not-ready", "Exists", "NoExecute", 300),
        ("node.kubernetes.io/unreachable", "Exists", "NoExecute", 300),
    }


async def test_pod_keeps_its_own_not_ready_toleration(core: client.CoreV1Api) -> None:
    own = {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 5,
    }
    pod = await core.create_namespaced_pod(NS, pod_body("p", tolerations=[own]))
    secs = {t.key: t.toleration_seconds for t in pod.spec.tolerations}
    assert secs == {"node.kubernetes.io/not-ready": 5, "node.kubernetes.io/unreachable": 300}


async def test_pod_status_phase_is_pending_and_status_on_create_is_reset(
    core: client.CoreV1Api,
) -> None:
    pod = await core.create_namespaced_pod(NS, {**pod_body("p"), "status": {"phase": "Running"}})
    assert pod.status.phase == "Pending"


async def test_pod_scheduler_name_defaults_to_default_scheduler(core: client.CoreV1Api) -> None:
    pod = await core.create_namespaced_pod(NS, pod_body("p"))
    assert pod.spec.scheduler_name == "default-scheduler"
    own = await core.create_namespaced_pod(NS, pod_body("q", schedulerName="slurm-bridge"))
    assert own.spec.scheduler_name == "slurm-bridge"


async def test_pod_without_containers_is_invalid(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as e:
        await core.create_namespaced_pod(NS, {"metadata": {"name": "p"}, "spec": {}})
    assert e.value.status == 422


async def test_pod_create_without_default_service_account_answers_403(
    srv: SandboxCluster, core: client.CoreV1Api
) -> None:
    await core.create_namespace({"metadata": {"name": "fresh"}})

    async def has_sa() -> bool:
        return bool((await core.list_namespaced_service_account("fresh")).items)

    await eventually(has_sa)
    await core.delete_namespaced_service_account("default", "fresh")
    with pytest.raises(ApiException) as e:
        await core.create_namespaced_pod("fresh", pod_body("p"))
    assert e.value.status == 403
    assert json.loads(e.value.body)["reason"] == "Forbidden"


async def test_new_namespace_gets_default_service_account_shortly_after(
    core: client.CoreV1Api,
) -> None:
    await core.create_namespace({"metadata": {"name": "fresh"}})

    async def has_sa() -> bool:
        sas = await core.list_namespaced_service_account("fresh")
        return [s.metadata.name for s in sas.items] == ["default"]

    await eventually(has_sa)
    pod = await core.create_namespaced_pod("fresh", pod_body("p"))
    assert pod.spec.service_account_name == "default"


@pytest.mark.parametrize("namespace", ["default", "kube-system", "slurm-bridge"])
async def test_builtin_namespaces_have_default_service_account(
    core: client.CoreV1Api, namespace: str
) -> None:
    sa = await core.read_namespaced_service_account("default", namespace)
    assert sa.metadata.name == "default"


async def test_job_gets_selector_and_template_labels(api: client.ApiClient) -> None:
    batch = client.BatchV1Api(api)
    job = await batch.create_namespaced_job(
        NS,
        {
            "metadata": {"name": "j"},
            "spec": {
                "completionMode": "Indexed",
                "completions": 2,
                "parallelism": 2,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "busybox:1"}],
                    }
                },
            },
        },
    )
    labels = job.spec.template.metadata.labels
    assert labels["batch.kubernetes.io/job-name"] == "j"
    assert labels["batch.kubernetes.io/controller-uid"] == job.metadata.uid
    assert job.spec.selector.match_labels == {
        "batch.kubernetes.io/controller-uid": job.metadata.uid
    }
