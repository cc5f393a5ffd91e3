"""timeoutSeconds, failurePolicy, reinvocationPolicy, matchPolicy and the validation of
webhook configurations, like kube-apiserver v1.36."""

from __future__ import annotations

from typing import Any

from sandbox.cluster import SandboxCluster
from tests.component.kubeapi.helpers import pod_body
from tests.component.kubeapi.webhook_server import (
    REG,
    Webhook,
    call,
    install,
    mutating,
    patch_response,
    unreachable,
    validating,
)

PODS = "/api/v1/namespaces/default/pods"


async def test_timeout_is_a_failure_with_context_deadline_exceeded(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    webhook.delay = 2.0
    await install(srv, validating(webhook.hook("pods.t.test", timeoutSeconds=1)))
    status, err = await call(srv, "POST", PODS, pod_body("a"))
    assert status == 500
    assert err["message"] == (
        'Internal error occurred: failed calling webhook "pods.t.test": failed to call webhook: '
        f'Post "{webhook.url}/?timeout=1s": context deadline exceeded'
    )


async def test_failure_policy_ignore_lets_the_request_through_when_the_webhook_is_down(
    srv: SandboxCluster,
) -> None:
    down = await unreachable()
    await install(srv, validating(down.hook("pods.t.test", failurePolicy="Ignore")))
    status, _ = await call(srv, "POST", PODS, pod_body("a"))
    assert status == 201


def _reinvoke_config(webhook: Webhook, policy: str) -> dict[str, Any]:
    return mutating(
        webhook.hook("first.t.test", "/first", reinvocationPolicy=policy),
        webhook.hook("second.t.test", "/second"),
    )


def _respond(path: str, req: dict[str, Any]) -> dict[str, Any]:
    if path == "/second" and not req["object"]["metadata"].get("labels"):
        return patch_response([{"op": "add", "path": "/metadata/labels", "value": {"b": "1"}}])
    return {}


async def test_if_needed_webhook_is_called_again_after_a_later_webhook_changed_the_object(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    webhook.respond = _respond
    await install(srv, _reinvoke_config(webhook, "IfNeeded"))
    status, pod = await call(srv, "POST", PODS, pod_body("a"))
    assert status == 201
    assert pod["metadata"]["labels"] == {"b": "1"}
    first = webhook.requests("/first")
    assert len(first) == 2
    assert first[1]["object"]["metadata"]["labels"] == {"b": "1"}
    assert len(webhook.requests("/second")) == 1


async def test_never_reinvocation_calls_each_mutating_webhook_once(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    webhook.respond = _respond
    await install(srv, _reinvoke_config(webhook, "Never"))
    await call(srv, "POST", PODS, pod_body("a"))
    assert len(webhook.requests("/first")) == 1


def _crd() -> dict[str, Any]:
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {"name": "v1", "served": True, "storage": True, "schema": schema},
                {"name": "v2", "served": True, "storage": False, "schema": schema},
            ],
        },
    }


async def test_match_policy_equivalent_sends_another_served_version_as_the_rule_names_it(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    srv.api.install_crd(_crd())
    common = {"groups": ("example.com",), "versions": ("v1",), "resources": ("widgets",)}
    await install(
        srv,
        validating(
            webhook.hook("equivalent.t.test", "/eq", **common),
            webhook.hook("exact.t.test", "/exact", matchPolicy="Exact", **common),
        ),
    )
    body = {"apiVersion": "example.com/v2", "kind": "Widget", "metadata": {"name": "w"}}
    status, _ = await call(srv, "POST", "/apis/example.com/v2/namespaces/default/widgets", body)
    assert status == 201
    assert webhook.requests("/exact") == []
    (req,) = webhook.requests("/eq")
    assert req["kind"] == {"group": "example.com", "version": "v1", "kind": "Widget"}
    assert req["resource"] == {"group": "example.com", "version": "v1", "resource": "widgets"}
    assert req["requestKind"] == {"group": "example.com", "version": "v2", "kind": "Widget"}
    assert req["object"]["apiVersion"] == "example.com/v1"


async def test_configuration_is_validated_with_422_listing_every_bad_field(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    hook = webhook.hook("two.segments", timeoutSeconds=31, failurePolicy="Sometimes")
    hook["sideEffects"] = "Some"
    hook["clientConfig"] = {"url": "http://127.0.0.1:1/"}
    status, err = await call(srv, "POST", f"{REG}/mutatingwebhookconfigurations", mutating(hook))
    assert status == 422
    fields = {c["field"]: c["message"] for c in err["details"]["causes"]}
    assert fields == {
        "webhooks[0].name": 'Invalid value: "two.segments": should be a domain with at least '
        "three segments separated by dots",
        "webhooks[0].clientConfig.url": "Invalid value: \"http://127.0.0.1:1/\": 'https' is "
        "the only allowed URL scheme",
        "webhooks[0].failurePolicy": 'Unsupported value: "Sometimes": supported values: '
        '"Fail", "Ignore"',
        "webhooks[0].sideEffects": 'Unsupported value: "Some": supported values: "None", '
        '"NoneOnDryRun"',
        "webhooks[0].timeoutSeconds": "Invalid value: 31: the timeout value must be between "
        "1 and 30 seconds",
    }


async def test_configuration_defaults_are_filled_in_like_the_server(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    await install(srv, mutating(webhook.hook("pods.m.test")))
    _, conf = await call(srv, "GET", f"{REG}/mutatingwebhookconfigurations/m")
    hook = conf["webhooks"][0]
    assert hook["timeoutSeconds"] == 10
    assert hook["failurePolicy"] == "Fail"
    assert hook["matchPolicy"] == "Equivalent"
    assert hook["reinvocationPolicy"] == "Never"
    assert hook["rules"][0]["scope"] == "*"
    status, _ = await call(
        srv,
        "PATCH",
        f"{REG}/mutatingwebhookconfigurations/m",
        [{"op": "replace", "path": "/webhooks/0/timeoutSeconds", "value": 0}],
        content_type="application/json-patch+json",
    )
    assert status == 422  # validated on update too


async def test_webhook_stopped_after_use_is_connection_refused_not_a_stale_connection(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    await install(srv, validating(webhook.hook("pods.t.test")))
    assert (await call(srv, "POST", PODS, pod_body("a")))[0] == 201  # a kept connection
    await webhook.stop()
    status, err = await call(srv, "POST", PODS, pod_body("b"))
    assert status == 500
    assert err["message"].endswith(
        f"dial tcp 127.0.0.1:{webhook.port}: connect: connection refused"
    )
