"""Helpers shared by the sandbox API server conformance tests."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from bridge.errors import KubeInvalid
from bridge.kube.client import KubeClient
from bridge.kube.resources import Resource
from sandbox.kubeapi import SANDBOX_TOKEN
from tests import waiting

NS = "default"
# raw HTTP as the admin kubeconfig's user (system:masters); no header is system:anonymous
ADMIN_HEADERS = {"Authorization": f"Bearer {SANDBOX_TOKEN}"}


def allow_everything(srv: Any, username: str) -> None:
    """Bind ``username`` to ``cluster-admin`` (for tests about who a request is from, not
    about what it may do)."""
    rd = srv.api.resolve("rbac.authorization.k8s.io", "v1", "clusterrolebindings")
    srv.api.create(
        rd,
        "",
        {
            "metadata": {"generateName": "allow-everything-"},
            "roleRef": {"apiGroup": rd.group, "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"apiGroup": rd.group, "kind": "User", "name": username}],
        },
    )


def pod_body(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}], **spec},
    }


def binding_body(pod: str, node: str, uid: str | None = None) -> dict[str, Any]:
    md: dict[str, Any] = {"name": pod}
    if uid:
        md["uid"] = uid
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": md,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


async def eventually(pred: Callable[[], Awaitable[bool]], deadline_s: float = 5.0) -> None:
    """Poll an async predicate until it holds (deadline, no fixed sleep)."""
    await waiting.eventually(pred, within=deadline_s, what=str(pred), every=0.01)


async def invalid(
    kube: KubeClient, res: Resource, body: dict[str, Any], namespace: str | None = NS
) -> str:
    """Creating ``body`` is refused with 422 Invalid; its message."""
    with pytest.raises(KubeInvalid) as e:
        await kube.create(res, body, namespace)
    assert e.value.status == 422
    return str(e.value)
