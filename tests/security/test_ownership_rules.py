"""When a job is provably the bridge's, as pure rules: the admin_comment back-link must
name this cluster's mcs label and the very pod (namespace, name, and uid where recorded)."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.models import GroupId
from bridge.translate import admin_comment, back_link, job_names_pod, link_is_ours, names_any_pod


def pod(ns: str = "a", name: str = "p-0", uid: str = "pod-uid", owner: str | None = None) -> Any:
    meta: dict[str, Any] = {"namespace": ns, "name": name, "uid": uid}
    if owner is not None:
        meta["ownerReferences"] = [{"kind": "Job", "uid": owner, "controller": True}]
    return {"metadata": meta}


PLAIN = admin_comment(
    GroupId(kind="Pod", namespace="a", name="p-0", uid="pod-uid"), ["a/p-0"], "k8s"
)
JOB = admin_comment(GroupId(kind="Job", namespace="a", name="j", uid="job-uid"), ["a/p-0"], "k8s")
UPSTREAM = '{"pods":["a/p-0"]}'


@pytest.mark.parametrize(
    ("comment", "job_mcs", "the_pod", "ours"),
    [
        pytest.param(PLAIN, "", pod(), True, id="the-pod-itself"),
        pytest.param(PLAIN, "", pod(uid="other"), False, id="same-name-new-pod"),
        pytest.param(PLAIN, "", pod(ns="b"), False, id="another-namespace"),
        pytest.param(PLAIN, "", pod(name="p-1"), False, id="not-listed"),
        pytest.param(JOB, "", pod(owner="job-uid", uid="x"), True, id="the-jobs-pod"),
        pytest.param(JOB, "", pod(owner="other-job", uid="x"), False, id="another-jobs-pod"),
        pytest.param(UPSTREAM, "", pod(), True, id="upstream-link"),
        pytest.param(UPSTREAM, "other", pod(), False, id="upstream-link-of-another-cluster"),
        pytest.param("", "", pod(), False, id="native-job-no-comment"),
        pytest.param("anything a user wrote", "", pod(), False, id="not-json"),
        pytest.param(PLAIN.replace('"k8s"', '"other"'), "", pod(), False, id="other-cluster"),
    ],
)
def test_a_job_is_only_the_pods_when_its_back_link_says_so(
    comment: str, job_mcs: str, the_pod: Any, ours: bool
) -> None:
    assert names_any_pod(comment, job_mcs, [the_pod], "k8s") is ours


def test_the_back_link_carries_the_clusters_mcs_label() -> None:
    link = back_link(PLAIN)
    assert link is not None
    assert link.mcs == "k8s"
    assert link_is_ours(link, "", "k8s")
    assert not link_is_ours(link, "", "other")
    assert job_names_pod(link, pod())
