"""Issue 39, deliverable 2: every slurmjob annotation is under the namespace's policy.

Before, the policy governed only ``user-id``, ``group-id``, ``priority`` and the account,
partition, QOS and reservation lists: a tenant set ``gres: gpu:0`` and its claim's job got
no GPU from Slurm while the claim was given a native job's. Now each key is open (it
cannot make the job hold more than, or other than, what its pods ask) or policed (refused
unless ``allowPodKeys`` lists it), by the webhook and again by the scheduler before any
submit, naming the key and the rule. docs/annotations.md lists each key with its default,
and a test below keeps that table and the code the same.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from admission.policy import AdmissionContext
from admission.review import parse_review
from admission.validate import validate
from bridge.config import POLICED_POD_KEYS, parse_config
from bridge.errors import ConfigError, InvalidInput
from bridge.kube.resources import PODS
from bridge.models import JobSpec
from bridge.wellknown import (
    ANNOTATION_KUEUE_PREFERRED_TOPOLOGY,
    ANNOTATION_KUEUE_REQUIRED_TOPOLOGY,
    BRIDGE_SLURMJOB_KEYS,
    LEGACY_ANNOTATION_JOB_NAME,
    SLURMJOB_KEYS,
    slurmjob_annotation,
)
from tests.admission_helpers import make_review
from tests.integration.bridge_harness import NS, has_job, pod, running_bridge
from tests.integration.conftest import SlurmSandbox
from tests.security.test_namespace_policy import scheduler, webhook

DOC = Path(__file__).resolve().parents[2] / "docs" / "annotations.md"
# a value each policed key parses, and what it would do
POLICED_VALUES = {
    "gres": "gpu:0",  # no GPU in the job of a pod whose claims hold one
    "cpu-per-task": "1",  # a 1-CPU job for a pod of many
    "mem-per-node": "1Mi",
    "licenses": "matlab:10",  # a cluster-wide count native jobs share
    "min-nodes": "8",  # more nodes than a packed gang needs
}
# every open key with a value it parses (a lone pod: min-nodes aside, nothing else)
OPEN_VALUES = {
    "account": "a",
    "constraints": "fast",
    "exclusive": "false",
    "job-name": "train",
    "max-nodes": "1",
    "partition": "slurm-bridge",
    "qos": "normal",
    "reservation": "r",
    "timelimit": "30",
    "wckey": "w",
    "segment": "1",
    "switches": "1@10",
}
OWN_FLAGS = ("user-id", "group-id", "priority")
CFG = parse_config({"managedNamespaces": ["open", "hpc"]}, env={})
OPENED = parse_config(
    {
        "managedNamespaces": ["open", "hpc"],
        "namespacePolicies": [{"namespaces": ["hpc"], "allowPodKeys": list(POLICED_POD_KEYS)}],
    },
    env={},
)


def test_every_key_is_open_policed_or_has_its_own_flag() -> None:
    keys = set(SLURMJOB_KEYS) | set(BRIDGE_SLURMJOB_KEYS)
    assert set(POLICED_VALUES) == set(POLICED_POD_KEYS)
    assert keys == set(POLICED_VALUES) | set(OPEN_VALUES) | set(OWN_FLAGS)
    assert not set(POLICED_VALUES) & set(OPEN_VALUES)


@pytest.mark.parametrize("key", POLICED_POD_KEYS)
def test_the_webhook_refuses_a_policed_key_naming_it_and_the_rule(key: str) -> None:
    resp = webhook(CFG, "open", {slurmjob_annotation(key): POLICED_VALUES[key]})
    assert resp["allowed"] is False
    message = resp["status"]["message"]
    assert f"metadata.annotations[{slurmjob_annotation(key)}]" in message
    assert f"defaultNamespacePolicy.allowPodKeys does not list {key!r}" in message


@pytest.mark.parametrize("key", POLICED_POD_KEYS)
def test_the_scheduler_refuses_a_policed_key_before_any_submit(key: str) -> None:
    with pytest.raises(InvalidInput) as e:
        scheduler(CFG, "open", {slurmjob_annotation(key): POLICED_VALUES[key]})
    assert e.value.field == slurmjob_annotation(key)
    assert f"defaultNamespacePolicy.allowPodKeys does not list {key!r}" in e.value.reason


@pytest.mark.parametrize("key", POLICED_POD_KEYS)
def test_a_policy_that_opens_a_key_lets_both_through(key: str) -> None:
    ann = {slurmjob_annotation(key): POLICED_VALUES[key]}
    if key == "min-nodes":
        ann[slurmjob_annotation("exclusive")] = "false"  # a lone exclusive pod: 1 node
    assert webhook(OPENED, "hpc", ann)["allowed"] is True
    assert isinstance(scheduler(OPENED, "hpc", ann), JobSpec)
    # the other namespaces keep the default
    assert webhook(OPENED, "open", ann)["allowed"] is False


@pytest.mark.parametrize("key", sorted(OPEN_VALUES))
def test_an_open_key_passes_both_under_the_default_policy(key: str) -> None:
    ann = {slurmjob_annotation(key): OPEN_VALUES[key]}
    assert webhook(CFG, "open", ann)["allowed"] is True
    assert isinstance(scheduler(CFG, "open", ann), JobSpec)


def test_a_policed_key_on_a_group_object_is_refused_too() -> None:
    pg = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {
            "name": "g",
            "namespace": "open",
            "annotations": {slurmjob_annotation("gres"): "gpu:0"},
        },
        "spec": {"minMember": 2},
    }
    review = make_review(pg, kind="PodGroup", group="scheduling.x-k8s.io", version="v1alpha1")
    resp: dict[str, Any] = validate(parse_review(review), AdmissionContext(CFG, {})).to_review()
    assert resp["response"]["allowed"] is False
    assert "allowPodKeys does not list 'gres'" in resp["response"]["status"]["message"]


def test_an_unknown_key_in_allow_pod_keys_is_a_config_error_naming_it() -> None:
    with pytest.raises(ConfigError) as e:
        parse_config({"defaultNamespacePolicy": {"allowPodKeys": ["gres", "user-id"]}}, env={})
    assert "defaultNamespacePolicy.allowPodKeys.1" in str(e.value)


def _doc_table() -> dict[str, str]:
    """docs/annotations.md's "Which keys a tenant may set": key -> its default."""
    text = DOC.read_text().split("## Which keys a tenant may set", 1)[1]
    rows: dict[str, str] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or not cells[0].startswith("`"):
            continue
        for key in re.findall(r"`([^`]+)`", cells[0]):
            rows[key] = cells[1]
    return rows


