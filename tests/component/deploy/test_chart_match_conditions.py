"""The validating webhooks' matchCondition, rendered by helm and evaluated with CEL.

A stopped webhook (failurePolicy Fail) must never block the bridge's own writes nor
Kubernetes' controllers, and must still refuse every new pod and every user's update. The
condition decides which requests reach the webhook at all; these tests evaluate the rendered
expression against AdmissionRequests of each kind of caller.
"""

from __future__ import annotations

from typing import Any

import pytest
from chart_helpers import NAMESPACE, Helm, Rendered

from bridge.cel import compile_expression

SCHEDULER = f"system:serviceaccount:{NAMESPACE}:sb-slurm-bridge-scheduler"
CONTROLLER = f"system:serviceaccount:{NAMESPACE}:sb-slurm-bridge-controller"
GC = "system:serviceaccount:kube-system:generic-garbage-collector"
NAMESPACE_CONTROLLER = "system:serviceaccount:kube-system:namespace-controller"
JOB_CONTROLLER = "system:serviceaccount:kube-system:job-controller"
# kube-controller-manager without --use-service-account-credentials
KCM = "system:kube-controller-manager"
NODE = "system:node:node-1"
USER = "alice"


GUARD = "pods-placement.validate.slurm-bridge.slinky.slurm.net"
DS_CONTROLLER = "system:serviceaccount:kube-system:daemon-set-controller"


def conditions(rendered: Rendered) -> list[tuple[str, str]]:
    """(webhook name, expression) of every validating webhook but the Slurm-node guard."""
    (validating,) = rendered.of_kind("ValidatingWebhookConfiguration")
    out = []
    for wh in validating["webhooks"]:
        if wh["name"] == GUARD:
            continue
        (mc,) = wh["matchConditions"]
        out.append((wh["name"], mc["expression"]))
    return out


def called(
    expression: str,
    operation: str,
    username: str,
    obj: dict[str, Any] | None = None,
    old: dict[str, Any] | None = None,
) -> bool:
    request: dict[str, Any] = {
        "operation": operation,
        "userInfo": {"username": username, "groups": ["system:authenticated"]},
    }
    return compile_expression(expression).evaluate_bool(
        {"request": request, "object": obj or {}, "oldObject": old or {}}
    )


def guard_called(
    rendered: Rendered,
    operation: str,
    username: str,
    tolerations: Any = None,
    old_tolerations: Any = None,
) -> bool:
    """Do all the Slurm-node guard's matchConditions hold for this request?"""
    (validating,) = rendered.of_kind("ValidatingWebhookConfiguration")
    (guard,) = [wh for wh in validating["webhooks"] if wh["name"] == GUARD]

    def pod(tols: Any) -> dict[str, Any]:
        return {"spec": {} if tols is None else {"tolerations": tols}}

    return all(
        called(mc["expression"], operation, username, pod(tolerations), pod(old_tolerations))
        for mc in guard["matchConditions"]
    )


@pytest.mark.parametrize(
    ("operation", "username", "expected"),
    [
        ("CREATE", USER, True),
        ("CREATE", JOB_CONTROLLER, True),
        ("CREATE", SCHEDULER, True),
        ("UPDATE", USER, True),
        ("UPDATE", "system:serviceaccount:team-a:default", True),
        ("UPDATE", SCHEDULER, False),
        ("UPDATE", CONTROLLER, False),
        ("UPDATE", GC, False),
        ("UPDATE", NAMESPACE_CONTROLLER, False),
        ("UPDATE", JOB_CONTROLLER, False),
        ("UPDATE", KCM, False),
        ("UPDATE", NODE, False),
    ],
)
def test_only_trusted_writers_updates_skip_the_validating_webhooks(
    helm: Helm, operation: str, username: str, expected: bool
) -> None:
    for name, expression in conditions(helm.render()):
        assert called(expression, operation, username) is expected, (name, operation, username)


def test_the_bridge_usernames_in_the_config_are_the_chart_service_accounts(helm: Helm) -> None:
    rendered = helm.render()
    cm = rendered.config_text()
    assert SCHEDULER in cm
    assert CONTROLLER in cm


def test_trusted_usernames_and_kube_system_trust_are_configurable(helm: Helm) -> None:
    jobset = "system:serviceaccount:jobset-system:jobset-controller-manager"
    rendered = helm.render(
        sets=(f"admission.trustedUsernames[0]={jobset}", "admission.trustKubeSystem=false")
    )
    for _, expression in conditions(rendered):
        assert not called(expression, "UPDATE", jobset)
        assert called(expression, "UPDATE", GC)
        assert called(expression, "UPDATE", KCM)
        assert not called(expression, "UPDATE", SCHEDULER)


def test_a_custom_bridge_username_is_trusted_and_used_by_the_webhook(helm: Helm) -> None:
    custom = "system:serviceaccount:ops:bridge-sched"
    rendered = helm.render(sets=(f"config.admission.bridgeUsernames[0]={custom}",))
    assert custom in rendered.config_text()
    for _, expression in conditions(rendered):
        assert not called(expression, "UPDATE", custom)


TOL = [{"key": "slinky.slurm.net/managed-node", "operator": "Exists"}]


@pytest.mark.parametrize(
    ("operation", "username", "tolerations", "old", "expected"),
    [
        ("CREATE", USER, None, None, True),
        ("CREATE", JOB_CONTROLLER, None, None, True),  # a Job's pods: checked
        ("CREATE", SCHEDULER, None, None, True),
        ("CREATE", DS_CONTROLLER, TOL, None, False),  # exempt creator
        ("CREATE", NODE, None, None, False),  # a mirror pod (NodeRestriction)
        ("UPDATE", USER, TOL, None, True),  # a toleration added
        ("UPDATE", USER, TOL, [], True),
        ("UPDATE", USER, None, None, False),  # tolerations unchanged: never waits
        ("UPDATE", USER, TOL, TOL, False),
        ("UPDATE", USER, None, TOL, True),  # removed: checked (and allowed) by the webhook
    ],
)
def test_the_slurm_node_guard_sees_every_create_and_only_updates_of_tolerations(
    helm: Helm,
    operation: str,
    username: str,
    tolerations: Any,
    old: Any,
    expected: bool,
) -> None:
    assert guard_called(helm.render(), operation, username, tolerations, old) is expected


def test_the_guards_exempt_usernames_are_configurable(helm: Helm) -> None:
    agent = "system:serviceaccount:ops:agent"
    rendered = helm.render(sets=(f"config.admission.nodeGuardExemptUsernames[0]={agent}",))
    assert not guard_called(rendered, "CREATE", agent)
    assert guard_called(rendered, "CREATE", DS_CONTROLLER)
    off = helm.render(sets=("config.admission.nodeGuard=false",))
    (validating,) = off.of_kind("ValidatingWebhookConfiguration")
    assert GUARD not in [wh["name"] for wh in validating["webhooks"]]
