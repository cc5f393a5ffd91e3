"""The Helm chart's admission webhooks, installed on the sandbox API server (sandbox tooling).

The demo and the end-to-end tests register exactly what ``helm template`` renders from
``deploy/helm/slurm-bridge`` (rules, namespaceSelectors, matchConditions, failurePolicy,
``clientConfig.service``), so what they exercise is what a cluster gets. Only what a
cluster's other parts would provide is added here: the EndpointSlice that points the chart's
Service at the webhook's real address (kube-controller-manager's job), and the caBundle of
the certificate the caller issued for ``<service>.<namespace>.svc``.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bridge.kube.client import KubeClient
from bridge.kube.resources import NAMESPACES, Resource

Obj = dict[str, Any]
REPO = Path(__file__).resolve().parent.parent
CHART = REPO / "deploy" / "helm" / "slurm-bridge"
INSTALL_HELM = REPO / "deploy" / "tools" / "install-helm.sh"
RELEASE = "slurm-bridge"
RELEASE_NAMESPACE = "slurm-bridge-system"
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")

SERVICES = Resource("", "v1", "services", "Service", True)
ENDPOINT_SLICES = Resource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True)
_RESOURCES = {
    "Namespace": NAMESPACES,
    "Service": SERVICES,
    "EndpointSlice": ENDPOINT_SLICES,
    "MutatingWebhookConfiguration": Resource(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        WEBHOOK_KINDS[0],
        False,
    ),
    "ValidatingWebhookConfiguration": Resource(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        WEBHOOK_KINDS[1],
        False,
    ),
}


class ChartRenderError(Exception):
    """helm is missing or ``helm template`` failed (the message says which and how to fix)."""


def helm_binary() -> str:
    """helm next to the running interpreter (deploy/tools/install-helm.sh puts it in .venv/bin),
    else on PATH."""
    beside = Path(sys.executable).parent / "helm"
    found = str(beside) if beside.exists() else shutil.which("helm")
    if not found:
        raise ChartRenderError(f"helm not found: install it with {INSTALL_HELM}")
    return found


@dataclass(frozen=True)
class ChartWebhooks:
    """The chart's Service and webhook configurations, and the identities it trusts."""

    service: Obj
    configurations: list[Obj]
    bridge_usernames: list[str]

    @property
    def namespace(self) -> str:
        return str(self.service["metadata"]["namespace"])

    @property
    def service_host(self) -> str:
        """The DNS name the API server verifies the webhook's certificate for."""
        return f"{self.service['metadata']['name']}.{self.namespace}.svc"

    def webhook_names(self) -> list[str]:
        return [wh["name"] for c in self.configurations for wh in c["webhooks"]]

    def for_sandbox(self, port: int, ca_pem: str) -> list[Obj]:
        """What to create on the sandbox API server, in order: the release namespace, the
        Service, an EndpointSlice sending it to ``127.0.0.1:port``, and the webhook
        configurations trusting ``ca_pem``."""
        svc_name = self.service["metadata"]["name"]
        port_name = self.service["spec"]["ports"][0].get("name", "")
        bundle = base64.b64encode(ca_pem.encode()).decode()
        configurations = []
        for c in self.configurations:
            hooks = [
                {**wh, "clientConfig": {**wh["clientConfig"], "caBundle": bundle}}
                for wh in c["webhooks"]
            ]
            configurations.append({**c, "webhooks": hooks})
        slice_ = {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{svc_name}-sandbox",
                "namespace": self.namespace,
                "labels": {"kubernetes.io/service-name": svc_name},
            },
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
            "ports": [{"name": port_name, "port": port, "protocol": "TCP"}],
        }
        namespace = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": self.namespace},
        }
        return [namespace, self.service, slice_, *configurations]


def render(
    managed_namespaces: Sequence[str],
    *,
    helm: str | None = None,
    release: str = RELEASE,
    namespace: str = RELEASE_NAMESPACE,
    sets: Iterable[str] = (),
) -> ChartWebhooks:
    """``helm template`` the chart's admission webhooks and config for these namespaces."""
    args = [helm or helm_binary(), "template", release, str(CHART), "--namespace", namespace]
    for i, ns in enumerate(managed_namespaces):
        args += ["--set", f"config.managedNamespaces[{i}]={ns}"]
    for s in sets:
        args += ["--set", s]
    args += ["--show-only", "templates/admission-webhooks.yaml"]
    args += ["--show-only", "templates/configmap.yaml"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        raise ChartRenderError(f"helm template failed: {proc.stderr.strip()}")
    docs = [d for d in yaml.safe_load_all(proc.stdout) if d]
    (service,) = [d for d in docs if d["kind"] == "Service"]
    (config_map,) = [d for d in docs if d["kind"] == "ConfigMap"]
    config = yaml.safe_load(config_map["data"]["config.yaml"])
    return ChartWebhooks(
        service=service,
        configurations=[d for d in docs if d["kind"] in WEBHOOK_KINDS],
        bridge_usernames=list(config["admission"]["bridgeUsernames"]),
    )


async def install(kube: KubeClient, docs: Iterable[Obj]) -> None:
    """Create ``docs`` (the output of :meth:`ChartWebhooks.for_sandbox`) through the API."""
    for doc in docs:
        res = _RESOURCES[doc["kind"]]
        ns = doc["metadata"].get("namespace") if res.namespaced else None
        await kube.create(res, doc, ns)
