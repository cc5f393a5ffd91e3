"""matchConditions (CEL) decide per request like kube-apiserver: evaluated before the call;
all true -> called, any false -> skipped, an error -> failurePolicy; expressions that do
not compile are refused when the configuration is created (422 naming the field)."""

from __future__ import annotations

from sandbox.cluster import SandboxCluster
from tests.component.kubeapi.helpers import allow_everything, pod_body
from tests.component.kubeapi.webhook_server import REG, Webhook, call, deny, install, validating

PODS = "/api/v1/namespaces/default/pods"
EXEMPT = {
    "name": "not-kube-system-sa",
    "expression": '!request.userInfo.username.startsWith("system:serviceaccount:kube-system:")',
}


async def test_false_condition_skips_the_webhook_and_true_conditions_call_it(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    webhook.respond = lambda _p, _r: deny("nope")
    labelled = {"name": "labelled", "expression": "has(object.metadata.labels)"}
    await install(srv, validating(webhook.hook("pods.t.test", matchConditions=[EXEMPT, labelled])))
    sa = srv.mint_token("system:serviceaccount:kube-system:job-controller")
    allow_everything(srv, "system:serviceaccount:kube-system:job-controller")
    body = pod_body("a")
    body["metadata"]["labels"] = {"x": "y"}
    status, _ = await call(srv, "POST", PODS, body, token=sa)
    assert status == 201  # first condition false: not called
    assert webhook.requests() == []
    status, _ = await call(srv, "POST", PODS, pod_body("b"))
    assert status == 201  # second condition false
    assert webhook.requests() == []
    status, err = await call(srv, "POST", PODS, body | {"metadata": {"name": "c", "labels": {}}})
    assert status == 403  # both true: called, and it denies
    assert err["message"] == 'admission webhook "pods.t.test" denied the request: nope'


async def test_namespace_object_and_old_object_variables_are_bound(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    cond = {
        "name": "ns-and-old",
        "expression": 'namespaceObject.metadata.name == "default" && oldObject != null',
    }
    await install(srv, validating(webhook.hook("pods.t.test", matchConditions=[cond])))
    await call(srv, "POST", PODS, pod_body("a"))
    assert webhook.requests() == []  # CREATE: oldObject is null
    await call(
        srv,
        "PATCH",
        f"{PODS}/a",
        {"metadata": {"labels": {"k": "v"}}},
        content_type="application/merge-patch+json",
    )
    assert [r["operation"] for r in webhook.requests()] == ["UPDATE"]


async def test_condition_error_fails_the_request_naming_webhook_and_condition(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    broken = {"name": "missing-field", "expression": 'object.metadata.labels.app == "x"'}
    await install(srv, validating(webhook.hook("pods.t.test", matchConditions=[broken])))
    status, err = await call(srv, "POST", PODS, pod_body("a"))
    assert status == 500
    assert err["message"].startswith(
        'Internal error occurred: failed calling webhook "pods.t.test": '
        "matchCondition 'missing-field'"
    )
    assert webhook.requests() == []


async def test_condition_error_with_failure_policy_ignore_skips_the_webhook(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    webhook.respond = lambda _p, _r: deny("nope")
    broken = {"name": "missing-field", "expression": 'object.metadata.labels.app == "x"'}
    hook = webhook.hook("pods.t.test", matchConditions=[broken], failurePolicy="Ignore")
    await install(srv, validating(hook))
    status, _ = await call(srv, "POST", PODS, pod_body("a"))
    assert status == 201


async def test_expression_that_does_not_compile_is_refused_with_422_naming_the_field(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    bad = {"name": "bad", "expression": "request.userInfo.username.startsWith("}
    conf = validating(webhook.hook("pods.t.test", matchConditions=[EXEMPT, bad]))
    status, err = await call(srv, "POST", f"{REG}/validatingwebhookconfigurations", conf)
    assert status == 422
    assert err["reason"] == "Invalid"
    (cause,) = err["details"]["causes"]
    assert cause["field"] == "webhooks[0].matchConditions[1].expression"
    assert "compilation failed" in cause["message"]
    assert err["message"].startswith(
        'ValidatingWebhookConfiguration.admissionregistration.k8s.io "v" is invalid: '
        "webhooks[0].matchConditions[1].expression: Invalid value: "
    )
