"""The config file: upstream keys, our keys, env overrides, and errors that name the key."""

from pathlib import Path

import pytest

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
