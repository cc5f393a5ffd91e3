"""The README's demo (``slurm-bridge sandbox demo up``, what ``deploy/demo.sh`` runs) against
the real Slurm sandbox: the sandbox API server, the admission webhook, the scheduler and the
controller run as processes, kubectl applies the seed examples, and each step's outcome is
asserted. Every wait inside the driver has a deadline; ``down`` runs even when a step fails.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge.wellknown import MANAGED_NODE_TAINT
from sandbox.demo import Demo, DemoEnv, DemoResult
from tests.integration.conftest import SlurmSandbox, env_path

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]


@pytest.fixture
def demo_run(sandbox: SlurmSandbox, tmp_path: Path) -> Iterator[tuple[DemoResult, str]]:
    env = DemoEnv.load({**os.environ, "SLURM_SANDBOX_ENV": str(env_path())}, str(tmp_path))
    out = io.StringIO()
    demo = Demo(env, out=out)
    try:
        result = demo.up()
        yield result, out.getvalue()
    finally:
        demo.down(quiet=True)


def test_demo_runs_every_seed_example_with_slurm_deciding(
    demo_run: tuple[DemoResult, str], sandbox: SlurmSandbox
) -> None:
    result, output = demo_run
    nodes = set(sandbox.external_nodes)

    # the pause pod: bound to a Slurm node, through the admission webhook
    assert result.bound["pause"] in nodes, output
    assert any(t.get("key") == MANAGED_NODE_TAINT for t in result.tolerations["pause"])

    # pg-1: ONE Slurm job on 2 distinct nodes
    assert result.job_ids["pg-1-a"] == result.job_ids["pg-1-b"]
    assert len({result.bound["pg-1-a"], result.bound["pg-1-b"]}) == 2

    # pg-2 waited with Slurm's reason Resources, and ran once pg-1 finished
    for name in ("pg-2-a", "pg-2-b"):
        assert "Resources" in result.waiting_messages[name]
        assert f"Slurm job {result.job_ids[name]} is pending" in result.waiting_messages[name]
    pending = result.squeue["pg-2-pending"]
    assert "PENDING" in pending
    assert "(Resources)" in pending
    assert result.job_ids["pg-2-a"] != result.job_ids["pg-1-a"]
    # `slurm-bridge status` showed both groups beside their jobs
    rows = {r.split()[0]: r.split()[1:5] for r in result.status["pg-2-pending"].splitlines()}
    assert rows["PodGroup/pg-1"] == ["2/2", str(result.job_ids["pg-1-a"]), "RUNNING", "None"]
    assert rows["PodGroup/pg-2"] == ["0/2", str(result.job_ids["pg-2-a"]), "PENDING", "Resources"]

    # the JobSet and the LWS: one job each, every pod on its own node, leader first
    js = [n for n in result.bound if n.startswith("js-1-")]
    assert len(js) == 3
    assert len({result.job_ids[n] for n in js}) == 1
    # the driver and the workers are one hetjob: squeue lists its components
    het = result.job_ids["js-1-driver-0-x0"]
    assert f"{het}+0" in result.squeue["jobset"], result.squeue["jobset"]
    assert f"{het}+1" in result.squeue["jobset"], result.squeue["jobset"]
    # a sandbox with MIG nodes (--mig-nodes): each claim names a slice of its pod's profile
    for claim, device in result.mig_claims.items():
        profile = claim.split("-mig-")[0].removeprefix("mig-").rsplit("-", 1)[0]
        assert f"-mig-{profile.replace('-', '')}-" in device, (claim, device)
    lws = ["lws-1-0", "lws-1-0-1", "lws-1-0-2"]
    assert len({result.job_ids[n] for n in lws}) == 1
    assert {result.bound[n] for n in lws} == nodes
    assert result.bound["lws-1-0"] == sorted(nodes)[0]

    # squeue showed each step's job, and the last one RUNNING
    for step, job_pod in (("pause", "pause"), ("pg-1", "pg-1-a"), ("lws", "lws-1-0")):
        assert str(result.job_ids[job_pod]) in result.squeue[step], (step, result.squeue)
    assert "RUNNING" in result.squeue["lws"]
    # it ends with every node free: the LWS finished, its job ended
    assert str(result.job_ids["lws-1-0"]) not in result.squeue["free"]
    # the commands it shows are the ones it ran, pasteable as they are
    assert "$ kubectl get pods -n slurm-bridge -o wide" in output
    assert "$ slurm-bridge sandbox slurm exec -- squeue -p slurm-bridge -o '%.6i" in output
    assert "export KUBECONFIG=" in output
    # the Job/JobSet/LWS pods came from the stand-in watching the applied objects
    assert "(controller stand-in) created the pods of JobSet js-1" in output
