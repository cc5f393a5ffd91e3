"""When a job is provably the bridge's, as pure rules: the admin_comment back-link must
name this cluster's mcs label and the very pod (namespace, name, and uid where recorded);
adopted without a pod naming it, the very group (kind, namespace, name, non-empty uid),
whose uid comes from its object in the pod's own namespace, never from the pod's text."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.errors import InvalidInput
from bridge.models import GroupId
from bridge.translate import (
    TranslateSettings,
    Waiting,
    admin_comment,
    back_link,
    group_of,
    job_names_pod,
    kobj,
    link_is_ours,
    link_names_group,
    names_any_pod,
    translate_group,
)
from bridge.workloads import kind_named
from scheduler.related import RelatedCache
from tests.workloads import expand, load_example


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


# --- adoption without a pod naming the job (issue #30, finding 1) -------------------------
LWS_A = GroupId(kind="LeaderWorkerSet", namespace="team-a", name="lws-0", uid="lws-uid")


@pytest.mark.parametrize(
    ("comment", "group", "adopted"),
    [
        pytest.param(admin_comment(LWS_A, [], "k8s"), LWS_A, True, id="the-group-itself"),
        pytest.param(
            admin_comment(LWS_A, [], "k8s"),
            LWS_A.model_copy(update={"namespace": "team-b"}),
            False,
            id="same-uid-other-namespace",
        ),
        pytest.param(
            admin_comment(LWS_A, [], "k8s"),
            LWS_A.model_copy(update={"name": "other-0"}),
            False,
            id="same-uid-other-name",
        ),
        pytest.param(
            admin_comment(LWS_A, [], "k8s"),
            LWS_A.model_copy(update={"kind": "PodGroup"}),
            False,
            id="same-uid-other-kind",
        ),
        pytest.param(admin_comment(LWS_A, [], None), LWS_A, False, id="no-mcs-label"),
        pytest.param(admin_comment(LWS_A, [], "other"), LWS_A, False, id="other-cluster"),
        pytest.param(
            admin_comment(LWS_A.model_copy(update={"uid": ""}), [], "k8s"),
            LWS_A.model_copy(update={"uid": ""}),
            False,
            id="no-uid-never-matches",
        ),
        pytest.param('{"pods":["team-a/lws-0-0"]}', LWS_A, False, id="upstream-link"),
    ],
)
def test_a_job_is_adopted_only_by_the_group_its_back_link_names_whole(
    comment: str, group: GroupId, adopted: bool
) -> None:
    assert link_names_group(comment, group, "k8s") is adopted


def _job(ns: str, uid: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"namespace": ns, "name": "train", "uid": uid, "annotations": annotations},
        "spec": {"parallelism": 2},
    }


def _member(ns: str, owner_uid: str) -> dict[str, Any]:
    ref = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": owner_uid}
    return {
        "metadata": {
            "namespace": ns,
            "name": "train-0",
            "uid": f"{ns}-pod",
            "ownerReferences": [{**ref, "controller": True}],
        },
        "spec": {"containers": [{"name": "c"}]},
    }


def test_a_pods_owner_uid_is_never_found_in_another_namespace() -> None:
    """team-b's pod carries the uid of team-a's Job (Kubernetes checks only that it is not
    empty): grouping does not take team-a's Job as its owner (a gang of 2), nor its uid."""
    team_a_job = _job("team-a", "job-a")
    ref = group_of(_member("team-b", "job-a"), {"job-a": team_a_job})
    assert ref.kind == "Pod"  # team-a's Job (parallelism 2) was not read for it
    assert ref.uid == "team-b-pod"
    assert ref.source is not None
    assert ref.source.uid is None
    mine = group_of(_member("team-a", "job-a"), {"job-a": team_a_job})
    assert (mine.kind, mine.uid) == ("Job", "job-a")


def test_the_kinds_cache_finds_owners_by_namespace_and_uid_never_by_uid_alone() -> None:
    cache = RelatedCache()
    cache.on_event(kind_named("Job").api, "ADDED", _job("team-a", "job-a"))
    assert cache.owners("team-b").get("job-a") is None
    assert cache.owners("team-a").get("job-a") is not None


def test_a_team_b_job_is_never_built_from_team_a_objects() -> None:
    """The group object is read by kind and name in the pod's namespace; a pod whose
    ownerReference names a uid that object does not have (or an object that does not
    exist) is refused, naming the field."""
    settings = TranslateSettings()
    owners = {"job-a": _job("team-a", "job-a", {"slurmjob.slinky.slurm.net/job-name": "secret"})}
    pod = _member("team-b", "job-a")
    with pytest.raises(InvalidInput) as missing:
        translate_group([pod], None, [], settings, owners=owners)
    assert missing.value.field == "metadata.ownerReferences[0]"
    assert "Job team-b/train" in str(missing.value)
    with pytest.raises(InvalidInput) as other_uid:
        translate_group([pod], _job("team-b", "job-b"), [], settings, owners=owners)
    assert other_uid.value.field == "metadata.ownerReferences[0].uid"


# --- a later pod under a listed name (issue #30, finding 10) ------------------------------
def _groups(example: str) -> list[tuple[list[dict[str, Any]], Any]]:
    cluster = expand(load_example(example))
    settings = TranslateSettings()
    groups: dict[str, list[dict[str, Any]]] = {}
    refs = {}
    for p in cluster.pods:
        ref = group_of(p, cluster.objects, settings)
        groups.setdefault(ref.key, []).append(p)
        refs[ref.key] = ref
    out = []
    for key, pods in groups.items():
        src = refs[key].source
        obj = cluster.find(src.kind, src.namespace, src.name) if src else None
        out.append((pods, obj))
    return out


@pytest.mark.parametrize("example", ["podgroup", "lws", "jobset", "indexed-job", "pause"])
def test_a_pod_made_later_under_a_listed_name_is_not_named(example: str) -> None:
    for pods, obj in _groups(example):
        spec = translate_group(pods, obj, [], TranslateSettings(), owners={})
        assert not isinstance(spec, Waiting)
        # a hetjob's components each back-link their own pods
        links = [back_link(c.admin_comment) for c in (spec, *spec.het_components)]
        assert all(link is not None for link in links)

        for p in pods:
            assert any(link is not None and job_names_pod(link, p) for link in links)
            later = {**p, "metadata": {**p["metadata"], "uid": "recreated-uid"}}
            assert not any(link is not None and job_names_pod(link, later) for link in links), (
                f"{example}: {kobj.pod_key(p)} recreated"
            )


def test_an_older_jobs_link_does_not_name_a_pod_without_its_owner_reference() -> None:
    link = back_link(JOB)
    assert link is not None
    assert not job_names_pod(link, pod(uid="x"))
