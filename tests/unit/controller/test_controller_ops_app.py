"""The controller's ops endpoints: health, readiness and the per-component metrics."""

from __future__ import annotations

from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer

from bridge.ops import OpsServer, readiness
from controller.app import ControllerMetrics, main


async def test_readyz_follows_readiness_and_metrics_count_corrections_by_kind() -> None:
    metrics = ControllerMetrics()
    ready = {"v": False}
    app = OpsServer(metrics.registry, ready=readiness(lambda: ready["v"])).app()
    async with TestClient(TestServer(app)) as client:
        assert (await client.get("/healthz")).status == 200
        assert (await client.get("/readyz")).status == 503
        ready["v"] = True
        assert (await client.get("/readyz")).status == 200
        metrics.corrected("job_cancelled")
        metrics.corrected("job_cancelled")
        text = await (await client.get("/metrics")).text()
    assert 'slurm_bridge_controller_drift_corrections_total{kind="job_cancelled"} 2.0' in text


def test_two_components_do_not_share_a_registry() -> None:
    a, b = ControllerMetrics(), ControllerMetrics()
    a.corrected("pod_failed")
    assert b.registry is not a.registry


def test_main_rejects_a_bad_config_file_with_exit_code_2(tmp_path: Path) -> None:
    bad = tmp_path / "c.yaml"
    bad.write_text("controller:\n  jobEndedPodPolicy: explode\n")
    assert main(["--config", str(bad)]) == 2
