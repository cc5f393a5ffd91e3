"""Property-based fuzz of the namespace policy through both of its callers (bounded
examples): the webhook's verdict and the scheduler's translation never crash on any
annotations, agree on allow/deny, and every denial names a field."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from admission.policy import AdmissionContext
from admission.review import parse_review
from admission.validate import validate
from bridge.config import parse_config
from bridge.errors import ConfigError, InvalidInput
from bridge.models import JobSpec
from bridge.translate import TranslateSettings, Waiting, translate_group
from bridge.translate.policy import resolve_policy
from bridge.wellknown import SLURMJOB_KEYS, slurmjob_annotation
from tests.admission_helpers import make_review
from tests.security.test_namespace_policy import CFG, plain_pod, scheduler

KEYS = st.sampled_from([slurmjob_annotation(k) for k in SLURMJOB_KEYS])
VALUES = st.one_of(
    st.sampled_from(["0", "1", "a", "shared", "cpu", "normal", "maint", "root", "-1", ""]),
    st.text(max_size=12),
)
NAMESPACES = st.sampled_from(["team-a", "team-b", "trusted", "open"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ns=NAMESPACES, annotations=st.dictionaries(KEYS, VALUES, max_size=4))
@example(ns="team-a", annotations={slurmjob_annotation("min-nodes"): "2"})  # a lone pod's bound
def test_the_webhook_and_the_scheduler_agree_and_every_denial_names_a_field(
    ns: str, annotations: dict[str, str]
) -> None:
    review = parse_review(make_review(plain_pod(ns, annotations)))
    answer: dict[str, Any] = validate(review, AdmissionContext(CFG, {})).to_review()["response"]
    if not answer["allowed"]:
        causes = answer["status"]["details"]["causes"]
        assert causes
        assert all(c["field"] for c in causes)
    refused = _scheduler_refusal(ns, annotations)
    if refused is not None:
        assert refused.field
        assert not answer["allowed"], f"the scheduler refused what the webhook let in: {refused}"
    else:
        assert answer["allowed"], "the webhook denied what the scheduler would submit"


def _scheduler_refusal(ns: str, annotations: dict[str, str]) -> InvalidInput | None:
    try:
        result = scheduler(CFG, ns, annotations)
    except InvalidInput as e:
        return e
    assert not isinstance(result, Waiting)
    return None


NAMES = st.sampled_from(["a", "b", "c"])
LISTS = st.lists(NAMES, max_size=2, unique=True)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    accounts=LISTS,
    default_account=st.none() | NAMES,
    qos=LISTS,
    default_qos=st.none() | NAMES,
    allow_priority=st.booleans(),
    annotations=st.dictionaries(
        st.sampled_from([slurmjob_annotation("account"), slurmjob_annotation("qos")]),
        NAMES,
        max_size=2,
    ),
    class_priority=st.none() | st.integers(0, 2_000_000_000),
)
def test_a_policy_that_loads_bounds_every_job_to_its_lists_and_its_priority_rule(
    accounts: list[str],
    default_account: str | None,
    qos: list[str],
    default_qos: str | None,
    allow_priority: bool,
    annotations: dict[str, str],
    class_priority: int | None,
) -> None:
    """Issue 30, findings 4 and 6, as a property: whatever lists and defaults a policy has,
    either the config is refused when it loads, or every job of the namespace carries an
    account and a QOS from the lists (never Slurm's default, which the lists do not bound),
    and a PriorityClass's value only where pods may choose their priority."""
    policy: dict[str, Any] = {
        "namespaces": ["t"],
        "accounts": accounts,
        "qos": qos,
        "allowPodPriority": allow_priority,
    }
    if default_account is not None:
        policy["defaultAccount"] = default_account
    if default_qos is not None:
        policy["defaultQos"] = default_qos
    refused: ConfigError | None = None
    try:
        cfg = parse_config(
            {
                "managedNamespaces": ["t"],
                "scheduler": {"priorityFromPriorityClass": True},
                "namespacePolicies": [policy],
            },
            env={},
        )
    except ConfigError as e:
        refused = e
    if refused is not None:
        assert refused.key.startswith("namespacePolicies.0.default")
        return
    pod = plain_pod("t", annotations)
    if class_priority is not None:
        pod["spec"]["priority"] = class_priority
    try:
        spec = translate_group(
            [pod], None, [], TranslateSettings.from_config(cfg), policy=resolve_policy(cfg, "t", {})
        )
    except InvalidInput as e:
        denied: InvalidInput | None = e
    else:
        denied = None
    if denied is not None:
        assert denied.field in annotations  # only a value the pod named is refused
        return
    assert isinstance(spec, JobSpec)
    if accounts:
        assert spec.account in accounts
    if qos:
        assert spec.qos in qos
    assert spec.priority == (class_priority if allow_priority else None)
