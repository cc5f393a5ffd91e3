"""``pods/resize`` as kube-apiserver 1.36 serves it (KUBE.md: in-place resize GA in 1.35,
pod-level resources resize beta in 1.36): the containers', the sidecars' and the pod-level
``resources`` change, a plain init container's do not, only CPU and memory move, the QoS
class stays, and every other change in the request is dropped."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from .helpers import NS, pod_body


def _res(cpu: str, memory: str = "64Mi") -> dict[str, Any]:
    return {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}}


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    body = pod_body(name, **spec)
    body["spec"]["containers"][0]["resources"] = _res("1")
    return body


def _init(name: str, sidecar: bool) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "busybox:1.36", "resources": _res("1")}
    if sidecar:
        c["restartPolicy"] = "Always"
    return c


async def _resize(core: client.CoreV1Api, name: str, spec: dict[str, Any]) -> Any:
    return await core.patch_namespaced_pod_resize(
        name, NS, {"spec": spec}, _content_type="application/strategic-merge-patch+json"
    )


async def test_a_containers_resources_are_resized_and_other_changes_dropped(
    core: client.CoreV1Api,
) -> None:
    await core.create_namespaced_pod(NS, _pod("p"))
    out = await _resize(
        core,
        "p",
        {"containers": [{"name": "main", "resources": _res("2"), "image": "busybox:9"}]},
    )
    c = out.spec.containers[0]
    assert c.resources.requests["cpu"] == "2"
    assert c.image == "busybox:1.36"


async def test_a_sidecars_resources_are_resized(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod(NS, _pod("p", initContainers=[_init("side", True)]))
    out = await _resize(core, "p", {"initContainers": [{"name": "side", "resources": _res("3")}]})
    assert out.spec.init_containers[0].resources.requests["cpu"] == "3"


async def test_the_pod_level_resources_are_resized(core: client.CoreV1Api) -> None:
    await core.create_namespaced_pod(NS, _pod("p", resources=_res("2")))
    out = await _resize(core, "p", {"resources": _res("4")})
    assert out.spec.resources.requests["cpu"] == "4"


@pytest.mark.parametrize(
    ("spec", "change", "said"),
    [
        (
            {"initContainers": [_init("setup", False)]},
            {"initContainers": [{"name": "setup", "resources": _res("3")}]},
            "Forbidden: resources for non-sidecar init containers are immutable",
        ),
        (
            {},
            {
                "containers": [
                    {
                        "name": "main",
                        "resources": {
                            "requests": {"cpu": "1", "memory": "64Mi", "nvidia.com/gpu": "1"},
                            "limits": {"cpu": "1", "memory": "64Mi", "nvidia.com/gpu": "1"},
                        },
                    }
                ]
            },
            "Forbidden: only cpu and memory resources are mutable",
        ),
        (
            {},
            {"containers": [{"name": "main", "resources": {"requests": {"cpu": "2"}}}]},
            "Pod QOS Class may not change as a result of resizing",
        ),
    ],
    ids=["plain-init-container", "extended-resource", "qos-class"],
)
async def test_a_resize_the_real_server_refuses_is_refused(
    core: client.CoreV1Api, spec: dict[str, Any], change: dict[str, Any], said: str
) -> None:
    await core.create_namespaced_pod(NS, _pod("p", **spec))
    with pytest.raises(ApiException) as refused:
        await _resize(core, "p", change)
    assert refused.value.status == 422
    assert said in str(refused.value.body)
