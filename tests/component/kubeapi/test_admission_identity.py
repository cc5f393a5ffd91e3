"""Who is calling: bearer tokens map to users like kube-apiserver's static token file, and
the AdmissionReview's ``userInfo`` carries that user."""

from __future__ import annotations

from pathlib import Path

import yaml

from bridge.sandbox.kubeapi import SandboxApiServer
from tests.component.kubeapi.helpers import pod_body
from tests.component.kubeapi.webhook_server import Webhook, call, install, validating

PODS = "/api/v1/namespaces/default/pods"


async def test_static_token_user_reaches_the_webhook_as_user_info(
    srv: SandboxApiServer, webhook: Webhook
) -> None:
    srv.add_token("alice-token", "alice", groups=("devs",), uid="u-1")
    await install(srv, validating(webhook.hook("pods.t.test")))
    status, _ = await call(srv, "POST", PODS, pod_body("a"), token="alice-token")
    assert status == 201
    assert webhook.requests()[-1]["userInfo"] == {
        "username": "alice",
        "uid": "u-1",
        "groups": ["devs", "system:authenticated"],
    }


async def test_service_account_kubeconfig_gets_the_service_account_groups(
    srv: SandboxApiServer, webhook: Webhook, tmp_path: Path
) -> None:
    path = srv.write_kubeconfig(tmp_path / "kc", username="system:serviceaccount:ns1:bot")
    token = yaml.safe_load(path.read_text())["users"][0]["user"]["token"]
    await install(srv, validating(webhook.hook("pods.t.test")))
    await call(srv, "POST", PODS, pod_body("b"), token=token)
    assert webhook.requests()[-1]["userInfo"] == {
        "username": "system:serviceaccount:ns1:bot",
        "groups": [
            "system:serviceaccounts",
            "system:serviceaccounts:ns1",
            "system:authenticated",
        ],
    }


async def test_unknown_token_is_the_sandbox_admin_a_documented_deviation(
    srv: SandboxApiServer, webhook: Webhook
) -> None:
    await install(srv, validating(webhook.hook("pods.t.test")))
    await call(srv, "POST", PODS, pod_body("c"), token="nobody-knows-this")
    assert webhook.requests()[-1]["userInfo"] == {
        "username": "sandbox",
        "groups": ["system:masters", "system:authenticated"],
    }


async def test_tokens_hook_mints_a_token_for_a_user_out_of_process(
    srv: SandboxApiServer, webhook: Webhook
) -> None:
    status, body = await call(srv, "POST", "/sandbox/tokens", {"username": "bob", "groups": ["g1"]})
    assert status == 201
    await install(srv, validating(webhook.hook("pods.t.test")))
    await call(srv, "POST", PODS, pod_body("d"), token=body["token"])
    assert webhook.requests()[-1]["userInfo"]["username"] == "bob"
    assert webhook.requests()[-1]["userInfo"]["groups"] == ["g1", "system:authenticated"]
    status, err = await call(srv, "POST", "/sandbox/tokens", {"groups": []})
    assert status == 400
    assert "username" in err["message"]
