"""The Slurm identity per namespace, as one pure function: table tests of what it denies
(naming the key, the value and the rule), what it fills in, and the webhook's verdict and
the scheduler's translation agreeing on every row."""

from __future__ import annotations

from typing import Any

import pytest

from admission.policy import AdmissionContext
from admission.review import parse_review
from admission.validate import validate
from bridge.config import BridgeConfig, parse_config
from bridge.errors import ConfigError, InvalidInput
from bridge.translate import TranslateSettings, translate_group
from bridge.translate.annotations import parse_slurmjob_annotations
from bridge.translate.policy import enforce_policy, resolve_policy
from bridge.wellknown import slurmjob_annotation
from tests.admission_helpers import make_pod, make_review

TEAM = {
    "namespaces": ["team-a"],
    "user": "alice",
    "group": "team-a",
    "accounts": ["a", "shared"],
    "defaultAccount": "a",
    "partitions": ["cpu", "gpu"],
    "defaultPartition": "cpu",
    "qos": ["normal"],
    "defaultQos": "normal",
    "reservations": ["maint"],
}
BY_LABEL = {"namespaceSelector": {"matchLabels": {"tenant": "b"}}, "user": "bob"}
TRUSTING = {
    "namespaces": ["trusted"],
    "allowPodUserId": True,
    "allowPodGroupId": True,
    "allowPodPriority": True,
}
CFG = parse_config(
    {
        "managedNamespaces": ["team-a", "team-b", "trusted", "open"],
        "namespacePolicies": [TEAM, BY_LABEL, TRUSTING],
    },
    env={},
)


def A(key: str) -> str:
    return slurmjob_annotation(key)


def plain_pod(ns: str, annotations: dict[str, str]) -> dict[str, Any]:
    pod = make_pod(
        namespace=ns, name="p", scheduler="slurm-bridge-scheduler", annotations=annotations
    )
    pod["metadata"]["uid"] = "uid-p"
    return pod


def webhook(
    cfg: BridgeConfig, ns: str, annotations: dict[str, str], labels: dict[str, str] | None = None
) -> dict[str, Any]:
    review = parse_review(make_review(plain_pod(ns, annotations)))
    out: dict[str, Any] = validate(review, AdmissionContext(cfg, labels or {})).to_review()
    return dict(out["response"])


def scheduler(
    cfg: BridgeConfig, ns: str, annotations: dict[str, str], labels: dict[str, str] | None = None
) -> Any:
    return translate_group(
        [plain_pod(ns, annotations)],
        None,
        [],
        TranslateSettings.from_config(cfg),
        policy=resolve_policy(cfg, ns, labels or {}),
    )


DENIED = [
    # (namespace, annotations, key, value quoted, rule)
    ("open", {A("user-id"): "0"}, A("user-id"), "'0'", "defaultNamespacePolicy.allowPodUserId"),
    ("open", {A("group-id"): "0"}, A("group-id"), "'0'", "defaultNamespacePolicy.allowPodGroupId"),
    ("open", {A("priority"): "0"}, A("priority"), "'0'", "defaultNamespacePolicy.allowPodPriority"),
    (
        "team-a",
        {A("user-id"): "root"},
        A("user-id"),
        "'root'",
        "namespacePolicies[0].allowPodUserId",
    ),
    ("team-a", {A("account"): "b"}, A("account"), "'b'", "namespacePolicies[0].accounts"),
    (
        "team-a",
        {A("partition"): "debug"},
        A("partition"),
        "'debug'",
        "namespacePolicies[0].partitions",
    ),
    ("team-a", {A("qos"): "high"}, A("qos"), "'high'", "namespacePolicies[0].qos"),
    (
        "team-a",
        {A("reservation"): "x"},
        A("reservation"),
        "'x'",
        "namespacePolicies[0].reservations",
    ),
]


@pytest.mark.parametrize(("ns", "ann", "key", "value", "rule"), DENIED)
def test_the_webhook_denies_naming_the_key_the_value_and_the_rule(
    ns: str, ann: dict[str, str], key: str, value: str, rule: str
) -> None:
    resp = webhook(CFG, ns, ann)
    assert resp["allowed"] is False
    message = resp["status"]["message"]
    assert key in message
    assert value in message
    assert rule in message


