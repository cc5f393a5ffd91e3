"""The seed examples (deploy/examples/*.yaml), expanded into the pods their controllers
create, translate to the job specs in tests/golden/jobspecs/. UPDATE_GOLDEN=1 rewrites."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from bridge.models import JobSpec
from bridge.translate import TranslateSettings, group_of, translate_group
from tests.workloads import expand, load_example

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "jobspecs"
NODES: list[dict[str, Any]] = [
    {"metadata": {"name": f"node-{i}", "labels": {}}, "spec": {}} for i in range(1, 5)
] + [{"metadata": {"name": "node-cordoned"}, "spec": {"unschedulable": True}}]


def _specs(example: str, settings: TranslateSettings) -> dict[str, JobSpec]:
    cluster = expand(load_example(example))
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    refs = {}
    for pod in cluster.pods:
        ref = group_of(pod, cluster.objects, settings)
        groups[ref.key].append(pod)
        refs[ref.key] = ref
    out = {}
    for key, pods in groups.items():
        src = refs[key].source
        group_object = cluster.find(src.kind, src.namespace, src.name) if src else None
        spec = translate_group(pods, group_object, NODES, settings, owners=cluster.objects)
        assert isinstance(spec, JobSpec), spec
        out[refs[key].name] = spec
    return out


@pytest.mark.parametrize(
    ("example", "settings", "golden"),
    [
        pytest.param("pause", TranslateSettings(), "pause", id="pause-pod"),
        pytest.param("podgroup", TranslateSettings(), "podgroup", id="podgroup-two-nginx"),
        pytest.param(
            "jobset",
            TranslateSettings(gang_sizing="largest"),
            "jobset",
            id="jobset-one-plain-job-sized-by-its-largest-member",
        ),
        pytest.param(
            "jobset",
            TranslateSettings(gang_sizing="hetjob"),
            "jobset-hetjob",
            id="jobset-driver-and-workers-one-hetjob",
        ),
        pytest.param(
            "jobset",
            TranslateSettings(jobset_grouping="replicatedJob"),
            "jobset-per-replicated-job",
            id="jobset-per-replicated-job",
        ),
        pytest.param("lws", TranslateSettings(), "lws", id="lws-size-3"),
        pytest.param("indexed-job", TranslateSettings(), "indexed-job", id="indexed-job-of-4"),
    ],
)
def test_example_translates_to_golden_job_spec(
    example: str, settings: TranslateSettings, golden: str
) -> None:
    got = {
        name: spec.model_dump(mode="json")
        for name, spec in sorted(_specs(example, settings).items())
    }
    path = GOLDEN / f"{golden}.json"
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(json.dumps(got, indent=2, sort_keys=True) + "\n")
    assert got == json.loads(path.read_text())
