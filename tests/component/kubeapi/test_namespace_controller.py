"""The namespace controller and garbage collector act like kube-controller-manager's: they
delete through the API as their own ServiceAccounts (so webhooks see and may block them),
wait for finalizers, report why in the namespace's conditions, retry with back-off."""

from __future__ import annotations

from typing import Any

from sandbox.cluster import SandboxCluster
from tests.component.kubeapi.helpers import eventually
from tests.component.kubeapi.webhook_server import (
    REG,
    Webhook,
    call,
    install,
    unreachable,
    validating,
)

NSC = "system:serviceaccount:kube-system:namespace-controller"
GC = "system:serviceaccount:kube-system:generic-garbage-collector"


def _cm(name: str, **md: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, **md}}


def _conditions(ns: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (ns.get("status") or {}).get("conditions") or []}


async def _ns(srv: SandboxCluster, name: str) -> tuple[int, Any]:
    return await call(srv, "GET", f"/api/v1/namespaces/{name}")


async def test_namespace_contents_are_deleted_through_admission_as_the_namespace_controller(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    await call(srv, "POST", "/api/v1/namespaces", _cm("tmp"))
    await call(srv, "POST", "/api/v1/namespaces/tmp/configmaps", _cm("a"))
    await install(
        srv,
        validating(webhook.hook("cm.t.test", resources=("configmaps",), operations=("DELETE",))),
    )
    status, ns = await call(srv, "DELETE", "/api/v1/namespaces/tmp")
    assert status == 200
    assert ns["status"]["phase"] == "Terminating"

    async def gone() -> bool:
        return (await _ns(srv, "tmp"))[0] == 404

    await eventually(gone)
    (req,) = webhook.requests()
    assert req["userInfo"]["username"] == NSC
    assert req["oldObject"]["metadata"]["name"] == "a"
    assert req["options"]["propagationPolicy"] == "Background"


async def test_namespace_waits_for_finalizers_removed_by_their_owner_with_conditions(
    srv: SandboxCluster,
) -> None:
    await call(srv, "POST", "/api/v1/namespaces", _cm("tmp"))
    await call(srv, "POST", "/api/v1/namespaces/tmp/configmaps", _cm("a", finalizers=["x/y"]))
    await call(srv, "DELETE", "/api/v1/namespaces/tmp")

    async def waiting() -> bool:
        conds = _conditions((await _ns(srv, "tmp"))[1])
        return conds.get("NamespaceFinalizersRemaining", {}).get("status") == "True"

    await eventually(waiting)
    ns = (await _ns(srv, "tmp"))[1]
    conds = _conditions(ns)
    assert conds["NamespaceContentRemaining"]["reason"] == "SomeResourcesRemain"
    assert conds["NamespaceContentRemaining"]["message"] == (
        "Some resources are remaining: configmaps has 1 resource instances"
    )
    assert conds["NamespaceFinalizersRemaining"]["message"] == (
        "Some content in the namespace has finalizers remaining: x/y in 1 resource instances"
    )
    assert conds["NamespaceDeletionContentFailure"]["status"] == "False"
    status, cm = await call(srv, "GET", "/api/v1/namespaces/tmp/configmaps/a")
    assert status == 200
    assert cm["metadata"]["deletionTimestamp"]  # stays, as on a cluster, until its owner acts
    await call(
        srv,
        "PATCH",
        "/api/v1/namespaces/tmp/configmaps/a",
        {"metadata": {"finalizers": None}},
        content_type="application/merge-patch+json",
    )

    async def gone() -> bool:
        return (await _ns(srv, "tmp"))[0] == 404

    await eventually(gone)


async def test_webhook_down_blocks_namespace_cleanup_then_retry_finishes_it(
    srv: SandboxCluster,
) -> None:
    down = await unreachable()
    await call(srv, "POST", "/api/v1/namespaces", _cm("tmp"))
    await call(srv, "POST", "/api/v1/namespaces/tmp/configmaps", _cm("a"))
    await install(srv, validating(down.hook("cm.t.test", resources=("configmaps",)), name="down"))
    await call(srv, "DELETE", "/api/v1/namespaces/tmp")

    async def failing() -> bool:
        conds = _conditions((await _ns(srv, "tmp"))[1])
        return conds.get("NamespaceDeletionContentFailure", {}).get("status") == "True"

    await eventually(failing)
    cond = _conditions((await _ns(srv, "tmp"))[1])["NamespaceDeletionContentFailure"]
    assert cond["reason"] == "ContentDeletionFailed"
    assert 'failed calling webhook "cm.t.test"' in cond["message"]
    assert "connect: connection refused" in cond["message"]
    await call(srv, "DELETE", f"{REG}/validatingwebhookconfigurations/down")

    async def gone() -> bool:
        return (await _ns(srv, "tmp"))[0] == 404

    await eventually(gone)


async def test_garbage_collector_deletes_dependents_of_a_removed_owner_as_itself(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    cms = "/api/v1/namespaces/default/configmaps"
    _, owner = await call(srv, "POST", cms, _cm("owner"))
    _, other = await call(srv, "POST", cms, _cm("other"))

    def ref(o: dict[str, Any]) -> dict[str, Any]:
        md = o["metadata"]
        return {"apiVersion": "v1", "kind": "ConfigMap", "name": md["name"], "uid": md["uid"]}

    await call(srv, "POST", cms, _cm("dep", ownerReferences=[ref(owner)]))
    await call(srv, "POST", cms, _cm("shared", ownerReferences=[ref(owner), ref(other)]))
    await install(
        srv,
        validating(webhook.hook("cm.t.test", resources=("configmaps",), operations=("DELETE",))),
    )
    await call(srv, "DELETE", f"{cms}/owner")

    async def collected() -> bool:
        return (await call(srv, "GET", f"{cms}/dep"))[0] == 404

    await eventually(collected)
    users = {
        r["oldObject"]["metadata"]["name"]: r["userInfo"]["username"] for r in webhook.requests()
    }
    assert users == {"owner": "sandbox", "dep": GC}

    async def unlinked() -> bool:
        shared = (await call(srv, "GET", f"{cms}/shared"))[1]
        return shared["metadata"]["ownerReferences"] == [ref(other)]

    await eventually(unlinked)


async def _owner_and_dependent(srv: SandboxCluster, block: bool = False) -> dict[str, Any]:
    cms = "/api/v1/namespaces/default/configmaps"
    _, owner = await call(srv, "POST", cms, _cm("owner"))
    md = owner["metadata"]
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": md["uid"]}
    if block:
        ref["blockOwnerDeletion"] = True
    await call(srv, "POST", cms, _cm("dep", ownerReferences=[ref], finalizers=["x/hold"]))
    return owner


async def test_orphan_propagation_removes_the_owner_reference_and_keeps_the_dependent(
    srv: SandboxCluster,
) -> None:
    cms = "/api/v1/namespaces/default/configmaps"
    await _owner_and_dependent(srv)
    status, owner = await call(srv, "DELETE", f"{cms}/owner", {"propagationPolicy": "Orphan"})
    assert status == 200
    assert owner["metadata"]["finalizers"] == ["orphan"]

    async def owner_gone() -> bool:
        return (await call(srv, "GET", f"{cms}/owner"))[0] == 404

    await eventually(owner_gone)
    dep = (await call(srv, "GET", f"{cms}/dep"))[1]
    assert "ownerReferences" not in dep["metadata"]
    assert "deletionTimestamp" not in dep["metadata"]


async def test_foreground_propagation_waits_for_blocking_dependents(
    srv: SandboxCluster,
) -> None:
    cms = "/api/v1/namespaces/default/configmaps"
    await _owner_and_dependent(srv, block=True)
    status, owner = await call(srv, "DELETE", f"{cms}/owner", {"propagationPolicy": "Foreground"})
    assert status == 200
    assert owner["metadata"]["finalizers"] == ["foregroundDeletion"]

    async def dependent_terminating() -> bool:
        dep = (await call(srv, "GET", f"{cms}/dep"))[1]
        return bool(dep["metadata"].get("deletionTimestamp"))

    await eventually(dependent_terminating)
    assert (await call(srv, "GET", f"{cms}/owner"))[0] == 200  # blocked by "dep"
    await call(
        srv,
        "PATCH",
        f"{cms}/dep",
        {"metadata": {"finalizers": None}},
        content_type="application/merge-patch+json",
    )

    async def both_gone() -> bool:
        return [(await call(srv, "GET", f"{cms}/{n}"))[0] for n in ("dep", "owner")] == [404, 404]

    await eventually(both_gone)
