"""The config file: upstream keys, our keys, env overrides, and errors that name the key."""

import os
from pathlib import Path

import pytest

from bridge import cli
from bridge.config import load_config, parse_config
from bridge.errors import ConfigError

SECTIONS = {"scheduler", "controller", "admission"}


def test_defaults_match_upstream() -> None:
    cfg = parse_config({})
    assert cfg.scheduler_name == "slurm-bridge-scheduler"
    assert cfg.slurm_rest_api == "http://slurm-restapi.slurm:6820"
    assert cfg.managed_namespaces == ("slurm-bridge",)
    assert cfg.mcs_label == "kubernetes"
    assert cfg.partition == "slurm-bridge"


def test_upstream_config_file_loads_unchanged(tmp_path: Path) -> None:
    f = tmp_path / "config.yaml"
    f.write_text(
        "schedulerName: my-sched\n"
        "slurmRestApi: http://rest:6820/\n"
        "managedNamespaces: [a, b]\n"
        "managedNamespaceSelector:\n  matchLabels: {team: hpc}\n"
        "mcsLabel: k8s\n"
        "partition: gpu\n"
    )
    cfg = load_config(f, env={})
    assert cfg.scheduler_name == "my-sched"
    assert cfg.slurm_rest_api == "http://rest:6820"
    assert cfg.managed_namespaces == ("a", "b")
    assert cfg.namespace_is_managed("x", {"team": "hpc"})
    assert not cfg.namespace_is_managed("x", {"team": "web"})
    assert cfg.namespace_is_managed("a", {})


