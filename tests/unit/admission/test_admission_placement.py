"""The Slurm-node guard (issue 39, deliverable 5): no pod, whatever its scheduler and
namespace, is created on a Slurm node or tolerates the managed-node taint unless it is the
bridge's, a DaemonSet controller's, a node's mirror pod, or in an exempt namespace.

Before, a pod naming any other scheduler passed both webhooks untouched with ``nodeName``
of a managed node and a toleration of the managed-node taint: it ran on a Slurm node
outside any allocation."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from admission.placement import slurm_node_reason, validate_placement
from admission.policy import AdmissionContext
from admission.review import parse_review
from bridge import wellknown
from bridge.config import parse_config
from tests.admission_helpers import make_pod, make_review

CFG = parse_config({"managedNamespaces": ["slurm-bridge"]}, env={})
DS = "system:serviceaccount:kube-system:daemon-set-controller"
TAINT = wellknown.MANAGED_NODE_TAINT
OURS = {"key": TAINT, "operator": "Equal", "value": "slurm-bridge-scheduler", "effect": "NoExecute"}
ALL = {"operator": "Exists"}  # tolerates every taint, ours too
SLURM_NODES = {"slurm-1": f"it carries the taint {TAINT}", "plain-1": ""}


def verdict(
    pod: dict[str, Any],
    *,
    user: str = "alice",
    old: dict[str, Any] | None = None,
    cfg: Any = CFG,
    nodes: dict[str, str] | None = None,
) -> dict[str, Any]:
    review = make_review(pod, operation="UPDATE" if old else "CREATE", old=old, user=user)
    ctx = AdmissionContext(cfg, slurm_nodes=SLURM_NODES if nodes is None else nodes)
    out: dict[str, Any] = validate_placement(parse_review(review), ctx).to_review()
    return dict(out["response"])


def refused(answer: dict[str, Any], field: str) -> bool:
    return answer["allowed"] is False and field in answer["status"]["message"]


@pytest.mark.parametrize("ns", ["slurm-bridge", "elsewhere"])
@pytest.mark.parametrize("scheduler", ["default-scheduler", "other-scheduler", None])
def test_a_pod_created_naming_a_slurm_node_is_refused_whatever_its_scheduler(
    ns: str, scheduler: str | None
) -> None:
    answer = verdict(make_pod(namespace=ns, scheduler=scheduler, node="slurm-1"))
    assert refused(answer, "spec.nodeName")
    assert "'slurm-1' is a Slurm node (it carries the taint" in answer["status"]["message"]


def test_a_pod_of_the_bridges_scheduler_created_with_node_name_is_refused_too() -> None:
    # the bridge binds (pods/binding): a pod created with nodeName is never its placement
    answer = verdict(make_pod(scheduler="slurm-bridge-scheduler", node="slurm-1"))
    assert refused(answer, "spec.nodeName")


@pytest.mark.parametrize(
    "tol", [OURS, ALL, {"key": TAINT, "operator": "Exists"}, {"key": TAINT, "value": OURS["value"]}]
)
def test_a_pod_of_another_scheduler_tolerating_the_managed_taint_is_refused(
    tol: dict[str, Any],
) -> None:
    answer = verdict(make_pod(namespace="elsewhere", scheduler="other", tolerations=[tol]))
    assert refused(answer, "spec.tolerations[0]")
    assert TAINT in answer["status"]["message"]


def test_the_issues_attack_both_fields_are_named() -> None:
    pod = make_pod(namespace="team-b", scheduler="my-scheduler", node="slurm-1", tolerations=[OURS])
    answer = verdict(pod)
    assert refused(answer, "spec.nodeName")
    assert refused(answer, "spec.tolerations[0]")


def test_a_toleration_added_by_an_update_is_refused() -> None:
    old = make_pod(namespace="elsewhere", scheduler="default-scheduler")
    new = copy.deepcopy(old)
    new["spec"]["tolerations"] = [OURS]
    assert refused(verdict(new, old=old), "spec.tolerations[0]")
    # an update that leaves the tolerations alone (a pod admitted before) passes
    assert verdict(new, old=copy.deepcopy(new))["allowed"] is True


@pytest.mark.parametrize(
    "tol",
    [
        {"key": TAINT, "operator": "Exists", "effect": "NoSchedule"},  # not our effect
        {"key": "other", "operator": "Exists"},
        # another bridge's (its scheduler name): its own guard's business
        {"key": TAINT, "operator": "Equal", "value": "other-bridge", "effect": "NoExecute"},
        {"operator": "Exists", "effect": "NoSchedule"},
    ],
)
def test_tolerations_that_do_not_tolerate_the_managed_taint_pass(tol: dict[str, Any]) -> None:
    assert verdict(make_pod(namespace="elsewhere", tolerations=[tol]))["allowed"] is True


def test_the_bridges_own_pods_keep_their_toleration() -> None:
    pod = make_pod(scheduler="slurm-bridge-scheduler", tolerations=[OURS])
    assert verdict(pod)["allowed"] is True


def test_a_pod_on_a_node_that_is_not_slurms_passes() -> None:
    assert verdict(make_pod(namespace="elsewhere", node="plain-1"))["allowed"] is True


def test_a_daemonset_controllers_pod_passes() -> None:
    pod = make_pod(namespace="monitoring", node="slurm-1", tolerations=[ALL])
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "node-exporter", "uid": "u"}
    ]
    assert verdict(pod, user=DS)["allowed"] is True


def test_an_owner_reference_to_a_daemonset_is_tenant_text_and_proves_nothing() -> None:
    pod = make_pod(namespace="team-b", node="slurm-1", tolerations=[ALL])
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "fake", "uid": "u"}
    ]
    answer = verdict(pod, user="system:serviceaccount:team-b:default")
    assert refused(answer, "spec.nodeName")


def test_a_nodes_mirror_pod_on_that_node_passes_on_another_it_does_not() -> None:
    pod = make_pod(namespace="elsewhere", node="slurm-1", tolerations=[ALL])
    assert verdict(pod, user="system:node:slurm-1")["allowed"] is True
    assert refused(verdict(pod, user="system:node:plain-1"), "spec.nodeName")


def test_the_admins_exemptions_pass() -> None:
    cfg = parse_config(
        {
            "admission": {
                "nodeGuardExemptNamespaces": ["ops"],
                "nodeGuardExemptUsernames": ["system:serviceaccount:ops:agent"],
            }
        },
        env={},
    )
    pod = make_pod(namespace="ops", node="slurm-1", tolerations=[ALL])
    assert verdict(pod, cfg=cfg)["allowed"] is True
    other = make_pod(namespace="team-b", node="slurm-1", tolerations=[ALL])
    assert verdict(other, cfg=cfg, user="system:serviceaccount:ops:agent")["allowed"] is True
    # the DaemonSet controller is no longer exempt once the admin's list replaces it
    assert verdict(other, cfg=cfg, user=DS)["allowed"] is False
    # kube-system is exempt by default
    assert verdict(make_pod(namespace="kube-system", node="slurm-1"))["allowed"] is True


def test_the_guard_can_be_turned_off() -> None:
    cfg = parse_config({"admission": {"nodeGuard": False}}, env={})
    pod = make_pod(namespace="team-b", node="slurm-1", tolerations=[ALL])
    assert verdict(pod, cfg=cfg)["allowed"] is True


@pytest.mark.parametrize(
    ("node", "why"),
    [
        ({"spec": {"taints": [{"key": TAINT, "value": "x", "effect": "NoExecute"}]}}, TAINT),
        (
            {"metadata": {"labels": {wellknown.LABEL_EXTERNAL_NODE: "true"}}},
            wellknown.LABEL_EXTERNAL_NODE,
        ),
        (
            {"metadata": {"labels": {wellknown.LABEL_SLURM_NODENAME: "n0"}}},
            wellknown.LABEL_SLURM_NODENAME,
        ),
        ({"metadata": {"labels": {"x": "y"}}, "spec": {"taints": "bad"}}, ""),
        (None, ""),
    ],
)
def test_what_makes_a_node_a_slurm_node(node: dict[str, Any] | None, why: str) -> None:
    got = slurm_node_reason(node)
    assert (why in got) if why else got == ""
