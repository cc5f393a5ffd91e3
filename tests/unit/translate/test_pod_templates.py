"""A lone pod's translation is kept by its template (:class:`bridge.translate.PodTemplates`):
whatever order pods come in, the JobSpec (or the error) is the one a translation without
the cache gives, and pods that differ only in what the translation does not read share one
entry."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.config import NamespacePolicy
from bridge.errors import InvalidInput
from bridge.models import JobSpec
from bridge.translate import PodTemplates, TranslateSettings, translate_group
from bridge.translate.policy import ResolvedPolicy
from bridge.wellknown import slurmjob_annotation

NODES = [
    {"metadata": {"name": "n1", "labels": {"zone": "a"}}, "spec": {}},
    {"metadata": {"name": "n2", "labels": {"zone": "b"}}, "spec": {}},
]
OPEN = ResolvedPolicy("defaultNamespacePolicy", NamespacePolicy())
STRICT = ResolvedPolicy(
    "namespacePolicies[0]",
    NamespacePolicy(accounts=("a", "b"), default_account="a", allow_pod_priority=True),
)
PLAIN = TranslateSettings()
BY_CLASS = TranslateSettings(priority_from_priority_class=True)


def _pod(
    name: str,
    *,
    annotations: Mapping[str, str] | None = None,
    cpu: str | None = "1",
    memory: str | None = "100Mi",
    gpus: str | None = None,
    init_cpu: str | None = None,
    sidecar: bool = False,
    priority: int | None = None,
    deadline: int | None = None,
    overhead: str | None = None,
    zone: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    limits = {"nvidia.com/gpu": gpus} if gpus is not None else {}
    spec: dict[str, Any] = {
        "schedulerName": "slurm-bridge-scheduler",
        "containers": [
            {
                "name": "c",
                "image": "pause",
                "resources": {"requests": requests, "limits": limits},
                # what kube-apiserver makes unique per pod: never read by the translation
                "volumeMounts": [{"name": f"kube-api-access-{name}", "mountPath": "/var"}],
            }
        ],
        "volumes": [{"name": f"kube-api-access-{name}"}],
    }
    if init_cpu is not None:
        init: dict[str, Any] = {"name": "i", "resources": {"requests": {"cpu": init_cpu}}}
        if sidecar:
            init["restartPolicy"] = "Always"
        spec["initContainers"] = [init]
    if priority is not None:
        spec["priority"] = priority
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    if overhead is not None:
        spec["overhead"] = {"cpu": overhead}
    if zone is not None:
        spec["nodeSelector"] = {"zone": zone}
    return {
        "metadata": {
            "name": name,
            "namespace": "team",
            "uid": f"uid-{name}",
            "labels": dict(labels or {"app": name}),
            "annotations": dict(annotations or {}),
        },
        "spec": spec,
    }


def _outcome(
    pod: dict[str, Any],
    s: TranslateSettings,
    policy: ResolvedPolicy,
    templates: PodTemplates | None,
) -> Any:
    try:
        spec = translate_group([pod], None, NODES, s, policy=policy, templates=templates)
    except InvalidInput as e:
        return ("error", e.field, e.reason, e.obj)
    assert isinstance(spec, JobSpec)
    return spec.model_dump(mode="json")


ANNOTATIONS = st.sampled_from(
    [
        {},
        {slurmjob_annotation("account"): "b"},
        {slurmjob_annotation("account"): "c"},  # denied by STRICT
        {slurmjob_annotation("exclusive"): "false"},
        {slurmjob_annotation("timelimit"): "30"},
        {slurmjob_annotation("timelimit"): "0"},  # an error
        {slurmjob_annotation("job-name"): "mine"},
        {"unrelated.example.com/note": "x"},
        {slurmjob_annotation("nosuchkey"): "1"},  # an error
    ]
)
PODS = st.builds(
    _pod,
    name=st.sampled_from(["p-a", "p-b", "p-c", "q-1"]),
    annotations=ANNOTATIONS,
    cpu=st.sampled_from([None, "1", "1500m", "2", "-1"]),
    memory=st.sampled_from([None, "100Mi", "1Gi"]),
    gpus=st.sampled_from([None, "1", "2"]),
    init_cpu=st.sampled_from([None, "1", "4"]),
    sidecar=st.booleans(),
    priority=st.sampled_from([None, 0, 1000]),
    deadline=st.sampled_from([None, 59, 600, -5]),
    overhead=st.sampled_from([None, "250m"]),
    zone=st.sampled_from([None, "a", "c"]),  # "c": no node fits, an error
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(PODS, st.sampled_from([PLAIN, BY_CLASS]), st.sampled_from([OPEN, STRICT])),
        min_size=1,
        max_size=30,
    )
)
def test_a_kept_template_translates_exactly_as_a_fresh_translation(
    runs: list[tuple[dict[str, Any], TranslateSettings, ResolvedPolicy]],
) -> None:
    templates = PodTemplates()
    for pod, s, policy in runs:
        assert _outcome(pod, s, policy, templates) == _outcome(pod, s, policy, None)


# each field the translation reads of a lone pod, changed alone from the base pod's
VARIANTS: dict[str, dict[str, Any]] = {
    "an option annotation": {"annotations": {slurmjob_annotation("account"): "b"}},
    "a denied option": {"annotations": {slurmjob_annotation("account"): "c"}},
    "a legacy job name": {"annotations": {"slinky.slurm.net/job-name": "old"}},
    "the container's cpu": {"cpu": "3"},
    "the container's memory": {"memory": "1Gi"},
    "a GPU limit": {"gpus": "2"},
    "an init container": {"init_cpu": "4"},
    "a sidecar": {"init_cpu": "4", "sidecar": True},
    "the priority": {"priority": 1000},
    "the deadline": {"deadline": 600},
    "the overhead": {"overhead": "250m"},
    "the placement": {"zone": "a"},
    "a placement no node has": {"zone": "c"},
}


def test_a_pod_differing_in_any_field_read_is_not_given_anothers_translation() -> None:
    for s in (PLAIN, BY_CLASS):
        for policy in (OPEN, STRICT):
            for what, change in VARIANTS.items():
                templates = PodTemplates()
                base = _outcome(_pod("base"), s, policy, templates)
                assert base == _outcome(_pod("base"), s, policy, None)
                pod = _pod("other", **change)
                assert _outcome(pod, s, policy, templates) == _outcome(pod, s, policy, None), what
            templates = PodTemplates()
            _outcome(_pod("base"), PLAIN, OPEN, templates)
            # the same pod under other settings or another namespace policy
            assert _outcome(_pod("x"), s, policy, templates) == _outcome(_pod("x"), s, policy, None)


def test_pods_of_one_template_share_one_entry_and_keep_their_own_names() -> None:
    templates = PodTemplates()
    ann = {slurmjob_annotation("timelimit"): "30", "kubernetes.io/note": "differs"}
    for i in range(50):
        pod = _pod(
            f"web-{i}",
            annotations={**ann, "kubernetes.io/note": str(i)},
            labels={"app": "web", "pod-template-hash": "abc", "index": str(i)},
        )
        got = translate_group([pod], None, NODES, PLAIN, policy=OPEN, templates=templates)
        assert got == translate_group([pod], None, NODES, PLAIN, policy=OPEN)
        assert isinstance(got, JobSpec)
        assert got.name == f"web-{i}"
        assert f"uid-web-{i}" in got.admin_comment
    assert len(templates) == 1


def test_an_error_is_not_kept_and_names_each_pod() -> None:
    templates = PodTemplates()
    for name in ("a", "b"):
        pod = _pod(name, annotations={slurmjob_annotation("timelimit"): "0"})
        with pytest.raises(InvalidInput) as e:
            translate_group([pod], None, NODES, PLAIN, policy=OPEN, templates=templates)
        assert e.value.obj == f"Pod team/{name}"
    assert len(templates) == 0


class _Frozen(Mapping[str, Any]):
    """A pod that is not plain JSON (a mapping of another type): not kept, still right."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def test_a_pod_that_is_not_plain_json_is_translated_without_the_cache() -> None:
    templates = PodTemplates()
    pod = _pod("odd")
    pod["spec"]["containers"][0]["resources"] = _Frozen(
        copy.deepcopy(pod["spec"]["containers"][0]["resources"])
    )
    got = translate_group([pod], None, NODES, PLAIN, templates=templates)
    assert got == translate_group([pod], None, NODES, PLAIN)
    assert len(templates) == 0


