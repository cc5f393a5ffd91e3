"""clientConfig.service, like kube-apiserver: the Service is resolved through its
EndpointSlices (else its Endpoints) to an address and port, and TLS is verified for the
name ``<service>.<namespace>.svc`` with the caBundle; no endpoints -> a failure naming the
service."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from sandbox.cluster import SandboxCluster
from tests.component.kubeapi.helpers import pod_body
from tests.component.kubeapi.webhook_server import Webhook, call, install, validating

PODS = "/api/v1/namespaces/default/pods"
SVC_HOST = "hook.default.svc"


@pytest.fixture
async def svc_webhook() -> AsyncIterator[Webhook]:
    hook = Webhook(hostnames=(SVC_HOST,))  # the cert names only the service's DNS name
    await hook.start()
    try:
        yield hook
    finally:
        await hook.stop()


def _service_hook(webhook: Webhook) -> dict[str, Any]:
    hook = webhook.hook("pods.t.test")
    hook["clientConfig"] = {
        "service": {"namespace": "default", "name": "hook", "port": 443, "path": "/validate"},
        "caBundle": webhook.bundle,
    }
    return hook


async def _service(srv: SandboxCluster) -> None:
    svc = {
        "metadata": {"name": "hook"},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 9443}]},
    }
    status, body = await call(srv, "POST", "/api/v1/namespaces/default/services", svc)
    assert status == 201, body


async def test_service_reference_is_called_through_its_endpoint_slice_with_the_svc_name(
    srv: SandboxCluster, svc_webhook: Webhook
) -> None:
    await _service(srv)
    eps = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": "hook-abc", "labels": {"kubernetes.io/service-name": "hook"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
        "ports": [{"name": "https", "port": svc_webhook.port, "protocol": "TCP"}],
    }
    status, _ = await call(
        srv, "POST", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", eps
    )
    assert status == 201
    await install(srv, validating(_service_hook(svc_webhook)))
    status, _ = await call(srv, "POST", PODS, pod_body("a"))
    assert status == 201
    assert [p for p, _ in svc_webhook.calls] == ["/validate"]


async def test_service_reference_falls_back_to_endpoints(
    srv: SandboxCluster, svc_webhook: Webhook
) -> None:
    await _service(srv)
    ep = {
        "metadata": {"name": "hook"},
        "subsets": [
            {
                "addresses": [{"ip": "127.0.0.1"}],
                "ports": [{"name": "https", "port": svc_webhook.port}],
            }
        ],
    }
    assert (await call(srv, "POST", "/api/v1/namespaces/default/endpoints", ep))[0] == 201
    await install(srv, validating(_service_hook(svc_webhook)))
    assert (await call(srv, "POST", PODS, pod_body("a")))[0] == 201
    assert len(svc_webhook.calls) == 1


async def test_service_without_endpoints_fails_naming_the_service(
    srv: SandboxCluster, svc_webhook: Webhook
) -> None:
    await _service(srv)
    await install(srv, validating(_service_hook(svc_webhook)))
    status, err = await call(srv, "POST", PODS, pod_body("a"))
    assert status == 500
    assert err["message"] == (
        'Internal error occurred: failed calling webhook "pods.t.test": failed to call webhook: '
        'Post "https://hook.default.svc:443/validate?timeout=10s": '
        'no endpoints available for service "hook"'
    )
