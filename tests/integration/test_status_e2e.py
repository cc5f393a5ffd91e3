"""``slurm-bridge status`` end to end: real slurmrestd 26.05, the sandbox Kubernetes API
server and the scheduler (tests/integration/bridge_harness.py); also as the kubectl plugin.

Each test has its own mcsLabel, so only its own jobs are the bridge's in its eyes.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from bridge.config import BridgeConfig
from bridge.kube.client import KubeClient
from bridge.kube.resources import PODS
from bridge.models import GroupId, JobSpec
from bridge.slurm.client import SlurmClient
from bridge.slurm.token import TokenProvider
from bridge.status.cli import run
from bridge.status.view import Output
from bridge.translate import admin_comment
from bridge.wellknown import LABEL_JOB_ID
from tests.bench.scheduler_child import CountingSlurmClient
from tests.clients import api_version, kube_for_host
from tests.integration.bridge_harness import (
    NS,
    Bridge,
    job_of,
    kubectl_plugin,
    pod,
    podgroup,
    running_bridge,
)
from tests.integration.conftest import SlurmSandbox
from tests.integration.controller_harness import unique_mcs

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]
GONE_JOB = 999_999_999  # a job id Slurm never gave


async def make_scene(b: Bridge) -> tuple[int, int]:
    """A bound gang, a waiting group, an orphan job and a stray pod: (gang job, orphan)."""
    names = await podgroup(b, "st-a", 2)
    for n in names:
        await b.bound(n)
    await podgroup(b, "st-w", 2, members=1)

    async def told_it_waits() -> str:
        msg = await b.scheduled_message("st-w-0")
        return msg if "1 of 2" in msg else ""

    await b.wait_for("st-w's waiting condition", told_it_waits)
    orphan = await b.slurm.submit(
        JobSpec(
            name="st-orphan",
            partition=b.cfg.partition,
            min_nodes=1,
            tasks=1,
            exclusive=False,
            mcs_label=b.cfg.mcs_label,
            admin_comment=admin_comment(
                GroupId(kind="PodGroup", namespace=NS, name="st-lost", uid="lost"),
                [f"{NS}/st-lost-0"],
            ),
        )
    )
    stray = pod("st-stray", labels={LABEL_JOB_ID: str(GONE_JOB)})
    stray["spec"]["nodeName"] = b.api.store.list(("", "nodes"))[0]["metadata"]["name"]
    await b.kube.create(PODS, stray, NS)
    gang = job_of(await b.get_pod(names[0]))
    return gang, orphan


async def status(
    cfg: BridgeConfig, output: Output, kube: KubeClient, slurm: SlurmClient | None = None
) -> tuple[int, str, str]:
    """``slurm-bridge status -n slurm-bridge -o OUTPUT``: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code = await run(
        cfg,
        namespace=NS,
        all_namespaces=False,
        output=output,
        out=out,
        err=err,
        kube=kube,
        slurm=slurm,
    )
    return code, out.getvalue(), err.getvalue()


def counting_slurm(sandbox: SlurmSandbox, cfg: BridgeConfig) -> CountingSlurmClient:
    return CountingSlurmClient(
        cfg.slurm_rest_api,
        TokenProvider(sandbox.jwt_file, sandbox.user),
        request_timeout_seconds=10,
    )


async def test_status_joins_groups_and_jobs_with_one_pod_list_and_one_job_list(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    async with running_bridge(sandbox, tmp_path, mcsLabel=unique_mcs()) as b:
        gang, orphan = await make_scene(b)
        await b.stop_scheduler()  # every request the API server sees now is the status's
        try:
            async with counting_slurm(sandbox, b.cfg) as slurm:
                await api_version(slurm)
                slurm.calls.clear()
                b.api.request_log.clear()
                code, out, err = await status(b.cfg, "json", b.kube, slurm)
                # a fixed cost, whatever the number of groups
                assert dict(slurm.calls) == {"jobs_get": 1}
                kube_calls = b.api.request_log.entries()
                assert [(e.method, e.path) for e in kube_calls] == [
                    ("GET", f"/api/v1/namespaces/{NS}/pods")
                ]
                assert "spec.schedulerName" in kube_calls[0].query
        finally:
            await b.slurm.cancel(orphan)
    assert code == 0, err
    doc = json.loads(out)
    rows = {g["group"]: g for g in doc["groups"]}
    assert rows["PodGroup/st-a"]["jobId"] == gang
    assert rows["PodGroup/st-a"]["state"] == "RUNNING"
    assert (rows["PodGroup/st-a"]["podsBound"], rows["PodGroup/st-a"]["podsTotal"]) == (2, 2)
    assert rows["PodGroup/st-a"]["nodes"] != "-"
    assert rows["PodGroup/st-w"]["jobId"] is None
    assert "1 of 2 pods exist" in rows["PodGroup/st-w"]["reason"]
    assert [j["jobId"] for j in doc["orphanJobs"]] == [orphan]
    assert [(p["name"], p["jobId"]) for p in doc["strayPods"]] == [("st-stray", GONE_JOB)]
    assert doc["errors"] == []


async def test_status_shows_the_side_it_can_read_and_names_the_one_it_cannot(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    async with running_bridge(sandbox, tmp_path, mcsLabel=unique_mcs()) as b:
        names = await podgroup(b, "st-b", 1)
        await b.bound(names[0])
        job = job_of(await b.get_pod(names[0]))
        # Slurm unreachable: a closed port
        no_slurm = b.cfg.model_copy(update={"slurm_rest_api": "http://127.0.0.1:9"})
        code, out, err = await status(no_slurm, "table", b.kube)
        assert code == 1
        assert "PodGroup/st-b" in out
        assert f" {job} " in out
        assert err.startswith("error: Slurm (http://127.0.0.1:9): cannot list jobs")
        # Kubernetes unreachable: the active bridge jobs are still shown
        async with kube_for_host("http://127.0.0.1:9", request_timeout=5) as dead:
            code, out, err = await status(b.cfg, "table", dead)
        assert code == 1
        row = next(line for line in out.splitlines() if "PodGroup/st-b" in line)
        assert row.split()[1:4] == ["?/?", str(job), "RUNNING"]
        assert err.startswith("error: Kubernetes: cannot list pods")


async def test_kubectl_slurm_bridge_status_runs_the_plugin_with_the_components_config(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    async with running_bridge(sandbox, tmp_path, mcsLabel=unique_mcs()) as b:
        names = await podgroup(b, "st-k", 1)
        await b.bound(names[0])
        proc = await kubectl_plugin(b, tmp_path, "status", "-A", "-o", "wide")
    assert proc.returncode == 0, proc.stderr
    header, *rows = proc.stdout.splitlines()
    assert header.split()[:2] == ["NAMESPACE", "GROUP"]
    row = next(r.split() for r in rows if "PodGroup/st-k" in r)
    assert row[0] == NS
    assert row[2] == "1/1"
    assert row[-1] == names[0]
