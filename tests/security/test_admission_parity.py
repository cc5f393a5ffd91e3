"""Parity with upstream's admission (issue 30): a bound managed pod's in-place resize
(``pods/resize``) and ``spec.topologySpreadConstraints`` are refused, naming the field.

End to end: real Slurm, the sandbox API server with the webhook configurations ``helm
template`` renders from the chart (so the chart must register ``pods/resize``: a rule for
``pods`` matches no subresource), the real admission server over TLS, and the scheduler.
The API server sends the resize as an UPDATE with ``subResource: resize``, as
kube-apiserver 1.33+ does. Before, the resize was admitted: the pod asked for more CPU
than its Slurm job holds. Plus the verdicts as pure functions, for every shape.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client import models as k8s_models

from admission.policy import AdmissionContext
from admission.review import parse_review
from admission.validate import validate
from bridge.config import parse_config
from bridge.errors import KubeError
from bridge.kube.resources import PODS
from tests.admission_helpers import make_pod, make_review
from tests.integration.bridge_harness import NS, pod
from tests.integration.conftest import SlurmSandbox
from tests.integration.test_admission_down_e2e import VALIDATE, bridge_behind_chart_webhooks

CFG = parse_config({"managedNamespaces": ["slurm-bridge"]}, env={})
SPREAD = [
    {
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "x"}},
    }
]


def _resize_review(old: dict[str, Any], cpu: str) -> dict[str, Any]:
    new = copy.deepcopy(old)
    new["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
    review = make_review(new, operation="UPDATE", old=old)
    review["request"]["subResource"] = "resize"
    return review


def _verdict(review: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = validate(parse_review(review), AdmissionContext(CFG, {})).to_review()
    return dict(out["response"])


def test_a_bound_pods_resize_is_refused_naming_the_container() -> None:
    old = make_pod(scheduler="slurm-bridge-scheduler", node="slurm-1")
    answer = _verdict(_resize_review(old, "4"))
    assert answer["allowed"] is False
    assert "spec.containers[0].resources" in answer["status"]["message"]
    assert "resized in place" in answer["status"]["message"]


def test_an_unbound_pods_resize_is_admitted_its_pending_job_follows() -> None:
    old = make_pod(scheduler="slurm-bridge-scheduler")
    assert _verdict(_resize_review(old, "4"))["allowed"] is True


def test_an_unmanaged_pods_resize_is_none_of_our_business() -> None:
    old = make_pod(namespace="elsewhere", node="n1")
    assert _verdict(_resize_review(old, "4"))["allowed"] is True


def _resource_paths(cls: Any, path: tuple[str, ...], seen: frozenset[str]) -> list[Any]:
    """Every path of the Pod type to a ``V1ResourceRequirements`` (what a pod holds: its
    containers', init and sidecar containers', ephemeral containers' and the pod-level
    ``resources``), from kubernetes_asyncio's model of the API: a field a later Kubernetes
    adds shows up here, and the test below then resizes it too. Each step is the JSON name,
    suffixed ``[]`` for a list of named objects."""
    out: list[Any] = []
    for attr, typ in cls.openapi_types.items():
        name = cls.attribute_map[attr]
        inner = typ[5:-1] if typ.startswith("list[") else typ
        step = (*path, name + ("[]" if inner != typ else ""))
        if inner == "V1ResourceRequirements":
            out.append(step)
        elif inner.startswith("V1") and inner not in seen and hasattr(k8s_models, inner):
            out += _resource_paths(getattr(k8s_models, inner), step, seen | {inner})
    return out


RESOURCE_PATHS = _resource_paths(k8s_models.V1PodSpec, ("spec",), frozenset({"V1PodSpec"}))


def _holding(path: tuple[str, ...], cpu: str, extra: dict[str, Any]) -> dict[str, Any]:
    """A bound managed pod with ``cpu`` at ``path`` (each list: one object named ``x``,
    with ``extra`` fields: ``restartPolicy: Always`` makes an init container a sidecar)."""
    pod = make_pod(scheduler="slurm-bridge-scheduler", node="slurm-1")
    cur: dict[str, Any] = pod
    for step in path[:-1]:
        name = step.removesuffix("[]")
        if step.endswith("[]"):
            items = cur.setdefault(name, [])
            if not items:
                items.append({"name": "x", "image": "busybox", **extra})
            cur = items[0]
        else:
            cur = cur.setdefault(name, {})
    cur[path[-1]] = {"requests": {"cpu": cpu, "memory": "1Gi"}}
    return pod


def test_the_pod_type_has_the_resizable_fields_this_test_knows_at_least() -> None:
    names = {".".join(p) for p in RESOURCE_PATHS}
    assert {
        "spec.resources",
        "spec.containers[].resources",
        "spec.initContainers[].resources",
    } <= names


@pytest.mark.parametrize("extra", [{}, {"restartPolicy": "Always"}], ids=["init", "sidecar"])
@pytest.mark.parametrize("path", RESOURCE_PATHS, ids=lambda p: ".".join(p))
def test_every_resize_of_what_a_bound_pod_holds_is_refused_naming_the_field(
    path: tuple[str, ...], extra: dict[str, Any]
) -> None:
    old = _holding(path, "1", extra)
    new = _holding(path, "64", extra)
    review = make_review(new, operation="UPDATE", old=old)
    review["request"]["subResource"] = "resize"
    answer = _verdict(review)
    assert answer["allowed"] is False, path
    field = ".".join(path).replace("[]", "[0]")
    assert field in answer["status"]["message"]
    assert "resized in place" in answer["status"]["message"]


def test_a_resize_that_changes_only_how_a_container_is_resized_is_admitted() -> None:
    old = make_pod(scheduler="slurm-bridge-scheduler", node="slurm-1")
    new = copy.deepcopy(old)
    new["spec"]["containers"][0]["resizePolicy"] = [
        {"resourceName": "cpu", "restartPolicy": "RestartContainer"}
    ]
    review = make_review(new, operation="UPDATE", old=old)
    review["request"]["subResource"] = "resize"
    assert _verdict(review)["allowed"] is True


def test_topology_spread_constraints_are_refused_on_create_naming_the_field() -> None:
    new = make_pod(scheduler="slurm-bridge-scheduler")
    new["spec"]["topologySpreadConstraints"] = SPREAD
    answer = _verdict(make_review(new))
    assert answer["allowed"] is False
    assert "spec.topologySpreadConstraints" in answer["status"]["message"]
    # a pod admitted before the rule can still be updated (its finalizer removed)
    old = copy.deepcopy(new)
    new["metadata"]["finalizers"] = []
    assert _verdict(make_review(new, operation="UPDATE", old=old))["allowed"] is True


@pytest.mark.slurm
@pytest.mark.e2e
async def test_through_the_chart_webhooks_a_bound_pod_cannot_be_resized_nor_spread(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    async with bridge_behind_chart_webhooks(sandbox, tmp_path) as (b, _):
        try:
            await b.create_pod("bound", cpu="1")
            await b.bound("bound")
            resize = {"spec": {"containers": [{"name": "main", "resources": {
                "requests": {"cpu": "2", "memory": "100Mi"},
            }}]}}  # fmt: skip
            with pytest.raises(KubeError) as refused:
                await b.kube.patch(
                    PODS, "bound", resize, namespace=NS, patch_type="strategic",
                    subresource="resize",
                )  # fmt: skip
            said = str(refused.value)
            assert f'admission webhook "{VALIDATE}" denied the request' in said
            assert "spec.containers[0].resources" in said
            cpu = (await b.get_pod("bound"))["spec"]["containers"][0]["resources"]["requests"]
            assert cpu["cpu"] == "1"

            # a sidecar's and the pod-level resources, which the 1.36 server resizes too
            held = {"requests": {"cpu": "1", "memory": "100Mi"}}
            side = pod("side")
            side["spec"]["resources"] = held
            side["spec"]["initContainers"] = [{
                "name": "proxy", "image": "registry.k8s.io/pause:3.10",
                "restartPolicy": "Always", "resources": held,
            }]  # fmt: skip
            await b.kube.create(PODS, side, NS)
            await b.bound("side")
            grown = {"requests": {"cpu": "64", "memory": "256Gi"}}
            for change, field in (
                ({"initContainers": [{"name": "proxy", "resources": grown}]},
                 "spec.initContainers[0].resources"),
                ({"resources": grown}, "spec.resources"),
            ):  # fmt: skip
                with pytest.raises(KubeError) as refused:
                    await b.kube.patch(
                        PODS, "side", {"spec": change}, namespace=NS,
                        patch_type="strategic", subresource="resize",
                    )  # fmt: skip
                assert field in str(refused.value)
            assert (await b.get_pod("side"))["spec"]["resources"] == held

            # an unbound (gated) pod's resize is admitted: its job is made from the new size
            gated = pod("gated", cpu="1")
            gated["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]
            await b.kube.create(PODS, gated, NS)
            await b.kube.patch(
                PODS, "gated", resize, namespace=NS, patch_type="strategic", subresource="resize"
            )
            got = (await b.get_pod("gated"))["spec"]["containers"][0]["resources"]["requests"]
            assert got["cpu"] == "2"

            spread = pod("spread")
            spread["spec"]["topologySpreadConstraints"] = SPREAD
            with pytest.raises(KubeError) as no_spread:
                await b.kube.create(PODS, spread, NS)
            assert "spec.topologySpreadConstraints" in str(no_spread.value)
        finally:
            await b.cancel_jobs()
