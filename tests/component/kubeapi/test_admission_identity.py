"""Who is calling: bearer tokens map to users like kube-apiserver's static token file, and
the AdmissionReview's ``userInfo`` carries that user."""

from __future__ import annotations

from pathlib import Path

import yaml

from sandbox.cluster import SandboxCluster
from tests.component.kubeapi.helpers import allow_everything, eventually, pod_body
from tests.component.kubeapi.webhook_server import Webhook, call, install, unreachable, validating

PODS = "/api/v1/namespaces/default/pods"


async def test_static_token_user_reaches_the_webhook_as_user_info(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    srv.add_token("alice-token", "alice", groups=("devs",), uid="u-1")
    allow_everything(srv, "alice")
    await install(srv, validating(webhook.hook("pods.t.test")))
    status, _ = await call(srv, "POST", PODS, pod_body("a"), token="alice-token")
    assert status == 201
    assert webhook.requests()[-1]["userInfo"] == {
        "username": "alice",
        "uid": "u-1",
        "groups": ["devs", "system:authenticated"],
    }


async def test_service_account_kubeconfig_gets_the_service_account_groups(
    srv: SandboxCluster, webhook: Webhook, tmp_path: Path
) -> None:
    path = srv.write_kubeconfig(tmp_path / "kc", username="system:serviceaccount:ns1:bot")
    token = yaml.safe_load(path.read_text())["users"][0]["user"]["token"]
    allow_everything(srv, "system:serviceaccount:ns1:bot")
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


async def test_tokens_hook_mints_a_token_for_a_user_out_of_process(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    status, body = await call(srv, "POST", "/sandbox/tokens", {"username": "bob", "groups": ["g1"]})
    assert status == 201
    allow_everything(srv, "bob")
    await install(srv, validating(webhook.hook("pods.t.test")))
    await call(srv, "POST", PODS, pod_body("d"), token=body["token"])
    assert webhook.requests()[-1]["userInfo"]["username"] == "bob"
    assert webhook.requests()[-1]["userInfo"]["groups"] == ["g1", "system:authenticated"]
    status, err = await call(srv, "POST", "/sandbox/tokens", {"groups": []})
    assert status == 400
    assert "username" in err["message"]


async def test_fake_kubelet_writes_status_and_final_delete_as_its_node(
    srv: SandboxCluster, webhook: Webhook
) -> None:
    srv.set_node_ready("n1")
    await install(srv, validating(webhook.hook("pods.t.test", resources=("pods", "pods/status"))))
    await call(srv, "POST", PODS, pod_body("k", nodeName="n1"))
    srv.kubelet.start()
    await call(srv, "DELETE", f"{PODS}/k", {"gracePeriodSeconds": 1})

    async def gone() -> bool:
        return (await call(srv, "GET", f"{PODS}/k"))[0] == 404

    await eventually(gone)
    seen = [(r["operation"], r.get("subResource", ""), r["userInfo"]) for r in webhook.requests()]
    node = {"username": "system:node:n1", "groups": ["system:nodes", "system:authenticated"]}
    assert ("UPDATE", "status", node) in seen  # Pending -> Running
    assert seen[-1] == ("DELETE", "", node)  # the kubelet's final delete


async def test_webhook_down_refuses_deletes_unless_a_match_condition_exempts_the_caller(
    srv: SandboxCluster,
) -> None:
    down = await unreachable()
    srv.set_node_ready("n1")
    await call(srv, "POST", PODS, pod_body("s", nodeName="n1"))
    exempt = {"name": "not-nodes", "expression": '!("system:nodes" in request.userInfo.groups)'}
    hook = down.hook("pods.t.test", operations=("DELETE",), matchConditions=[exempt])
    await install(srv, validating(hook))
    status, err = await call(srv, "DELETE", f"{PODS}/s")
    assert status == 500  # the admin is not exempt: refused while the webhook is down
    assert err["message"].endswith("connect: connection refused")
    node = srv.mint_token("system:node:n1", ["system:nodes"])
    allow_everything(srv, "system:node:n1")
    status, _ = await call(srv, "DELETE", f"{PODS}/s", {"gracePeriodSeconds": 0}, token=node)
    assert status == 200  # the node is exempt: its DELETE does not need the webhook
