"""The job-id label read one way everywhere (scheduler, controller, status)."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.translate import pod_belongs, pod_job_id
from bridge.wellknown import LABEL_JOB_ID


def pod(label: Any = None) -> dict[str, Any]:
    labels = {} if label is None else {LABEL_JOB_ID: label}
    return {"metadata": {"name": "p", "labels": labels}}


@pytest.mark.parametrize(
    ("label", "job_id"),
    [
        ("42", 42),
        (None, None),
        ("", None),
        ("-5", None),
        (" 7", None),
        ("4x", None),
        ("9" * 19, None),
        (42, None),  # not a string: not a label value
    ],
)
def test_a_pods_job_id_is_its_labels_digits(label: Any, job_id: int | None) -> None:
    assert pod_job_id(pod(label)) == job_id


@pytest.mark.parametrize(
    ("p", "belongs"),
    [(None, False), (pod(), True), (pod("7"), True), (pod("8"), False)],
)
def test_a_pod_belongs_to_job_7_unless_labelled_for_another(
    p: dict[str, Any] | None, belongs: bool
) -> None:
    assert pod_belongs(7, p) is belongs