@pytest.mark.parametrize(("ns", "ann", "key", "value", "rule"), DENIED)
def test_the_scheduler_refuses_the_same_pods_before_any_submit(
    ns: str, ann: dict[str, str], key: str, value: str, rule: str
) -> None:
    with pytest.raises(InvalidInput) as e:
        scheduler(CFG, ns, ann)
    assert e.value.field == key
    assert value in e.value.reason
    assert rule in e.value.reason


def test_a_policed_namespace_runs_as_its_user_and_group_with_its_defaults() -> None:
    spec = scheduler(CFG, "team-a", {})
    assert (spec.user_id, spec.group_id) == ("alice", "team-a")
    assert (spec.account, spec.partition, spec.qos) == ("a", "cpu", "normal")


def test_allowed_values_pass_both_the_webhook_and_the_scheduler() -> None:
    ann = {A("account"): "shared", A("partition"): "gpu", A("qos"): "normal"}
    assert webhook(CFG, "team-a", ann)["allowed"] is True
    spec = scheduler(CFG, "team-a", ann)
    assert (spec.account, spec.partition, spec.qos, spec.user_id) == (
        "shared",
        "gpu",
        "normal",
        "alice",
    )


def test_a_namespace_selector_picks_the_policy_from_the_namespaces_labels() -> None:
    spec = scheduler(CFG, "team-b", {}, labels={"tenant": "b"})
    assert spec.user_id == "bob"
    assert AdmissionContext(CFG).needs_namespace_labels("team-b")


def test_a_trusting_policy_lets_pods_choose_their_identity() -> None:
    ann = {A("user-id"): "1234", A("group-id"): "99", A("priority"): "7"}
    assert webhook(CFG, "trusted", ann)["allowed"] is True
    spec = scheduler(CFG, "trusted", ann)
    assert (spec.user_id, spec.group_id, spec.priority) == ("1234", "99", 7)


def test_a_namespace_without_policy_keeps_todays_behaviour_for_the_rest() -> None:
    ann = {A("account"): "anything", A("partition"): "p", A("qos"): "q"}
    assert webhook(CFG, "open", ann)["allowed"] is True
    spec = scheduler(CFG, "open", ann)
    assert (spec.account, spec.partition, spec.qos, spec.user_id) == ("anything", "p", "q", None)


def test_group_object_annotations_are_policed_too() -> None:
    """The identity may not come in through the PodGroup/Job either."""
    opts = parse_slurmjob_annotations({A("user-id"): "0"}, obj="PodGroup open/pg")
    with pytest.raises(InvalidInput, match="allowPodUserId"):
        enforce_policy(
            opts, resolve_policy(CFG, "open", {}), obj="PodGroup open/pg", partition="slurm-bridge"
        )


def test_an_update_that_leaves_the_annotations_alone_is_not_blocked() -> None:
    """A pod admitted before the policy existed can still lose its finalizer."""
    old = plain_pod("open", {A("user-id"): "0"})
    new = plain_pod("open", {A("user-id"): "0"})
    new["metadata"]["finalizers"] = []
    review = parse_review(make_review(new, operation="UPDATE", old=old))
    assert validate(review, AdmissionContext(CFG, {})).allowed


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"namespacePolicies": [{"user": "x"}]}, "namespacePolicies"),
        (
            {
                "namespacePolicies": [
                    {"namespaces": ["a"], "accounts": ["x"], "defaultAccount": "y"}
                ]
            },
            "namespacePolicies.0.defaultAccount",
        ),
        ({"namespacePolicies": [{"namespaces": ["a"], "user": "a b"}]}, "namespacePolicies.0.user"),
        (
            {"namespacePolicies": [{"namespaces": ["a"], "allowPodUid": True}]},
            "namespacePolicies.0.allowPodUid",
        ),
        ({"defaultNamespacePolicy": {"namespaces": ["a"]}}, "defaultNamespacePolicy"),
    ],
)
def test_a_bad_policy_is_a_config_error_naming_the_key(data: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(data, env={})
    assert e.value.key == key
