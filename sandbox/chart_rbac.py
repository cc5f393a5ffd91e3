"""The Helm chart's ServiceAccounts and RBAC on the sandbox API server (sandbox tooling).

The end-to-end tests and the demo run the scheduler, the controller and the admission
webhook as the ServiceAccounts the chart creates, with exactly the Roles, ClusterRoles and
bindings ``helm template`` renders from ``deploy/helm/slurm-bridge``, never as the admin:

    identities = render(leader_election=False)
    await component_kubeconfig(admin_kube, identities, "scheduler", cluster, path)
    # path: a kubeconfig whose token is the scheduler's ServiceAccount (TokenRequest)

The tokens come from the TokenRequest API (``serviceaccounts/<name>/token``), as a pod's
projected token would; the sandbox API server authorizes every request with RBAC, so a
verb the chart does not grant fails the test that needs it.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bridge.errors import KubeConflict
from bridge.kube.client import KubeClient
from bridge.kube.resources import NAMESPACES, Resource
from sandbox.chart_webhooks import (
    CHART,
    RELEASE,
    RELEASE_NAMESPACE,
    ChartRenderError,
    helm_binary,
)
from sandbox.kubeapi.server import kubeconfig_for

Obj = dict[str, Any]
COMPONENTS = ("scheduler", "controller", "admission")
_RBAC = "rbac.authorization.k8s.io"
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount", True)
_RESOURCES = {
    "ServiceAccount": SERVICE_ACCOUNTS,
    "ClusterRole": Resource(_RBAC, "v1", "clusterroles", "ClusterRole", False),
    "ClusterRoleBinding": Resource(_RBAC, "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    "Role": Resource(_RBAC, "v1", "roles", "Role", True),
    "RoleBinding": Resource(_RBAC, "v1", "rolebindings", "RoleBinding", True),
}
TOKEN_SECONDS = 24 * 3600  # longer than any test or demo


@dataclass(frozen=True)
class ChartIdentities:
    """The chart's ServiceAccounts and RBAC objects, in the order to create them."""

    objects: list[Obj]
    # component -> (namespace, ServiceAccount name)
    service_accounts: dict[str, tuple[str, str]]

    def namespaces(self) -> list[str]:
        """The namespaces the objects live in (the release's, the Lease namespace)."""
        found = {o["metadata"]["namespace"] for o in self.objects if o["metadata"].get("namespace")}
        return sorted(found)

    def username(self, component: str) -> str:
        ns, name = self.service_accounts[component]
        return f"system:serviceaccount:{ns}:{name}"


def render(
    *,
    leader_election: bool = False,
    lease_namespace: str = "slurm-bridge",
    helm: str | None = None,
    release: str = RELEASE,
    namespace: str = RELEASE_NAMESPACE,
    sets: Iterable[str] = (),
    chart: Path | None = None,
) -> ChartIdentities:
    """``helm template`` the chart's ServiceAccounts and RBAC (leader election as the
    bridge's config has it, since it adds the Lease Role); ``chart``: another tree's
    chart (default: this one's)."""
    where = str(chart or CHART)
    args = [helm or helm_binary(), "template", release, where, "--namespace", namespace]
    args += ["--set", f"config.leaderElection={str(leader_election).lower()}"]
    if not leader_election:  # the chart refuses two replicas without it
        args += ["--set", "scheduler.replicas=1", "--set", "controller.replicas=1"]
    args += ["--set", f"config.leaderElectionNamespace={lease_namespace}"]
    for s in sets:
        args += ["--set", s]
    args += ["--show-only", "templates/serviceaccounts.yaml", "--show-only", "templates/rbac.yaml"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        raise ChartRenderError(f"helm template failed: {proc.stderr.strip()}")
    docs = [d for d in yaml.safe_load_all(proc.stdout) if d]
    order = list(_RESOURCES)
    docs.sort(key=lambda d: order.index(d["kind"]))
    accounts = {
        d["metadata"]["labels"]["app.kubernetes.io/component"]: (
            str(d["metadata"]["namespace"]),
            str(d["metadata"]["name"]),
        )
        for d in docs
        if d["kind"] == "ServiceAccount"
    }
    return ChartIdentities(docs, accounts)


async def service_account_token(kube: KubeClient, namespace: str, name: str) -> str:
    """A token of the ServiceAccount from the TokenRequest API."""
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": TOKEN_SECONDS},
    }
    answer = await kube.request(
        "POST",
        SERVICE_ACCOUNTS.path(namespace, name, "token"),
        body=body,
        what=f"create token for serviceaccount {namespace}/{name}",
    )
    return str(answer["status"]["token"])


async def apply(kube: KubeClient, identities: ChartIdentities) -> None:
    """Create the chart's namespaces, ServiceAccounts and RBAC through ``kube`` (the
    admin's); what exists already is kept (so components may share one server)."""
    for ns in identities.namespaces():
        with contextlib.suppress(KubeConflict):
            await kube.create(NAMESPACES, {"metadata": {"name": ns}})
    for doc in identities.objects:
        res = _RESOURCES[doc["kind"]]
        with contextlib.suppress(KubeConflict):
            await kube.create(
                res, doc, doc["metadata"].get("namespace") if res.namespaced else None
            )


async def component_kubeconfig(
    kube: KubeClient, identities: ChartIdentities, component: str, cluster: Obj, path: Path
) -> Path:
    """Apply the chart's identities, then write a kubeconfig for ``component``'s
    ServiceAccount (a TokenRequest token) at ``path``."""
    await apply(kube, identities)
    ns, name = identities.service_accounts[component]
    token = await service_account_token(kube, ns, name)
    return write_kubeconfig(path, kubeconfig_for(cluster, token, identities.username(component)))


def write_kubeconfig(path: Path, doc: Obj) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path
