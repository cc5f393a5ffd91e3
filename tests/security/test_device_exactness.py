"""Device exactness (issue 39, first row): a tenant's ``gres`` annotation never replaces or
lowers what the pod's claims and resources need, at admission and in translation; the
bind-time half (a claim is given only what Slurm gave its own job) is in
tests/unit/translate/test_dra.py and, against real Slurm, tests/integration/test_dra_e2e.py."""

from __future__ import annotations

from typing import Any

import pytest

from admission.policy import AdmissionContext
from admission.review import parse_review
from admission.validate import validate
from bridge import wellknown
from bridge.config import parse_config
from bridge.errors import InvalidInput
from bridge.translate.dra import DraInputs
from bridge.translate.job import translate_group
from bridge.translate.settings import TranslateSettings
from tests.admission_helpers import make_pod, make_review

GRES = wellknown.slurmjob_annotation("gres")
EXCL = wellknown.slurmjob_annotation("exclusive")
# gres opened (a policed key, closed by default: tests/security/test_annotation_policy.py):
# the floor applies where an admin lets pods set it
CTX = AdmissionContext(
    parse_config(
        {
            "managedNamespaces": ["slurm-bridge"],
            "defaultNamespacePolicy": {"allowPodKeys": ["gres"]},
        },
        env={},
    ),
    {},
)
TWO_GPUS = {
    "spec": {
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpus",
                        "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2},
                    }
                ]
            }
        }
    }
}
INPUTS = DraInputs(templates={"two-gpus": TWO_GPUS}, device_class_gres={"gpu.nvidia.com": "gpu"})


def pod(
    annotations: dict[str, str],
    *,
    claims: bool = False,
    resources: dict[str, str] | None = None,
    name: str = "web-0",
) -> dict[str, Any]:
    p = make_pod(annotations=annotations, name=name)
    p["metadata"]["uid"] = f"uid-{name}"
    if claims:
        p["spec"]["resourceClaims"] = [{"name": "g", "resourceClaimTemplateName": "two-gpus"}]
    if resources:
        p["spec"]["containers"][0]["resources"] = {"requests": resources, "limits": resources}
    return p


def admitted(obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    review = make_review(obj, operation="UPDATE" if old else "CREATE", old=old)
    resp: dict[str, Any] = validate(parse_review(review), CTX).to_review()["response"]
    return resp


@pytest.mark.parametrize(
    ("p", "words"),
    [
        pytest.param(pod({GRES: "gpu:0"}, claims=True), ["spec.resourceClaims"], id="claims-gpu0"),
        pytest.param(pod({GRES: "gpu:4"}, claims=True), ["spec.resourceClaims"], id="claims-any"),
        pytest.param(
            pod({GRES: "gpu:1"}, resources={"nvidia.com/gpu": "2"}),
            ["spec.containers[*].resources", "gpu:2 per node"],
            id="resources-lowered",
        ),
        pytest.param(
            pod({GRES: "shard:1"}, resources={"nvidia.com/gpu": "1"}),
            ["spec.containers[*].resources", "gpu:1 per node"],
            id="resources-replaced",
        ),
        pytest.param(
            pod({GRES: "gpu:a100:1"}, resources={"nvidia.com/gpu": "1"}),
            ["gpu:1 per node"],
            id="other-type",
        ),
        pytest.param(
            pod(
                {GRES: "gpu:1"},
                resources={"deviceclass.resource.kubernetes.io/gpu.nvidia.com": "1"},
            ),
            ["spec.containers[0].resources.requests[deviceclass.resource.kubernetes.io/"],
            id="dra-extended-resource",
        ),
    ],
)
def test_a_gres_annotation_lowering_the_pods_needs_is_refused_at_admission_naming_both(
    p: dict[str, Any], words: list[str]
) -> None:
    resp = admitted(p)
    assert resp["allowed"] is False
    assert resp["status"]["details"]["causes"][0]["field"] == f"metadata.annotations[{GRES}]"
    for w in words:
        assert w in resp["status"]["message"], resp["status"]["message"]


@pytest.mark.parametrize(
    "p",
    [
        pod({GRES: "gpu:2,gres/shard:1"}, resources={"nvidia.com/gpu": "2"}),
        pod({GRES: "gpu:3"}, resources={"nvidia.com/gpu": "2"}),
        pod({GRES: "shard:1"}),
    ],
    ids=["names-them-and-adds", "raises", "adds-to-nothing"],
)
def test_a_gres_annotation_that_adds_is_admitted(p: dict[str, Any]) -> None:
    assert admitted(p)["allowed"] is True


def test_an_unchanged_gres_annotation_is_not_checked_again_on_update() -> None:
    old = pod({GRES: "gpu:0"}, claims=True)  # admitted before this rule
    new = pod({GRES: "gpu:0"}, claims=True)
    new["metadata"]["labels"] = {"x": "y"}
    assert admitted(new, old)["allowed"] is True


@pytest.mark.parametrize(
    ("pods", "gres", "exclusive"),
    [
        pytest.param([pod({}, claims=True)], "gpu:0", None, id="claim-lowered-to-0"),
        pytest.param([pod({}, claims=True)], "gpu:1", None, id="claim-lowered-to-1"),
        pytest.param([pod({}, claims=True)], "shard:1", None, id="claim-replaced"),
        pytest.param(
            [pod({}, claims=True, name=f"w-{i}") for i in range(2)],
            "gpu:2",
            "false",
            id="shared-pods-on-one-node",
        ),
    ],
)
def test_translation_refuses_a_gres_annotation_below_what_claims_need(
    pods: list[dict[str, Any]], gres: str, exclusive: str | None
) -> None:
    group = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "slurm-bridge", "uid": "pg", "annotations": {}},
        "spec": {"minMember": len(pods)},
    }
    group["metadata"]["annotations"][GRES] = gres
    if exclusive is not None:
        group["metadata"]["annotations"][EXCL] = exclusive
    for p in pods:
        p["metadata"]["labels"] = {"scheduling.x-k8s.io/pod-group": "g"}
    with pytest.raises(InvalidInput) as e:
        translate_group(pods, group, [], TranslateSettings(), dra=INPUTS)
    assert e.value.field == GRES
    assert "spec.resourceClaims" in str(e.value)


def test_translation_keeps_a_gres_annotation_that_covers_the_claims() -> None:
    spec = translate_group(
        [pod({GRES: "gpu:2,shard:1"}, claims=True)], None, [], TranslateSettings(), dra=INPUTS
    )
    assert spec.tres_per_node == "gres/gpu:2,gres/shard:1"  # type: ignore[union-attr]
