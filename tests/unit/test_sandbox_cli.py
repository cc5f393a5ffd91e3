"""The pure part of ``slurm-bridge sandbox slurm``: settings, Slurm config files, env file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.errors import ConfigError
from sandbox.slurm.launcher import (
    Paths,
    Settings,
    build_parser,
    env_file_for_tests,
    env_for_tests,
    hostlist,
    newest_api_version,
    parse_env_file,
    parse_facts,
    render_conf_files,
    render_env_file,
    render_gres_conf,
    render_slurm_conf,
    resolve_settings,
    script_env,
    write_atomic,
)

CONTRACT_KEYS = {
    "SLURM_REST_URL",
    "SLURM_API_VERSION",
    "SLURM_USER",
    "SLURM_JWT_FILE",
    "SLURM_CHROOT",
    "SLURM_PARTITION",
    "SLURM_EXTERNAL_NODES",
    "SLURM_BATCH_PARTITION",
    "SLURM_SLURMD_NODES",
    "SLURM_NODE_CPUS",
    "SLURM_NODE_MEM_MB",
    "SLURM_NODE_GPUS",
}


def conf_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln and not ln.startswith("#")]


@pytest.mark.parametrize(
    ("prefix", "count", "expected"),
    [
        pytest.param("kube-node-", 1, "kube-node-0", id="one-host-no-brackets"),
        pytest.param("kube-node-", 3, "kube-node-[0-2]", id="range"),
        pytest.param("batch-node-", 12, "batch-node-[0-11]", id="two-digit-range"),
    ],
)
def test_hostlist_formats_slurm_ranges(prefix: str, count: int, expected: str) -> None:
    assert hostlist(prefix, count) == expected


def test_hostlist_of_zero_hosts_is_refused() -> None:
    with pytest.raises(ValueError):
        hostlist("x", 0)


def test_env_file_of_defaults_matches_the_contract(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    env = parse_env_file(render_env_file(Settings(), paths, "v0.0.45", "26.05.5-1"))
    assert set(env) >= CONTRACT_KEYS
    assert env["SLURM_REST_URL"] == "http://127.0.0.1:6820"
    assert env["SLURM_API_VERSION"] == "v0.0.45"
    assert env["SLURM_USER"] == "slurm"
    assert env["SLURM_JWT_FILE"] == str(tmp_path / "jwt")
    assert env["SLURM_CHROOT"] == str(tmp_path / "sid-root")
    assert env["SLURM_PARTITION"] == "slurm-bridge"
    assert env["SLURM_EXTERNAL_NODES"] == "kube-node-[0-2]"
    assert env["SLURM_BATCH_PARTITION"] == "batch"
    assert env["SLURM_SLURMD_NODES"] == "batch-node-[0-1]"
    assert (env["SLURM_NODE_CPUS"], env["SLURM_NODE_MEM_MB"], env["SLURM_NODE_GPUS"]) == (
        "8",
        "16000",
        "2",
    )


def test_env_file_never_holds_a_token(tmp_path: Path) -> None:
    text = render_env_file(Settings(), Paths(tmp_path), "v0.0.45", "26.05.5-1")
    assert "SLURM_JWT=" not in text
    assert "TOKEN" not in text


def test_env_file_without_external_nodes_points_at_the_batch_partition(tmp_path: Path) -> None:
    s = Settings(suite="trixie", external_nodes=0)
    env = parse_env_file(render_env_file(s, Paths(tmp_path), "v0.0.42", "24.11.5-4"))
    assert env["SLURM_PARTITION"] == "batch"
    assert env["SLURM_EXTERNAL_NODES"] == ""
    assert env["SLURM_CHROOT"] == str(tmp_path / "trixie-root")


def test_slurm_conf_of_defaults_has_the_contract_nodes_and_partitions() -> None:
    lines = conf_lines(render_slurm_conf(Settings()))
    assert (
        "NodeName=batch-node-[0-1] NodeHostname=localhost NodeAddr=127.0.0.1 "
        "Port=[17000-17001] CPUs=8 RealMemory=16000 Gres=gpu:2 State=UNKNOWN"
    ) in lines
    assert "PartitionName=batch Nodes=batch-node-[0-1] MaxTime=INFINITE State=UP" in lines
    assert "NodeName=kube-node-[0-2] CPUs=8 RealMemory=16000 Gres=gpu:2 State=EXTERNAL" in lines
    assert (
        "PartitionName=slurm-bridge Nodes=kube-node-[0-2] Default=YES MaxTime=INFINITE State=UP"
    ) in lines
    assert "MaxNodeCount=261" in lines
    assert "ReturnToService=1" in lines
    assert "MailProg=/bin/true" in lines
    assert "AccountingStorageType=accounting_storage/none" in lines
    assert not any(ln.startswith("AccountingStorageTRES") for ln in lines)


def test_slurm_conf_ports_follow_the_settings() -> None:
    lines = conf_lines(render_slurm_conf(Settings(ctld_port=36817, slurmd_port=37000, nodes=1)))
    assert "SlurmctldPort=36817" in lines
    assert "SlurmdPort=37000" in lines
    assert any(ln.startswith("NodeName=batch-node-0 ") and "Port=37000 " in ln for ln in lines)


def test_slurm_conf_with_accounting_uses_slurmdbd_and_gpu_tres() -> None:
    files = render_conf_files(Settings(accounting=True, dbd_port=36819, mysql_port=33306))
    lines = conf_lines(files["slurm.conf"])
    assert "AccountingStorageType=accounting_storage/slurmdbd" in lines
    assert "AccountingStorageTRES=gres/gpu" in lines
    assert "AccountingStoragePort=36819" in lines
    assert "DbdPort=36819" in files["slurmdbd.conf"].splitlines()
    assert "openapi/slurmdbd" in files["slurmrestd.args"]


def test_extra_conf_lines_come_last() -> None:
    s = Settings(extra_conf=("EnforcePartLimits=ALL", "DefMemPerCPU=1000"))
    assert conf_lines(render_slurm_conf(s))[-2:] == ["EnforcePartLimits=ALL", "DefMemPerCPU=1000"]


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        pytest.param(
            Settings(),
            [
                "AutoDetect=off",
                "NodeName=batch-node-[0-1] Name=gpu File=/var/lib/fakegpu/gpu[0-1]",
                "NodeName=kube-node-[0-2] Name=gpu Count=2",
            ],
            id="defaults-devices-for-slurmd-count-for-external",
        ),
        pytest.param(Settings(node_gpus=0), ["AutoDetect=off"], id="no-gpus"),
        pytest.param(
            Settings(node_gpus=0, external_nodes=0, mig_nodes=2, mig_slices=3),
            [
                "AutoDetect=off",
                "NodeName=mig-node-[0-1] Name=gpu Type=1g.10gb File=/var/lib/fakegpu/mig[0-2]",
            ],
            id="mig-nodes-need-a-file-per-slice",
        ),
        pytest.param(
            Settings(node_gpus=0, external_nodes=0, mig_nodes=1, mig_full_gpus=1),
            [
                "AutoDetect=off",
                "NodeName=mig-node-0 Name=gpu Type=a100 File=/var/lib/fakegpu/mig0",
                "NodeName=mig-node-0 Name=gpu Type=1g.10gb File=/var/lib/fakegpu/mig[1-7]",
            ],
            id="mixed-mig-node-whole-gpu-first",
        ),
        pytest.param(
            Settings(node_gpus=1, external_nodes=0),
            ["AutoDetect=off", "NodeName=batch-node-[0-1] Name=gpu File=/var/lib/fakegpu/gpu0"],
            id="one-gpu-no-external",
        ),
    ],
)
def test_gres_conf(settings: Settings, expected: list[str]) -> None:
    assert render_gres_conf(settings).splitlines() == expected


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        pytest.param({"suite": "bookworm"}, "suite", id="unknown-suite"),
        pytest.param({"nodes": -1}, "nodes", id="negative-nodes"),
        pytest.param({"nodes": 0, "external_nodes": 0}, "nodes", id="no-nodes-at-all"),
        pytest.param({"rest_port": 70000}, "rest_port", id="port-out-of-range"),
        pytest.param({"slurmd_port": 65535, "nodes": 2}, "slurmd_port", id="slurmd-range-past-max"),
        pytest.param({"extra_conf": ("A=1\nB=2",)}, "extra_conf", id="extra-conf-two-lines"),
        pytest.param({"node_cpus": 0}, "node_cpus", id="zero-cpus"),
        pytest.param({"mig_slices": 8}, "mig_slices", id="more-than-7-mig-slices"),
        pytest.param({"mig_profile": "1g 10gb"}, "mig_profile", id="bad-mig-profile"),
        pytest.param({"mig_nodes": -1}, "mig_nodes", id="negative-mig-nodes"),
        pytest.param({"mig_full_gpus": 9}, "mig_full_gpus", id="too-many-whole-gpus"),
    ],
)
def test_bad_settings_name_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as e:
        Settings(**kwargs)  # type: ignore[arg-type]
    assert e.value.key == field


def test_resolve_keeps_saved_settings_and_applies_only_given_options() -> None:
    saved = Settings(nodes=5, extra_conf=("X=1",), rest_port=36820)
    s = resolve_settings(saved, {}, {"nodes": None, "external_nodes": 7, "extra_conf": None})
    assert (s.nodes, s.external_nodes, s.extra_conf, s.rest_port) == (5, 7, ("X=1",), 36820)


def test_resolve_port_env_vars_override_saved_and_options_override_everything() -> None:
    saved = Settings(rest_port=1111)
    env = {"SLURM_SANDBOX_REST_PORT": "36820", "SLURM_SANDBOX_SLURMD_PORT": "37000"}
    s = resolve_settings(saved, env, {"extra_conf": ["A=1"]})
    assert (s.rest_port, s.slurmd_port, s.extra_conf) == (36820, 37000, ("A=1",))


def test_resolve_rejects_a_non_numeric_port_variable_by_name() -> None:
    with pytest.raises(ConfigError) as e:
        resolve_settings(None, {"SLURM_SANDBOX_CTLD_PORT": "abc"}, {})
    assert e.value.key == "SLURM_SANDBOX_CTLD_PORT"


def test_settings_round_trip_through_json() -> None:
    s = Settings(nodes=3, accounting=True, extra_conf=("A=1",))
    assert Settings.from_json(s.to_json()) == s


def test_saved_settings_with_an_unknown_key_are_refused() -> None:
    with pytest.raises(ConfigError) as e:
        Settings.from_json({"nodes": 2, "bogus": 1})
    assert e.value.key == "bogus"


@pytest.mark.parametrize(
    ("versions", "newest"),
    [
        pytest.param(["v0.0.42", "v0.0.45", "v0.0.43"], "v0.0.45", id="unsorted"),
        pytest.param(["v0.0.9", "v0.0.10"], "v0.0.10", id="numeric-not-lexical"),
        pytest.param(["junk", "v0.0.40"], "v0.0.40", id="junk-ignored"),
    ],
)
def test_newest_api_version(versions: list[str], newest: str) -> None:
    assert newest_api_version(versions) == newest


def test_newest_api_version_of_nothing_is_an_error() -> None:
    with pytest.raises(ConfigError):
        newest_api_version([])


def test_parse_facts_reads_the_script_output() -> None:
    out = "SLURM_VERSION=26.05.5-1\nSLURM_API_VERSIONS=v0.0.42 v0.0.45 \n"
    assert parse_facts(out) == ("26.05.5-1", ["v0.0.42", "v0.0.45"])


def test_parse_env_file_rejects_a_line_without_equals_naming_the_line() -> None:
    with pytest.raises(ConfigError) as e:
        parse_env_file("A=1\nnonsense\n")
    assert e.value.key == "line 2"


@given(
    st.dictionaries(
        st.from_regex(r"[A-Z_][A-Z0-9_]{0,20}", fullmatch=True),
        st.from_regex(r"[^\n\r=#\s]*", fullmatch=True).filter(lambda v: v == v.strip()),
        max_size=10,
    )
)
def test_parse_env_file_round_trips_key_value_lines(values: dict[str, str]) -> None:
    text = "".join(f"{k}={v}\n" for k, v in values.items())
    assert parse_env_file(text) == values


def test_write_atomic_creates_a_private_file_from_the_start(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "jwt"
    write_atomic(target, "secret\n", 0o600)
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
    assert target.read_text() == "secret\n"
    assert [p.name for p in target.parent.iterdir()] == ["jwt"]


def test_paths_follow_the_sandbox_dir_variable(tmp_path: Path) -> None:
    paths = Paths.from_env({"SLURM_BRIDGE_SANDBOX_DIR": str(tmp_path)})
    assert paths.env_file == tmp_path / "cluster.env"
    assert paths.cache(Settings(accounting=True)) == tmp_path / "cache" / "sid-acct-root.tar.zst"


def test_paths_default_to_the_users_cache() -> None:
    assert Paths.from_env({}).dir == Path("~/.cache/slurm-bridge/slurm").expanduser()


def test_tests_get_their_own_sandbox_dir_and_ports_never_the_default_one() -> None:
    env = env_for_tests({})
    assert (
        Path(env["SLURM_BRIDGE_SANDBOX_DIR"])
        == Path("~/.cache/slurm-bridge/test-slurm").expanduser()
    )
    assert Path(env["SLURM_SANDBOX_ENV"]) == Path(env["SLURM_BRIDGE_SANDBOX_DIR"]) / "cluster.env"
    ports = {int(v) for k, v in env.items() if k.endswith("_PORT")}
    assert len(ports) == 5
    assert not ports & {Settings().rest_port, Settings().ctld_port, Settings().slurmd_port}
    assert not ports & {Settings().dbd_port, Settings().mysql_port}


@pytest.mark.parametrize(
    ("exported", "kept"),
    [
        pytest.param({"SLURM_BRIDGE_SANDBOX_DIR": "/x"}, "SLURM_BRIDGE_SANDBOX_DIR", id="own-dir"),
        pytest.param({"SLURM_SANDBOX_REST_PORT": "1"}, "SLURM_SANDBOX_REST_PORT", id="own-port"),
        pytest.param({"SLURM_SANDBOX_ENV": "/e/cluster.env"}, "SLURM_SANDBOX_ENV", id="own-env"),
    ],
)
def test_variables_the_caller_exported_are_kept(exported: dict[str, str], kept: str) -> None:
    assert kept not in env_for_tests(exported)


def test_a_chosen_sandbox_dir_keeps_its_saved_ports_and_names_its_env_file() -> None:
    env = env_for_tests({"SLURM_BRIDGE_SANDBOX_DIR": "/sbx"})
    assert env == {"SLURM_SANDBOX_ENV": "/sbx/cluster.env"}
    assert env_file_for_tests({"SLURM_BRIDGE_SANDBOX_DIR": "/sbx"}) == Path("/sbx/cluster.env")


def test_mig_nodes_are_created_at_run_time_and_join_the_external_partition_by_feature(
    tmp_path: Path,
) -> None:
    s = Settings(external_nodes=1, mig_nodes=2, mig_profile="3g.40gb", mig_slices=2)
    conf = conf_lines(render_slurm_conf(s))
    assert "NodeSet=mignodes Feature=mig" in conf
    assert not [ln for ln in conf if ln.startswith("NodeName=mig-node")]  # dynamic only
    (part,) = [ln for ln in conf if ln.startswith("PartitionName=slurm-bridge ")]
    assert "Nodes=kube-node-0,mignodes " in part
    env = script_env(s, Paths(tmp_path), {})
    assert env["SBX_MIG_NODES"] == "mig-node-0 mig-node-1"
    assert env["SBX_MIG_NODE_CONF"] == (
        "NodeAddr=127.0.0.1 NodeHostname=localhost State=EXTERNAL CPUs=8 RealMemory=16000 "
        "Gres=gpu:3g.40gb:2 Features=mig"
    )
    out = parse_env_file(render_env_file(s, Paths(tmp_path), "v0.0.45", "26.05.5-1"))
    assert out["SLURM_EXTERNAL_NODES"] == "kube-node-0,mig-node-[0-1]"
    assert (out["SLURM_MIG_NODES"], out["SLURM_MIG_GRES"]) == ("mig-node-[0-1]", "gpu:3g.40gb:2")
    assert script_env(Settings(), Paths(tmp_path), {})["SBX_MIG_NODES"] == ""
    mixed = Settings(external_nodes=0, mig_nodes=1, mig_full_gpus=1)
    assert (
        "Gres=gpu:a100:1,gpu:1g.10gb:7 "
        in script_env(mixed, Paths(tmp_path), {})["SBX_MIG_NODE_CONF"]
    )


def test_script_env_passes_nodes_ports_and_packages(tmp_path: Path) -> None:
    env = script_env(Settings(accounting=True, rest_port=36820), Paths(tmp_path), {})
    assert env["SBX_SLURMD_NODES"] == "batch-node-0 batch-node-1"
    assert env["SBX_REST_PORT"] == "36820"
    assert env["SBX_ROOT"] == str(tmp_path / "sid-acct-root")
    assert "mariadb-server" in env["SBX_PACKAGES"].split(",")
    assert env["SBX_OPENAPI"] == "openapi/slurmctld,openapi/slurmdbd"


@pytest.mark.parametrize(
    ("argv", "attr", "value"),
    [
        pytest.param(["up", "--nodes", "4"], "nodes", 4, id="nodes"),
        pytest.param(["up", "--external-nodes", "0"], "external_nodes", 0, id="external"),
        pytest.param(["up", "--accounting"], "accounting", True, id="accounting"),
        pytest.param(["up", "--mig-nodes", "1"], "mig_nodes", 1, id="mig-nodes"),
        pytest.param(["up", "--mig-profile", "2g.20gb"], "mig_profile", "2g.20gb", id="mig-prof"),
        pytest.param(["up"], "accounting", None, id="accounting-unset-keeps-saved"),
        pytest.param(
            ["up", "--extra-conf", "A=1", "--extra-conf", "B=2"],
            "extra_conf",
            ["A=1", "B=2"],
            id="extra-conf-repeatable",
        ),
        pytest.param(["down", "--purge"], "purge", True, id="down-purge"),
        pytest.param(["exec", "--", "squeue", "-h"], "argv", ["squeue", "-h"], id="exec"),
    ],
)
def test_parser(argv: list[str], attr: str, value: object) -> None:
    ns = build_parser().parse_args(argv)
    got = getattr(ns, attr)
    if attr == "argv":
        got = got[1:] if got[:1] == ["--"] else got
    assert got == value


def test_parser_rejects_an_unknown_suite() -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["up", "--suite", "bookworm"])
