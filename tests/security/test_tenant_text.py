"""Issue 30, finding 5: every tenant text that reaches Slurm or a log goes through the same
rules (bridge/text.py): at most 1,024 characters and no control or format characters on
the way to Slurm; clipped, hidden characters escaped, on the way to a log, an event or a
pod condition.

Before: an ownerReference name became the Slurm job name and comment unchecked (a name
with a newline and U+202E, and one of 5,036 characters, were submitted), while the same
text as the ``job-name`` annotation was refused.
"""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from admission.policy import AdmissionContext
from admission.review import parse_review
from admission.validate import validate
from bridge.config import parse_config
from bridge.errors import InvalidInput
from bridge.logging import configure_logging, get_logger
from bridge.models import JobSpec
from bridge.text import TEXT_MAX, clip, text_problem
from bridge.translate import TranslateSettings, Waiting, translate_group
from bridge.translate.identity import parse_admin_comment
from bridge.wellknown import LABEL_POD_GROUP, slurmjob_annotation
from tests.admission_helpers import make_review
from tests.workloads import expand, load_example

FORGED = [
    pytest.param("evil\nJOBID PARTITION\u202egnp.exe", id="newline-and-rtl-override"),
    pytest.param("j" * 5036, id="5036-characters"),
    pytest.param("zero\u200bwidth", id="zero-width-space"),
]
CFG = parse_config({"managedNamespaces": ["slurm-bridge"]}, env={})
S = TranslateSettings.from_config(CFG)


def job_gang(owner_name: str | None = None, owner_uid: str | None = None) -> tuple[list[Any], Any]:
    """An Indexed Job's four pods and the Job; their ownerReferences forged as asked."""
    c = expand(load_example("indexed-job"))
    job = c.find("Job", "slurm-bridge", "indexed-1")
    pods = copy.deepcopy(c.pods)
    for p in pods:
        ref = p["metadata"]["ownerReferences"][0]
        ref["name"] = owner_name if owner_name is not None else ref["name"]
        ref["uid"] = owner_uid if owner_uid is not None else ref["uid"]
    return pods, job


def webhook_denial(pod: dict[str, Any]) -> str:
    review = parse_review(make_review(pod))
    answer: dict[str, Any] = validate(review, AdmissionContext(CFG, {})).to_review()["response"]
    assert answer["allowed"] is False
    return str(answer["status"]["message"])


@pytest.mark.parametrize("name", FORGED)
def test_an_owner_reference_name_reaches_slurm_only_under_the_annotation_rules(name: str) -> None:
    pods, job = job_gang(owner_name=name)
    with pytest.raises(InvalidInput) as e:
        translate_group(pods, job, [], S)
    assert e.value.field == "metadata.ownerReferences.name"
    # the same text as the job-name annotation: refused for the same reason
    annotated, _ = job_gang()
    for p in annotated:
        p["metadata"]["annotations"][slurmjob_annotation("job-name")] = name
    with pytest.raises(InvalidInput) as by_annotation:
        translate_group(annotated, job, [], S)
    assert by_annotation.value.reason.split(" (")[0] == e.value.reason.split(" (")[0]
    # and the webhook says so before the pod exists
    assert "metadata.ownerReferences[0].name" in webhook_denial(pods[0])


def test_an_owner_reference_uid_reaches_the_admin_comment_only_under_the_rules() -> None:
    pods, job = job_gang(owner_uid="u" * (TEXT_MAX + 1))
    with pytest.raises(InvalidInput) as e:
        translate_group(pods, job, [], S)
    # refused first as not the Job's uid (a group's uid is its object's, never the pod's
    # text: bridge.translate.grouping.check_source), so it cannot reach the admin_comment
    assert e.value.field == "metadata.ownerReferences[0].uid"
    assert "metadata.ownerReferences[0].uid" in webhook_denial(pods[0])


def test_an_update_that_leaves_forged_owner_references_alone_is_not_blocked() -> None:
    """A pod admitted before the rule can still lose its finalizer."""
    pods, _ = job_gang(owner_name="evil\n")
    old, new = pods[0], copy.deepcopy(pods[0])
    new["metadata"]["finalizers"] = []
    review = parse_review(make_review(new, operation="UPDATE", old=old))
    assert validate(review, AdmissionContext(CFG, {})).allowed


TENANT_TEXT = st.one_of(
    st.sampled_from(["pg", "a" * TEXT_MAX, "a" * (TEXT_MAX + 1), "x\n", "\u202e", "\x85", "ok"]),
    st.text(max_size=8),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(group=TENANT_TEXT, job_name=st.none() | TENANT_TEXT, owner=TENANT_TEXT)
def test_every_text_a_translated_job_carries_obeys_the_rules(
    group: str, job_name: str | None, owner: str
) -> None:
    """Whatever a tenant writes into a PodGroup label, a job-name annotation or an
    ownerReference, a job that comes out of translation carries only text the rules
    allow: its name, comment, and the group and pods of its admin_comment."""
    c = expand(load_example("podgroup"))
    pods = copy.deepcopy(c.pods[:2])
    pg = copy.deepcopy(c.find("PodGroup", "slurm-bridge", "pg-1"))
    pg["metadata"]["name"] = group
    for p in pods:
        p["metadata"]["labels"][LABEL_POD_GROUP] = group
        p["metadata"]["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "ReplicaSet", "name": owner, "uid": owner}
        ]
        if job_name is not None:
            p["metadata"].setdefault("annotations", {})[slurmjob_annotation("job-name")] = job_name
    try:
        spec = translate_group(pods, pg, [], S)
    except InvalidInput as e:
        refused: InvalidInput | None = e
    else:
        refused = None
    if refused is not None:
        assert refused.field
        return
    if isinstance(spec, Waiting):
        return
    assert isinstance(spec, JobSpec)
    parsed = parse_admin_comment(spec.admin_comment)
    assert parsed is not None
    gid, keys = parsed
    assert gid is not None
    for text in (spec.name, gid.namespace, gid.name, gid.uid, *keys):
        assert text_problem(text) is None, repr(text[:80])
    # the comment is ours around two of them (namespace, name)
    assert text_problem(spec.comment, max_len=2 * TEXT_MAX + 64) is None


@pytest.fixture
def log_lines(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    out = io.StringIO()
    monkeypatch.setattr("sys.stderr", out)
    configure_logging("info", "console")
    try:
        yield out
    finally:
        structlog.reset_defaults()


def test_a_log_line_clips_tenant_text_and_escapes_hidden_characters(
    log_lines: io.StringIO,
) -> None:
    huge = "evil\n\u202e" + "u" * (2 << 20)
    get_logger("test").info("admission_review", uid=huge, error=InvalidInput("f", huge, huge))
    line = log_lines.getvalue()
    assert len(line) < 10_000, len(line)  # not 2 MiB
    assert line.count("\n") == 1  # one line: the tenant's newline is escaped
    assert "\u202e" not in line
    assert "\\u202e" in line
    assert "chars)" in line


def test_clip_keeps_ordinary_text_and_bounds_any_other() -> None:
    assert clip("Pod default/web-0") == "Pod default/web-0"
    assert clip("a\tb") == "a\\x09b"
    clipped = clip("x" * 10_000, 100)
    assert clipped.startswith("x" * 100)
    assert clipped.endswith("...(+9900 chars)")
    assert len(clip("\u202e" * 10_000, 100)) < 130
    assert json.dumps(clip("\ud800")).isascii()