def test_a_kept_templates_job_is_copied_with_each_pods_own_fields_and_nothing_else() -> None:
    """A hit copies the template's job and replaces what names the pod (name, comments,
    excluded nodes): the copy equals a fresh translation in every field, in what it says
    was set (``exclude_unset`` dumps), and an error of the pod's own placement still names
    it."""
    templates = PodTemplates()
    first = translate_group([_pod("a")], None, NODES, PLAIN, policy=OPEN, templates=templates)
    for pod in (_pod("b"), _pod("c", zone="a"), _pod("d", labels={"x": "y"})):
        got = translate_group([pod], None, NODES, PLAIN, policy=OPEN, templates=templates)
        fresh = translate_group([pod], None, NODES, PLAIN, policy=OPEN)
        assert isinstance(got, JobSpec)
        assert isinstance(fresh, JobSpec)
        assert got == fresh
        assert got.model_dump(exclude_unset=True) == fresh.model_dump(exclude_unset=True)
        assert got.model_fields_set == fresh.model_fields_set
    assert isinstance(first, JobSpec)
    assert first.name == "a"
    with pytest.raises(InvalidInput) as e:
        translate_group([_pod("e", zone="c")], None, NODES, PLAIN, policy=OPEN, templates=templates)
    assert e.value.obj == "Pod team/e"
    assert len(templates) == 1  # a placement is not part of the template: one entry
