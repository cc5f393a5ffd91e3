"""Pure claims plan table: which claims a finished pod of the bridge gives back."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.wellknown import LABEL_JOB_ID
from controller import claims
from controller.model import Action, DeleteClaim, ReleaseClaim


def pod(
    phase: str = "Running",
    *,
    uid: str = "u1",
    deleting: bool = False,
    node: str = "n1",
    bridge: bool = True,
    spec_claims: list[dict[str, Any]] | None = None,
    statuses: list[dict[str, Any]] | None = None,
    extended: str | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"namespace": "ns", "name": "p", "uid": uid, "labels": {}}
    if bridge:
        meta["labels"][LABEL_JOB_ID] = "7"
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T11:00:00Z"
    status: dict[str, Any] = {"phase": phase}
    if statuses is not None:
        status["resourceClaimStatuses"] = statuses
    if extended:
        status["extendedResourceClaimStatus"] = {"resourceClaimName": extended}
    spec: dict[str, Any] = {"nodeName": node, "resourceClaims": spec_claims or []}
    return {"metadata": meta, "spec": spec, "status": status}


TEMPLATE = {
    "spec_claims": [{"name": "gpu", "resourceClaimTemplateName": "t"}],
    "statuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x"}],
}
ALL = {
    "spec_claims": [
        {"name": "gpu", "resourceClaimTemplateName": "t"},
        {"name": "shared", "resourceClaimName": "shared"},
    ],
    "statuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x"}, {"name": "none"}],
    "extended": "p-extended-resources-abc",
}
RELEASE_ALL = [
    ReleaseClaim("ns", "p-extended-resources-abc", "u1"),
    ReleaseClaim("ns", "p-gpu-x", "u1"),
    ReleaseClaim("ns", "shared", "u1"),
    DeleteClaim("ns", "p-extended-resources-abc", "u1"),
]


@pytest.mark.parametrize(
    ("pods_", "deleted", "released", "expected"),
    [
        pytest.param([pod(**ALL)], [], set(), [], id="running-pod-keeps-its-claims"),
        pytest.param(
            [pod("Succeeded", **ALL)],
            [],
            set(),
            RELEASE_ALL,
            id="succeeded-pod-releases-every-claim-and-deletes-its-extended-claim",
        ),
        pytest.param(
            [pod("Failed", **TEMPLATE)],
            [],
            set(),
            [ReleaseClaim("ns", "p-gpu-x", "u1")],
            id="failed-pod-releases-its-template-claim-which-kcm-owns",
        ),
        pytest.param(
            [pod(deleting=True, **ALL)],
            [],
            set(),
            [],
            id="terminating-bound-pod-may-still-run-keeps-its-claims",
        ),
        pytest.param(
            [pod(deleting=True, node="", **ALL)],
            [],
            set(),
            RELEASE_ALL,
            id="deleting-unbound-pod-releases",
        ),
        pytest.param([], [pod(**ALL)], set(), RELEASE_ALL, id="deleted-pod-releases"),
        pytest.param(
            [pod("Succeeded", **ALL)], [], {"u1"}, [], id="already-released-pod-is-not-redone"
        ),
        pytest.param(
            [pod("Succeeded", bridge=False, **ALL)],
            [pod(bridge=False, **ALL)],
            set(),
            [],
            id="pod-without-the-bridges-job-label-is-never-touched",
        ),
        pytest.param([pod("Succeeded")], [], set(), [], id="pod-without-claims-has-nothing"),
        pytest.param(
            [pod("Succeeded", spec_claims=[{"name": "gpu", "resourceClaimTemplateName": "t"}])],
            [],
            set(),
            [],
            id="template-claim-not-created-yet-has-nothing-to-release",
        ),
    ],
)
def test_claims_plan(
    pods_: list[dict[str, Any]],
    deleted: list[dict[str, Any]],
    released: set[str],
    expected: list[Action],
) -> None:
    assert claims.plan(pods_, deleted, released) == expected