def test_the_docs_list_every_key_with_its_default() -> None:
    rows = _doc_table()
    for key in [*SLURMJOB_KEYS, *BRIDGE_SLURMJOB_KEYS]:
        assert key in rows, f"docs/annotations.md does not list {key}"
        want = "denied" if key in POLICED_POD_KEYS or key in OWN_FLAGS else "allowed"
        assert rows[key].startswith(want), (key, rows[key])
    assert rows[LEGACY_ANNOTATION_JOB_NAME].startswith("allowed")
    # Kueue's two, as one row: podset-required/preferred-topology
    for kueue in (ANNOTATION_KUEUE_REQUIRED_TOPOLOGY, ANNOTATION_KUEUE_PREFERRED_TOPOLOGY):
        assert kueue.split("/")[1].startswith("podset-")
    assert rows["podset-required/preferred-topology"].startswith("allowed")


@pytest.mark.slurm
@pytest.mark.e2e
async def test_against_slurm_a_policed_key_never_reaches_a_job(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    """No webhook in front (it can be bypassed): the scheduler refuses the pod naming the
    key and the rule, submits nothing, and a pod with open keys only runs."""
    async with running_bridge(sandbox, tmp_path) as b:
        try:
            await b.kube.create(
                PODS, pod("zero", annotations={slurmjob_annotation("gres"): "gpu:0"}), NS
            )
            await b.kube.create(
                PODS, pod("plain", annotations={slurmjob_annotation("timelimit"): "5"}), NS
            )
            await b.bound("plain")

            async def refused() -> str:
                said = await b.scheduled_message("zero")
                return said if "allowPodKeys does not list 'gres'" in said else ""

            said = await b.wait_for("the policed key refused", refused)
            assert said.startswith("False Unschedulable")
            assert slurmjob_annotation("gres") in said
            assert not has_job(await b.get_pod("zero"))
        finally:
            await b.cancel_jobs()
