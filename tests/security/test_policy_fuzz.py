"""Property-based fuzz of the namespace policy through both of its callers (bounded
examples): the webhook's verdict and the scheduler's translation never crash on any
annotations, agree on allow/deny, and every denial names a field."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from admission.policy import AdmissionContext
from admission.review import parse_review
from admission.validate import validate
from bridge.errors import InvalidInput
from bridge.translate import Waiting
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
