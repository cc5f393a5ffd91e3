"""Issue 30, findings 4 and 6: what a namespace's policy leaves to Slurm's defaults.

4. An ``accounts`` or ``qos`` list without its default let a pod that named none through:
   it was submitted with no account, so Slurm charged the job user's default (SlurmUser's
   when the policy sets no user), outside the list. Such a config is now refused when it
   loads, naming the key to set (docs/security.md says why not a per-pod denial).
6. ``scheduler.priorityFromPriorityClass`` bypassed ``allowPodPriority: false``: a pod in
   a PriorityClass of 2,000,000,000 got that Slurm priority. A class is the pod's choice,
   so its value is used only where the policy allows pods to choose their priority.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bridge.cli import main
from bridge.config import parse_config
from bridge.errors import ConfigError
from bridge.kube.resources import PODS
from bridge.models import JobSpec
from bridge.translate import TranslateSettings, translate_group
from bridge.translate.policy import resolve_policy
from tests.integration.bridge_harness import NS, job_of, pod, running_bridge
from tests.integration.conftest import SlurmSandbox
from tests.security.test_namespace_policy import plain_pod

HIGH = 2_000_000_000  # system-cluster-critical's value


@pytest.mark.parametrize(
    ("data", "key"),
    [
        pytest.param(
            {"namespacePolicies": [{"namespaces": ["a"], "accounts": ["x", "y"]}]},
            "namespacePolicies.0.defaultAccount",
            id="accounts-in-an-entry",
        ),
        pytest.param(
            {"namespacePolicies": [{"namespaces": ["a"], "qos": ["normal"]}]},
            "namespacePolicies.0.defaultQos",
            id="qos-in-an-entry",
        ),
        pytest.param(
            {"defaultNamespacePolicy": {"accounts": ["x"]}},
            "defaultNamespacePolicy.defaultAccount",
            id="accounts-in-the-default-policy",
        ),
        pytest.param(
            {"defaultNamespacePolicy": {"qos": ["normal"], "defaultAccount": None}},
            "defaultNamespacePolicy.defaultQos",
            id="qos-in-the-default-policy",
        ),
    ],
)
def test_an_accounts_or_qos_list_without_its_default_is_refused_at_load_naming_the_key(
    data: dict[str, Any], key: str
) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(data, env={})
    assert e.value.key == key
    assert "user's default" in e.value.reason


def test_config_check_lists_every_missing_default_with_its_dotted_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "namespacePolicies:\n"
        "  - namespaces: [team-a]\n"
        "    accounts: [team-a, shared]\n"
        "    qos: [normal]\n"
        "defaultNamespacePolicy:\n"
        "  accounts: [open]\n"
    )
    assert main(["config", "check", str(path)]) != 0
    out = capsys.readouterr()
    said = out.out + out.err
    for key in (
        "namespacePolicies.0.defaultAccount",
        "namespacePolicies.0.defaultQos",
        "defaultNamespacePolicy.defaultAccount",
    ):
        assert key in said


def test_partition_and_reservation_lists_load_without_a_default() -> None:
    """A job without a partition gets the config's ``partition`` (checked against the list
    per pod); one without a reservation uses none. Neither escapes its list."""
    cfg = parse_config(
        {"namespacePolicies": [{"namespaces": ["a"], "partitions": ["p"], "reservations": ["r"]}]},
        env={},
    )
    assert cfg.namespace_policies[0].default_partition is None


def _priority(ns: str, **policy: Any) -> int | None:
    cfg = parse_config(
        {
            "managedNamespaces": [ns],
            "scheduler": {"priorityFromPriorityClass": True},
            "namespacePolicies": [{"namespaces": [ns], **policy}],
        },
        env={},
    )
    pod = plain_pod(ns, {})
    pod["spec"]["priorityClassName"] = "system-cluster-critical"
    pod["spec"]["priority"] = HIGH
    spec = translate_group(
        [pod], None, [], TranslateSettings.from_config(cfg), policy=resolve_policy(cfg, ns, {})
    )
    assert isinstance(spec, JobSpec)
    return spec.priority


def test_a_priority_class_does_not_set_the_job_priority_where_pods_may_not_choose_it() -> None:
    assert _priority("team-a") is None
    assert _priority("team-a", allowPodPriority=False) is None


def test_a_priority_class_sets_the_job_priority_where_the_policy_allows_pod_priority() -> None:
    assert _priority("trusted", allowPodPriority=True) == HIGH


def test_without_a_policy_check_the_priority_class_still_maps_for_tools() -> None:
    pod = plain_pod("open", {})
    pod["spec"]["priority"] = 7
    spec = translate_group([pod], None, [], TranslateSettings(priority_from_priority_class=True))
    assert isinstance(spec, JobSpec)
    assert spec.priority == 7


@pytest.mark.slurm
@pytest.mark.e2e
async def test_against_slurm_a_critical_priority_class_does_not_reach_the_job(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    """The bug as observed: ``priorityFromPriorityClass`` on, ``allowPodPriority`` off, a
    pod of priority 2,000,000,000; Slurm's own priority must apply, not the pod's."""
    policy = {"namespaces": [NS], "accounts": ["default"], "defaultAccount": "default"}
    scheduler = {"rejectBackoffSeconds": 0.5, "workers": 4, "priorityFromPriorityClass": True}
    async with running_bridge(
        sandbox, tmp_path, namespacePolicies=[policy], scheduler=scheduler
    ) as b:
        try:
            body = pod("critical")
            body["spec"]["priorityClassName"] = "system-cluster-critical"
            body["spec"]["priority"] = HIGH
            await b.kube.create(PODS, body, NS)
            await b.bound("critical")
            job_id = job_of(await b.get_pod("critical"))
            shown = sandbox.cli("exec", "--", "squeue", "-h", "-j", str(job_id), "-o", "%Q")
            assert shown.returncode == 0, shown.stderr
            assert int(shown.stdout.split()[-1]) != HIGH
        finally:
            await b.cancel_jobs()
