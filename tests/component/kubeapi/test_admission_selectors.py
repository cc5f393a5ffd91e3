"""Which webhooks a request reaches, like kube-apiserver v1.36: a rule's ``scope``
(Namespaced, Cluster, ``*``), ``objectSelector`` (the new or the old object's labels; a
missing object never matches) and ``namespaceSelector`` (the namespace's labels; a
Namespace's own; never a filter for other cluster-scoped objects)."""

from __future__ import annotations

from typing import Any

from sandbox.cluster import SandboxCluster
from tests.component.kubeapi.helpers import pod_body
from tests.component.kubeapi.webhook_server import Webhook, call, install, validating

PODS = "/api/v1/namespaces/default/pods"
NAMESPACES = "/api/v1/namespaces"


def _paths(webhook: Webhook) -> set[str]:
    return {p for p, _ in webhook.calls}


async def test_rule_scope_namespaced_cluster_and_star_pick_the_matching_resources(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    def scoped(name: str, scope: str) -> dict[str, Any]:
        hook = webhook.hook(f"{name}.t.test", f"/{name}", resources=("*",), operations=("CREATE",))
        hook["rules"][0]["scope"] = scope
        return hook

    await install(
        srv,
        validating(scoped("ns", "Namespaced"), scoped("cluster", "Cluster"), scoped("any", "*")),
    )
    assert (await call(srv, "POST", PODS, pod_body("p")))[0] == 201
    assert _paths(webhook) == {"/ns", "/any"}
    webhook.calls.clear()
    status, _ = await call(srv, "POST", NAMESPACES, {"metadata": {"name": "team-a"}})
    assert status == 201
    assert _paths(webhook) == {"/cluster", "/any"}


async def test_object_selector_matches_the_new_or_the_old_objects_labels(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    selected = webhook.hook("sel.t.test", "/sel", objectSelector={"matchLabels": {"team": "a"}})
    await install(srv, validating(selected))
    await call(srv, "POST", PODS, pod_body("plain"))
    assert webhook.calls == []  # CREATE without the label
    labelled = pod_body("labelled")
    labelled["metadata"]["labels"] = {"team": "a"}
    await call(srv, "POST", PODS, labelled)
    assert [r["operation"] for r in webhook.requests()] == ["CREATE"]
    webhook.calls.clear()
    # UPDATE removing the label: the old object still matches
    status, _ = await call(
        srv,
        "PATCH",
        f"{PODS}/labelled",
        {"metadata": {"labels": {"team": None}}},
        content_type="application/merge-patch+json",
    )
    assert status == 200
    assert [r["operation"] for r in webhook.requests()] == ["UPDATE"]
    webhook.calls.clear()
    # UPDATE adding it: the new object matches
    await call(
        srv,
        "PATCH",
        f"{PODS}/plain",
        {"metadata": {"labels": {"team": "a"}}},
        content_type="application/merge-patch+json",
    )
    assert [r["operation"] for r in webhook.requests()] == ["UPDATE"]
    webhook.calls.clear()
    # DELETE: only the old object is there, and it matches
    await call(srv, "DELETE", f"{PODS}/plain")
    assert [r["operation"] for r in webhook.requests()] == ["DELETE"]


async def test_object_selector_satisfied_by_empty_labels_never_matches_a_missing_object(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    absent = {"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]}
    await install(srv, validating(webhook.hook("absent.t.test", objectSelector=absent)))
    skipped = pod_body("skipped")
    skipped["metadata"]["labels"] = {"skip": "yes"}
    await call(srv, "POST", PODS, skipped)  # the old object of a CREATE is missing
    await call(srv, "DELETE", f"{PODS}/skipped")  # the object of a DELETE is missing
    assert webhook.calls == []
    await call(srv, "POST", PODS, pod_body("checked"))
    assert [r["operation"] for r in webhook.requests()] == ["CREATE"]


async def test_namespace_selector_uses_a_namespaces_own_labels_and_ignores_cluster_objects(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    hook = webhook.hook(
        "nssel.t.test",
        resources=("namespaces", "nodes"),
        operations=("CREATE",),
        namespaceSelector={"matchLabels": {"managed": "yes"}},
    )
    await install(srv, validating(hook))
    await call(srv, "POST", NAMESPACES, {"metadata": {"name": "plain"}})
    assert webhook.calls == []
    await call(
        srv, "POST", NAMESPACES, {"metadata": {"name": "managed", "labels": {"managed": "yes"}}}
    )
    assert [r["name"] for r in webhook.requests()] == ["managed"]
    webhook.calls.clear()
    # a Node is cluster-scoped and no Namespace: the selector never exempts it
    status, _ = await call(srv, "POST", "/api/v1/nodes", {"metadata": {"name": "n9"}})
    assert status == 201
    assert [r["name"] for r in webhook.requests()] == ["n9"]