@pytest.mark.parametrize(
    ("data", "key", "reason"),
    [
        pytest.param({"schedulerNme": "x"}, "schedulerNme", "unknown key", id="typo-top-level"),
        pytest.param({"admission": {"prt": 1}}, "admission.prt", "unknown key", id="typo-section"),
        pytest.param({"slurmRestApi": "rest:6820"}, "slurmRestApi", "http", id="url-no-scheme"),
        pytest.param({"slurmApiVersion": "v0.0.40"}, "slurmApiVersion", "v0.0.45", id="old-api"),
        pytest.param({"metricsPort": 70000}, "metricsPort", "65535", id="port-range"),
        pytest.param({"logLevel": "loud"}, "logLevel", "debug", id="log-level"),
        pytest.param({"partition": " "}, "partition", "empty", id="empty-partition"),
        pytest.param(
            {"controller": {"jobEndedPodPolicy": "explode"}},
            "controller.jobEndedPodPolicy",
            "fail",
            id="policy-enum",
        ),
        pytest.param(
            {"controller": {"slurmJobMetrics": "fresh"}},
            "controller.slurmJobMetrics",
            "'polled', 'table' or 'off'",
            id="job-metrics-enum",
        ),
    ],
)
def test_bad_config_names_key_and_reason(data: dict[str, object], key: str, reason: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    assert err.value.key == key
    assert reason in str(err.value)


@pytest.mark.parametrize(
    ("yaml_text", "env", "mode"),
    [
        ("{}", {}, "polled"),
        ("controller: {slurmJobMetrics: table}", {}, "table"),
        ("controller: {slurmJobMetrics: polled}", {}, "polled"),
        # the boolean this key once was: true -> polled, false (and YAML's off) -> off
        ("controller: {slurmJobMetrics: true}", {}, "polled"),
        ("controller: {slurmJobMetrics: false}", {}, "off"),
        ("controller: {slurmJobMetrics: off}", {}, "off"),
        ("{}", {"SLURM_BRIDGE_CONTROLLER__SLURM_JOB_METRICS": "false"}, "off"),
        ("{}", {"SLURM_BRIDGE_CONTROLLER__SLURM_JOB_METRICS": "table"}, "table"),
    ],
)
def test_job_metrics_mode_defaults_to_polled_and_still_takes_the_old_booleans(
    tmp_path: Path, yaml_text: str, env: dict[str, str], mode: str
) -> None:
    f = tmp_path / "config.yaml"
    f.write_text(yaml_text + "\n")
    assert load_config(f, env=env).controller.slurm_job_metrics == mode


def test_env_overrides_file_values() -> None:
    cfg = parse_config(
        {"partition": "file", "admission": {"port": 1000}},
        env={
            "SLURM_BRIDGE_PARTITION": "env",
            "SLURM_BRIDGE_ADMISSION__PORT": "2000",
            "SLURM_BRIDGE_MANAGED_NAMESPACES": "x, y",
            "SLURM_BRIDGE_SCHEDULER__GRES_MAPPING": '{"example.com/fpga": "fpga"}',
            "SLURM_JWT_FILE": "/run/token",
        },
    )
    assert cfg.partition == "env"
    assert cfg.admission.port == 2000
    assert cfg.managed_namespaces == ("x", "y")
    assert cfg.scheduler.gres_mapping == {"example.com/fpga": "fpga"}
    assert str(cfg.slurm_token_file) == "/run/token"


def test_every_error_is_reported_at_once_each_naming_its_key_and_reason() -> None:
    bad = {
        "schedulerNme": "x",  # unknown key
        "slurmRestApi": "rest:6820",  # a validator's reason
        "metricsPort": 70000,  # a bound
        "scheduler": {"workers": 0, "jobsetGrouping": "nope"},  # two in one section
        "managedNamespaceSelector": {"matchExpressions": [{"key": "a", "operator": "Is"}]},
        "renewDeadlineSeconds": 20,  # cross-field: not less than leaseDurationSeconds (15)
    }
    with pytest.raises(ConfigError) as err:
        parse_config(bad, env={"SLURM_BRIDGE_PARTITON": "x"})
    problems = dict(err.value.problems)
    assert problems == {
        "SLURM_BRIDGE_PARTITON": "unknown environment override (no such config key)",
        "schedulerNme": "unknown key",
        "slurmRestApi": "must be an http:// or https:// URL",
        "metricsPort": "Input should be less than or equal to 65535",
        "scheduler.workers": "Input should be greater than or equal to 1",
        "scheduler.jobsetGrouping": "Input should be 'jobset' or 'replicatedJob'",
        "managedNamespaceSelector.matchExpressions.0.operator": (
            "Input should be 'In', 'NotIn', 'Exists' or 'DoesNotExist'"
        ),
        "renewDeadlineSeconds": "must be less than leaseDurationSeconds",
    }
    assert len(err.value.problems) == len(problems)  # each reported once
    assert (err.value.key, err.value.reason) == err.value.problems[0]
    for key, reason in err.value.problems:
        assert f"config key {key!r}: {reason}" in str(err.value)


def test_two_errors_in_one_list_are_both_reported_and_the_rest_still_cross_checked() -> None:
    selector = {"matchExpressions": [{"key": "a", "operator": "Is"}, {"operator": "In"}]}
    with pytest.raises(ConfigError) as err:
        parse_config({"managedNamespaceSelector": selector, "retryPeriodSeconds": 10})
    assert [k for k, _ in err.value.problems] == [
        "managedNamespaceSelector.matchExpressions.0.operator",
        "managedNamespaceSelector.matchExpressions.1.key",
        "retryPeriodSeconds",
    ]


def test_cross_field_checks_skip_keys_already_in_error() -> None:
    # a bad leaseDurationSeconds is reported once, not again as a conflict with its default
    with pytest.raises(ConfigError) as err:
        parse_config({"leaseDurationSeconds": -1, "renewDeadlineSeconds": 20})
    assert [k for k, _ in err.value.problems] == ["leaseDurationSeconds"]


@pytest.mark.parametrize(
    ("timings", "keys"),
    [
        pytest.param({"renewDeadlineSeconds": 15}, ["renewDeadlineSeconds"], id="renew>=lease"),
        pytest.param({"retryPeriodSeconds": 10}, ["retryPeriodSeconds"], id="retry>=renew"),
        pytest.param(
            {"leaseDurationSeconds": 1, "retryPeriodSeconds": 20},
            ["renewDeadlineSeconds", "retryPeriodSeconds"],
            id="both",
        ),
    ],
)
def test_lease_timings_are_checked_together_when_leader_election_is_on(
    timings: dict[str, float], keys: list[str]
) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(timings)
    assert [k for k, _ in err.value.problems] == keys
    assert parse_config({**timings, "leaderElection": False}).leader_election is False


def test_config_check_prints_every_error_and_exits_non_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in [v for v in os.environ if v.startswith("SLURM_BRIDGE_") or v == "SLURM_JWT_FILE"]:
        monkeypatch.delenv(var)  # `config check` applies the process's overrides
    f = tmp_path / "config.yaml"
    f.write_text("schedulerNme: x\nmetricsPort: -1\nadmission: {port: 0}\n")
    assert cli.main(["config", "check", str(f)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"invalid: {f}: 3 errors",
        "  metricsPort: Input should be greater than or equal to 0",
        "  admission.port: Input should be greater than or equal to 1",
        "  schedulerNme: unknown key",
    ]
    f.write_text("partition: p\n")
    assert cli.main(["config", "check", str(f)]) == 0


def test_unknown_env_override_is_an_error_naming_the_variable() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({}, env={"SLURM_BRIDGE_PARTITON": "x"})
    assert err.value.key == "SLURM_BRIDGE_PARTITON"


def test_sandbox_tooling_variables_are_not_config_overrides() -> None:
    env = {"SLURM_BRIDGE_SANDBOX_DIR": "/tmp/sbx", "SLURM_BRIDGE_PARTITION": "p"}
    assert parse_config({}, env=env).partition == "p"


def test_unreadable_and_non_mapping_files_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml", env={})
    f = tmp_path / "list.yaml"
    f.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(f, env={})
