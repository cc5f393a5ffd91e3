"""``slurm-bridge sandbox slurm`` against the running sandbox (found through its env file).

These tests leave the cluster as they found it: up, same daemons' settings, no jobs of theirs.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sandbox.slurm.launcher import env_file_for_tests, parse_env_file
from tests.integration.conftest import sandbox_cli

pytestmark = pytest.mark.slurm

CONTRACT_KEYS = (
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
)
DEADLINE_SECONDS = 30.0


@dataclass(frozen=True)
class Sandbox:
    env_file: Path
    env: dict[str, str]

    @property
    def dir(self) -> Path:
        return Path(self.env.get("SLURM_SANDBOX_DIR") or self.env_file.parent)

    @property
    def chroot(self) -> Path:
        return Path(self.env["SLURM_CHROOT"])

    def token(self) -> str:
        return Path(self.env["SLURM_JWT_FILE"]).read_text().strip()

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``slurm-bridge sandbox slurm ARGS`` on this sandbox, with its saved settings."""
        return sandbox_cli(self.dir, *args)

    def pid(self, pidfile: str) -> int:
        return int((self.chroot / pidfile.lstrip("/")).read_text().strip())

    def rest(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        req = urllib.request.Request(
            f"{self.env['SLURM_REST_URL']}/slurm/{self.env['SLURM_API_VERSION']}/{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={
                "X-SLURM-USER-NAME": self.env["SLURM_USER"],
                "X-SLURM-USER-TOKEN": self.token(),
                "Content-Type": "application/json",
            },
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def rest_answers(self) -> bool:
        try:
            self.rest("GET", "jobs/state/")
        except (urllib.error.URLError, OSError):
            return False
        return True


def poll(what: str, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)


@pytest.fixture
def sandbox() -> Sandbox:
    if os.geteuid() != 0:
        pytest.fail("the Slurm sandbox needs root", pytrace=False)
    env_file = env_file_for_tests(os.environ)
    if not env_file.exists():
        pytest.fail(
            f"no Slurm sandbox env file at {env_file} (run: slurm-bridge sandbox slurm up)",
            pytrace=False,
        )
    sbx = Sandbox(env_file, parse_env_file(env_file.read_text()))
    if "SLURM_JWT_FILE" not in sbx.env:
        pytest.fail(f"{env_file} is not a slurm-bridge sandbox env file", pytrace=False)
    return sbx


@pytest.fixture
def external_job(sandbox: Sandbox) -> Iterator[int]:
    """One external placeholder job on one node of the sandbox partition; cancelled after."""
    body = {
        "job": {
            "name": "test-sandbox-placeholder",
            "partition": sandbox.env["SLURM_PARTITION"],
            "nodes": "1",
            "flags": ["EXTERNAL_JOB"],
            "tasks_per_node": 1,
            "cpus_per_task": 1,
            "memory_per_node": {"set": True, "number": 100},
            "time_limit": {"set": True, "number": 10},
            "current_working_directory": "/tmp",
            "environment": ["PATH=/usr/bin:/bin"],
        }
    }
    job_id = int(sandbox.rest("POST", "job/submit", body)["job_id"])
    try:
        yield job_id
    finally:
        sandbox.rest("DELETE", f"job/{job_id}")


def job_state(sandbox: Sandbox, job_id: int) -> tuple[list[str], str]:
    job = sandbox.rest("GET", f"job/{job_id}")["jobs"][0]
    return list(job["job_state"]), str(job["nodes"])


def test_status_reports_up_and_prints_a_well_formed_env_file(sandbox: Sandbox) -> None:
    proc = sandbox.cli("status")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for key in CONTRACT_KEYS:
        assert key in sandbox.env, key
        assert f"{key}=" in proc.stdout
    assert sandbox.env["SLURM_REST_URL"].startswith("http://127.0.0.1:")
    assert sandbox.env["SLURM_API_VERSION"].startswith("v0.0.")
    assert (sandbox.chroot / "etc/slurm/slurm.conf").is_file()
    assert sandbox.rest_answers()


def test_token_file_is_0600_and_up_never_prints_the_token(sandbox: Sandbox) -> None:
    before = sandbox.token()
    proc = sandbox.cli("up")
    assert proc.returncode == 0, proc.stderr
    after = sandbox.token()
    mode = stat.S_IMODE(os.stat(sandbox.env["SLURM_JWT_FILE"]).st_mode)
    assert mode == 0o600
    for token in (before, after):
        assert token not in proc.stdout
        assert token not in proc.stderr
    assert "SLURM_JWT=" not in proc.stdout


def test_second_up_on_a_running_cluster_restarts_nothing(sandbox: Sandbox) -> None:
    ctld, rest = sandbox.pid("/run/slurmctld.pid"), sandbox.pid("/run/slurmrestd.pid")
    proc = sandbox.cli("up")
    assert proc.returncode == 0, proc.stderr
    assert (sandbox.pid("/run/slurmctld.pid"), sandbox.pid("/run/slurmrestd.pid")) == (ctld, rest)
    assert "starting" not in proc.stderr
    assert parse_env_file(sandbox.env_file.read_text()) == sandbox.env


def mounts_under(root: Path) -> dict[str, str]:
    """The file systems mounted at or below ``root``: mount point -> type."""
    out: dict[str, str] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        point = fields[4].replace("\\040", " ")
        fstype = fields[fields.index("-") + 1]
        if point == str(root) or point.startswith(f"{root}/"):
            out[point] = fstype  # a later mount on the same point hides the earlier
    return out


def test_the_roots_dev_and_sys_are_its_own_so_deleting_the_root_cannot_touch_the_hosts(
    sandbox: Sandbox,
) -> None:
    # the host's /dev bound into the root would put the machine's device nodes (one
    # devtmpfs) and its cgroups under the sandbox dir, where an rm -rf deletes them; `up`
    # also swaps a root mounted that way by an older script for its own mounts
    proc = sandbox.cli("up")
    assert proc.returncode == 0, proc.stderr
    mounts = mounts_under(sandbox.chroot)
    root = str(sandbox.chroot)
    assert mounts[f"{root}/dev"] == "tmpfs"
    assert mounts[f"{root}/sys"] == "sysfs"
    assert "devtmpfs" not in mounts.values()
    assert not [p for p in mounts if p.startswith(f"{root}/sys/")], mounts
    for node in ("null", "zero", "urandom", "random", "tty"):
        assert (sandbox.chroot / "dev" / node).is_char_device(), node
    # and what runs in the root still reads them
    proc = sandbox.cli("exec", "--", "sh", "-c", "head -c 4 /dev/urandom | wc -c >/dev/null")
    assert proc.returncode == 0, proc.stderr
    assert sandbox.rest_answers()


def test_exec_sinfo_lists_the_external_nodes(sandbox: Sandbox) -> None:
    names = sandbox.cli("exec", "--", "scontrol", "show", "hostnames")
    expected = sandbox.cli(
        "exec", "--", "scontrol", "show", "hostnames", sandbox.env["SLURM_EXTERNAL_NODES"]
    )
    assert names.returncode == 0
    proc = sandbox.cli("exec", "--", "sinfo", "-h", "-N", "-p", sandbox.env["SLURM_PARTITION"])
    assert proc.returncode == 0, proc.stderr
    listed = {line.split()[0] for line in proc.stdout.splitlines()}
    assert listed == set(expected.stdout.split())


def test_exec_passes_the_commands_exit_code(sandbox: Sandbox) -> None:
    assert sandbox.cli("exec", "--", "scontrol", "show", "job", "999999999").returncode != 0


def test_restart_ctld_keeps_a_running_external_job(sandbox: Sandbox, external_job: int) -> None:
    poll("the job to run", lambda: job_state(sandbox, external_job)[0] == ["RUNNING"])
    _, nodes = job_state(sandbox, external_job)
    ctld = sandbox.pid("/run/slurmctld.pid")

    proc = sandbox.cli("restart-ctld")

    assert proc.returncode == 0, proc.stderr
    assert sandbox.pid("/run/slurmctld.pid") != ctld
    assert job_state(sandbox, external_job) == (["RUNNING"], nodes)


def test_rest_stop_makes_slurmrestd_unreachable_until_rest_start(sandbox: Sandbox) -> None:
    try:
        assert sandbox.cli("rest-stop").returncode == 0
        assert not sandbox.rest_answers()
        assert sandbox.cli("status").returncode == 3
    finally:
        proc = sandbox.cli("rest-start")
    assert proc.returncode == 0, proc.stderr
    assert sandbox.rest_answers()
