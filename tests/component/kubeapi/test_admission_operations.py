"""Admission webhooks are called for every operation, like kube-apiserver v1.36: CREATE,
UPDATE (PUT and every PATCH type), DELETE (also each item of a deletecollection), with the
AdmissionReview fields of each operation, the subresource rules and dry-run."""

from __future__ import annotations

from typing import Any

from sandbox.cluster import SandboxCluster
from tests.component.kubeapi.helpers import binding_body, pod_body
from tests.component.kubeapi.webhook_server import (
    Webhook,
    call,
    deny,
    install,
    mutating,
    patch_response,
    unreachable,
    validating,
)

PODS = "/api/v1/namespaces/default/pods"


def _ops(webhook: Webhook) -> list[tuple[str, str]]:
    return [(r["operation"], r.get("subResource", "")) for r in webhook.requests()]


async def test_update_put_and_every_patch_type_are_sent_as_update_with_old_object(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    await install(srv, validating(webhook.hook("pods.t.test", operations=("UPDATE",))))
    status, pod = await call(srv, "POST", PODS, pod_body("p"))
    assert status == 201
    assert webhook.requests() == []  # CREATE is not in the rule
    pod["metadata"]["labels"] = {"a": "1"}
    status, _ = await call(srv, "PUT", f"{PODS}/p", pod)
    assert status == 200
    for ctype, body in (
        ("application/merge-patch+json", {"metadata": {"labels": {"b": "2"}}}),
        ("application/strategic-merge-patch+json", {"metadata": {"labels": {"c": "3"}}}),
        (
            "application/json-patch+json",
            [{"op": "add", "path": "/metadata/labels/d", "value": "4"}],
        ),
    ):
        status, _ = await call(srv, "PATCH", f"{PODS}/p", body, content_type=ctype)
        assert status == 200
    reqs = webhook.requests()
    assert [r["operation"] for r in reqs] == ["UPDATE"] * 4
    assert [r["options"]["kind"] for r in reqs] == ["UpdateOptions"] + ["PatchOptions"] * 3
    assert reqs[0]["oldObject"]["metadata"].get("labels") is None
    assert reqs[0]["object"]["metadata"]["labels"] == {"a": "1"}
    assert reqs[3]["oldObject"]["metadata"]["labels"] == {"a": "1", "b": "2", "c": "3"}
    assert reqs[3]["object"]["metadata"]["labels"] == {"a": "1", "b": "2", "c": "3", "d": "4"}
    assert reqs[3]["object"]["kind"] == "Pod"
    assert reqs[3]["name"] == "p"
    assert reqs[3]["namespace"] == "default"


async def test_mutating_webhook_patch_is_applied_to_an_update(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    webhook.respond = lambda _p, req: patch_response(
        [{"op": "add", "path": "/metadata/annotations", "value": {"mutated": req["operation"]}}]
    )
    await install(srv, mutating(webhook.hook("pods.m.test", operations=("UPDATE",))))
    await call(srv, "POST", PODS, pod_body("p"))
    status, pod = await call(
        srv,
        "PATCH",
        f"{PODS}/p",
        {"metadata": {"labels": {"x": "y"}}},
        content_type="application/merge-patch+json",
    )
    assert status == 200
    assert pod["metadata"]["annotations"] == {"mutated": "UPDATE"}
    assert pod["metadata"]["labels"] == {"x": "y"}


async def test_delete_sends_null_object_old_object_and_delete_options(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    await install(srv, validating(webhook.hook("pods.t.test", operations=("DELETE",))))
    await call(srv, "POST", PODS, pod_body("p"))
    status, _ = await call(srv, "DELETE", f"{PODS}/p", {"gracePeriodSeconds": 0})
    assert status == 200
    (req,) = webhook.requests()
    assert req["operation"] == "DELETE"
    assert req["object"] is None
    assert req["oldObject"]["metadata"]["name"] == "p"
    assert req["options"] == {
        "kind": "DeleteOptions",
        "apiVersion": "meta.k8s.io/v1",
        "gracePeriodSeconds": 0,
    }


async def test_delete_collection_calls_the_webhook_for_each_item(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    await install(srv, validating(webhook.hook("pods.t.test", operations=("DELETE",))))
    for n in ("a", "b"):
        await call(srv, "POST", PODS, pod_body(n))
    status, _ = await call(srv, "DELETE", PODS)
    assert status == 200
    assert sorted(r["oldObject"]["metadata"]["name"] for r in webhook.requests()) == ["a", "b"]


async def test_delete_denied_by_validating_webhook_keeps_the_object(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    webhook.respond = lambda _p, _r: {"allowed": False, "status": {"code": 403, "message": "no"}}
    await install(srv, validating(webhook.hook("pods.t.test", operations=("DELETE",))))
    await call(srv, "POST", PODS, pod_body("p"))
    status, body = await call(srv, "DELETE", f"{PODS}/p")
    assert status == 403
    assert body["message"] == 'admission webhook "pods.t.test" denied the request: no'
    assert (await call(srv, "GET", f"{PODS}/p"))[0] == 200


async def test_unreachable_webhook_refuses_delete_in_kubes_words(srv: SandboxCluster) -> None:
    hook = await unreachable()
    port = hook.port
    await install(srv, validating(hook.hook("pods.t.test", operations=("*",))))
    srv.api.create(srv.api.resolve("", "v1", "pods"), "default", pod_body("p"))
    status, body = await call(srv, "DELETE", f"{PODS}/p")
    assert status == 500
    assert body["reason"] == "InternalError"
    assert body["message"] == (
        'Internal error occurred: failed calling webhook "pods.t.test": failed to call webhook: '
        f'Post "https://127.0.0.1:{port}/?timeout=10s": dial tcp 127.0.0.1:{port}: connect: '
        "connection refused"
    )


def _resources_hook(webhook: Webhook, name: str, *resources: str) -> dict[str, Any]:
    return webhook.hook(f"{name}.t.test", f"/{name}", resources=resources, operations=("*",))


async def test_subresource_rules_pods_vs_pods_star_vs_star_status_vs_star_star(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    await install(
        srv,
        validating(
            _resources_hook(webhook, "plain", "pods"),
            _resources_hook(webhook, "podsall", "pods/*"),
            _resources_hook(webhook, "anystatus", "*/status"),
            _resources_hook(webhook, "star", "*"),
            _resources_hook(webhook, "starstar", "*/*"),
            _resources_hook(webhook, "binding", "pods/binding"),
        ),
    )
    await call(srv, "POST", PODS, pod_body("p"))
    # kube's rule matcher: "pods/*" has sub "*", which also matches the empty subresource
    created = {p for p, _ in webhook.calls}
    assert created == {"/plain", "/podsall", "/star", "/starstar"}
    webhook.calls.clear()
    status, _ = await call(
        srv,
        "PATCH",
        f"{PODS}/p/status",
        {"status": {"message": "hi"}},
        content_type="application/merge-patch+json",
    )
    assert status == 200
    assert {p for p, _ in webhook.calls} == {"/podsall", "/anystatus", "/starstar"}
    assert {r["subResource"] for _, r in webhook.calls} == {"status"}
    webhook.calls.clear()
    srv.set_node_ready("n1")
    status, _ = await call(srv, "POST", f"{PODS}/p/binding", binding_body("p", "n1"))
    assert status == 201
    assert {p for p, _ in webhook.calls} == {"/podsall", "/starstar", "/binding"}
    req = webhook.requests("/binding")[0]
    assert req["operation"] == "CREATE"
    assert req["kind"] == {"group": "", "version": "v1", "kind": "Binding"}
    assert req["resource"] == {"group": "", "version": "v1", "resource": "pods"}
    assert req["subResource"] == "binding"
    assert req["requestSubResource"] == "binding"
    assert req["object"]["target"]["name"] == "n1"


async def test_dry_run_create_update_delete_reach_webhooks_with_dry_run_and_store_nothing(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    await install(srv, validating(webhook.hook("pods.t.test")))
    status, _ = await call(srv, "POST", f"{PODS}?dryRun=All&fieldManager=kubectl", pod_body("d"))
    assert status == 201
    assert (await call(srv, "GET", f"{PODS}/d"))[0] == 404
    req = webhook.requests()[-1]
    assert req["dryRun"] is True
    assert req["options"] == {
        "kind": "CreateOptions",
        "apiVersion": "meta.k8s.io/v1",
        "dryRun": ["All"],
        "fieldManager": "kubectl",
    }
    await call(srv, "POST", PODS, pod_body("d"))
    status, _ = await call(
        srv,
        "PATCH",
        f"{PODS}/d?dryRun=All",
        {"metadata": {"labels": {"x": "1"}}},
        content_type="application/merge-patch+json",
    )
    assert status == 200
    assert webhook.requests()[-1]["dryRun"] is True
    assert "labels" not in (await call(srv, "GET", f"{PODS}/d"))[1]["metadata"]
    status, _ = await call(srv, "DELETE", f"{PODS}/d?dryRun=All")
    assert status == 200
    assert webhook.requests()[-1]["dryRun"] is True
    assert webhook.requests()[-1]["options"]["dryRun"] == ["All"]
    assert (await call(srv, "GET", f"{PODS}/d"))[0] == 200


async def test_mutating_webhook_sees_create_before_name_generation_validating_after(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    await install(srv, mutating(webhook.hook("pods.m.test", "/m")))
    await install(srv, validating(webhook.hook("pods.v.test", "/v")))
    body = pod_body("")
    body["metadata"] = {"generateName": "gen-"}
    status, pod = await call(srv, "POST", PODS, body)
    assert status == 201
    m, v = webhook.requests("/m")[0], webhook.requests("/v")[0]
    assert "name" not in m
    assert "uid" not in m["object"]["metadata"]
    assert v["name"] == pod["metadata"]["name"]
    assert v["object"]["metadata"]["uid"] == pod["metadata"]["uid"]
    assert m["oldObject"] is None
    assert m["options"]["kind"] == "CreateOptions"


async def test_exec_is_a_connect_with_pod_exec_options_and_can_be_denied(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    await install(
        srv,
        validating(webhook.hook("pods.t.test", resources=("pods/exec",), operations=("CONNECT",))),
    )
    await call(srv, "POST", PODS, pod_body("p"))
    status, err = await call(
        srv, "POST", f"{PODS}/p/exec?command=ls&command=-l&container=main&stdout=true"
    )
    assert status == 400  # admitted; a plain request is not an upgrade
    assert err["message"] == "Upgrade request required"
    (req,) = webhook.requests()
    assert req["operation"] == "CONNECT"
    assert req["subResource"] == "exec"
    assert req["kind"] == {"group": "", "version": "v1", "kind": "PodExecOptions"}
    assert req["object"] == {
        "kind": "PodExecOptions",
        "apiVersion": "v1",
        "stdout": True,
        "container": "main",
        "command": ["ls", "-l"],
    }
    assert req["options"] is None
    webhook.respond = lambda _p, _r: deny("no exec")
    status, err = await call(srv, "POST", f"{PODS}/p/exec?command=ls")
    assert status == 403
    assert err["message"] == 'admission webhook "pods.t.test" denied the request: no exec'
