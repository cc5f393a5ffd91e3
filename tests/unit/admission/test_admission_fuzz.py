"""Generated bad input: mutate/validate never crash, and every rejection names field + reason.

The seeded generator corrupts a valid pod in many ways at once (wrong types, bad annotation
values, unknown slurmjob keys, bridge-only keys, odd tolerations). Hypothesis covers
arbitrary annotation maps. Reliability target (TARGETS.md): 0 crashes; every rejection names
the field and the reason.
"""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from admission.mutate import mutate
from admission.policy import AdmissionContext
from admission.review import AdmissionResponse, parse_review
from admission.validate import validate
from bridge import wellknown
from bridge.config import parse_config
from tests.admission_helpers import make_pod, make_review

CTX = AdmissionContext(parse_config({"managedNamespaces": ["slurm-bridge"]}, env={}), {})

JUNK: list[Any] = [
    "",
    " ",
    "-1",
    "0",
    "1e309",
    "NaN",
    "1.5",
    "99999999999999999999",
    "abc",
    "12Qi",
    "\x00",
    "ä",
    "x" * 2000,
    "true ",
    "FALSE",
    "1:00",
    "--",
    None,
    7,
    -3,
    1.5,
    True,
    [],
    {},
    ["a"],
    {"a": 1},
]


def _annotation_keys(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.7:
        return wellknown.slurmjob_annotation(rng.choice(wellknown.SLURMJOB_KEYS))
    if roll < 0.8:
        return wellknown.SLURMJOB_PREFIX + rng.choice(["", "nope", "time-limit", "CPU", "/x~y"])
    if roll < 0.9:
        return wellknown.LEGACY_ANNOTATION_JOB_NAME
    return rng.choice([wellknown.ANNOTATION_SLURM_NODE, "app", "a/b~c"])


def bad_pod(rng: random.Random) -> dict[str, Any]:
    pod = make_pod(
        namespace=rng.choice(["slurm-bridge", "slurm-bridge", "default"]),
        scheduler=rng.choice([None, "", "default-scheduler", "slurm-bridge-scheduler", "x"]),
        node=rng.choice([None, None, "n1", ""]),
    )
    meta, spec = pod["metadata"], pod["spec"]
    meta["annotations"] = {
        _annotation_keys(rng): rng.choice(JUNK) for _ in range(rng.randint(1, 6))
    }
    if rng.random() < 0.3:
        meta["labels"] = {wellknown.LABEL_JOB_ID: rng.choice(JUNK), "app": "x"}
    corruptions = [
        lambda: spec.__setitem__("schedulerName", rng.choice([5, [], {}, True])),
        lambda: spec.__setitem__("tolerations", rng.choice(["x", 3, {}, [1], [None], [[]]])),
        lambda: spec.__setitem__("tolerations", [{"key": rng.choice(JUNK), "operator": 1}]),
        lambda: pod.__setitem__("spec", rng.choice([None, "spec", 1, []])),
        lambda: meta.__setitem__("annotations", rng.choice(["a", 1, [], None])),
        lambda: meta.__setitem__("labels", rng.choice(["a", 1, ["x"]])),
        lambda: spec.__setitem__("nodeName", rng.choice([1, {}, "n2"])),
    ]
    for _ in range(rng.randint(0, 3)):
        rng.choice(corruptions)()
    return pod


def check(resp: AdmissionResponse, uid: str) -> bool:
    """Well-formed; a denial names each field and reason. Returns True when denied."""
    out = json.loads(json.dumps(resp.to_review()))
    assert out["response"]["uid"] == uid
    if out["response"]["allowed"]:
        return False
    status = out["response"]["status"]
    causes = status["details"]["causes"]
    assert causes, status
    for c in causes:
        assert c["field"], c
        assert c["message"], c
        assert f"{c['field']}: {c['message']}" in status["message"]
    return True


def test_2000_generated_bad_pods_never_crash_and_every_rejection_names_a_field() -> None:
    rng = random.Random(20260801)
    denied = reviewed = 0
    for i in range(2000):
        pod = bad_pod(rng)
        user = rng.choice(["alice", "system:serviceaccount:slurm-bridge:slurm-bridge-scheduler"])
        if rng.random() < 0.3:
            old = bad_pod(rng)
            body = make_review(pod, operation="UPDATE", old=old, user=user, uid=f"f{i}")
        else:
            body = make_review(pod, user=user, uid=f"f{i}")
        req = parse_review(body)
        for fn in (mutate, validate):
            denied += check(fn(req, CTX), req.uid)
            reviewed += 1
    print(f"fuzz: {reviewed} reviews, {denied} denied, 0 crashes")
    assert denied > 500  # the generator really produces bad input


annotation_keys = st.one_of(
    st.sampled_from([wellknown.slurmjob_annotation(k) for k in wellknown.SLURMJOB_KEYS]),
    st.text(min_size=0, max_size=12).map(lambda s: wellknown.SLURMJOB_PREFIX + s),
    st.just(wellknown.LEGACY_ANNOTATION_JOB_NAME),
    st.text(max_size=20),
)
annotation_values = st.one_of(
    st.text(max_size=30),
    st.from_regex(r"[+-]?[0-9]{0,12}(\.[0-9]{0,3})?(Ki|Mi|Gi|Ti|k|M|G|m|e3|)?", fullmatch=True),
    st.sampled_from(["true", "false", "True", "0", "60", "1Gi", "500m"]),
    st.integers(),
    st.none(),
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(annotation_keys, annotation_values, max_size=8), st.booleans())
def test_arbitrary_annotation_maps_never_crash_and_denials_name_the_annotation(
    annotations: dict[str, Any], bound: bool
) -> None:
    pod = make_pod(annotations=annotations)
    for body in (
        make_review(pod),
        make_review(pod, operation="UPDATE", old=make_pod(node="n1" if bound else None)),
    ):
        req = parse_review(body)
        resp = validate(req, CTX)
        if check(resp, req.uid):
            for field, _ in resp.causes:
                key = field.removeprefix("metadata.annotations[").removesuffix("]")
                assert key in annotations, field
        assert mutate(req, CTX).allowed
