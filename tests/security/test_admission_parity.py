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
