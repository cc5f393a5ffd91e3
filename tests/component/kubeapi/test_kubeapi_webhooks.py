"""The sandbox API server calls admission webhooks on CREATE, like kube-apiserver: a
loopback HTTPS webhook (trustme CA as caBundle) mutates with a JSONPatch and denies."""

from __future__ import annotations

from typing import Any

from sandbox.cluster import SandboxCluster
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

NS = "slurm-bridge"
PODS = f"/api/v1/namespaces/{NS}/pods"


def _respond(path: str, req: dict[str, Any]) -> dict[str, Any]:
    if path == "/mutate":
        return patch_response([{"op": "add", "path": "/metadata/labels", "value": {"seen": "yes"}}])
    if req["object"]["metadata"]["name"].startswith("bad"):
        return deny("no")
    return {}


def _hook(webhook: Webhook, path: str, namespace: str = NS) -> dict[str, Any]:
    return webhook.hook(
        "pods.t.test",
        path,
        operations=("CREATE",),
        namespaceSelector={"matchLabels": {"kubernetes.io/metadata.name": namespace}},
    )


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "pause:3.10"}]},
    }


async def test_mutating_webhook_patch_is_applied_and_validating_denial_is_returned(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    webhook.respond = _respond
    await install(srv, mutating(_hook(webhook, "/mutate")))
    await install(srv, validating(_hook(webhook, "/validate")))
    status, pod = await call(srv, "POST", PODS, _pod("good"))
    assert status == 201
    assert pod["metadata"]["labels"] == {"seen": "yes"}
    assert pod["spec"]["schedulerName"] == "default-scheduler"  # still defaulted
    status, body = await call(srv, "POST", PODS, _pod("bad-1"))
    assert status == 403
    assert body["message"] == 'admission webhook "pods.t.test" denied the request: no'


async def test_webhook_outside_its_namespace_selector_is_not_called(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    webhook.respond = _respond
    await install(srv, validating(_hook(webhook, "/validate", "other")))
    status, _ = await call(srv, "POST", PODS, _pod("bad-2"))
    assert status == 201
    assert webhook.calls == []


async def test_unreachable_webhook_fails_the_create_with_failure_policy_fail(
    srv: SandboxCluster,
) -> None:
    down = await unreachable()
    await install(srv, validating(_hook(down, "/validate")))
    status, body = await call(srv, "POST", PODS, _pod("x"))
    assert status == 500
    assert 'failed calling webhook "pods.t.test"' in body["message"]
