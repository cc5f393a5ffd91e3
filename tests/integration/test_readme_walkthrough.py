"""The README's "Try it yourself" walk-through, typed as a user would, against a demo of its
own in the tests' Slurm sandbox (never the demo a user may have running).

The commands are read from README.md (between ``<!-- walkthrough -->`` markers) and run one
by one with bash from the checkout, with only the sandbox dir replaced by the tests' one.
Like a user watching ``kubectl get pods``, the test waits for the pods to be bound before
the first ``finish-pod``.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.demo import Demo, DemoEnv
from tests.integration.conftest import SlurmSandbox, env_path

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]

REPO = Path(__file__).resolve().parents[2]
DEMO_DEFAULT_DIR = "~/.cache/slurm-bridge/slurm"
SANDBOX_EXPORT = re.compile(r"^export SLURM_BRIDGE_SANDBOX_DIR=(\S+)")
POD_NAMES = [f"indexed-1-{i}-x{i}" for i in range(4)]


def walkthrough_commands(readme: str) -> list[str]:
    """The shell lines of the README's walk-through block (comments stripped)."""
    m = re.search(r"<!-- walkthrough -->\s*```sh\n(.*?)```\s*<!-- /walkthrough -->", readme, re.S)
    assert m, "README.md has no <!-- walkthrough --> sh block"
    return [line.strip() for line in m.group(1).splitlines() if line.strip()]


@pytest.fixture
def demo(sandbox: SlurmSandbox) -> Iterator[Demo]:
    env = DemoEnv.load({**os.environ, "SLURM_SANDBOX_ENV": str(env_path())})
    d = Demo(env, out=io.StringIO())
    try:
        d.up()
        yield d
    finally:
        d.down(quiet=True)


def run(exports: list[str], line: str) -> str:
    proc = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + "\n".join([*exports, line])],
        cwd=REPO,
        env={k: v for k, v in os.environ.items() if k not in ("KUBECONFIG",)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, f"`{line}` failed ({proc.returncode}): {proc.stderr}"
    return proc.stdout


def test_walkthrough_block_names_the_demos_default_sandbox_dir() -> None:
    lines = walkthrough_commands((REPO / "README.md").read_text())
    dirs = [m.group(1) for line in lines if (m := SANDBOX_EXPORT.match(line))]
    assert dirs == [DEMO_DEFAULT_DIR]


def test_readme_walkthrough_runs_as_typed_and_its_slurm_job_ends(
    demo: Demo, sandbox: SlurmSandbox
) -> None:
    exports: list[str] = []
    outputs: dict[str, str] = {}
    for line in walkthrough_commands((REPO / "README.md").read_text()):
        line = SANDBOX_EXPORT.sub(f"export SLURM_BRIDGE_SANDBOX_DIR={sandbox.sandbox_dir}", line)
        if line.startswith("export "):
            exports.append(line)
            continue
        if "finish-pod" in line and not outputs.get("bound"):
            demo.wait_bound(POD_NAMES)  # the user waits until `get pods` shows them Running
            outputs["bound"] = "yes"
        outputs[line] = run(exports, line)

    squeue = [out for line, out in outputs.items() if "squeue" in line]
    assert "indexed-" in squeue[0], squeue[0]  # the gang's ONE Slurm job, while it ran
    assert len({demo.result.job_ids[n] for n in POD_NAMES}) == 1
    job_id = str(demo.result.job_ids[POD_NAMES[0]])
    # every pod finished: the controller cancels the job (the README's last squeue shows it
    # gone once the controller has acted; here we wait for that)
    demo.wait_jobs_gone(POD_NAMES)
    listed = demo.squeue("-h", "-p", sandbox.partition, "-o", "%i").split()
    assert job_id not in listed
