"""``slurm-bridge sandbox kube-api up|status|down``: a daemonized server with pidfile,
log and kubeconfig under $SLURM_BRIDGE_SANDBOX_DIR/kube-api."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import yaml


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bridge", "sandbox", "kube-api", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_cli_up_status_down_serves_nodes_from_the_kubeconfig(tmp_path: Path) -> None:
    env = {**os.environ, "SLURM_BRIDGE_SANDBOX_DIR": str(tmp_path)}
    kc = tmp_path / "kubeconfig"
    up = _run(
        env, "up", "--port", "0", "--kubeconfig", str(kc), "--nodes", "kn-0,kn-1", "--kubelet"
    )
    try:
        assert up.returncode == 0, up.stderr
        state = tmp_path / "kube-api"
        assert (state / "kube-api.pid").exists()
        assert (state / "kube-api.log").exists()
        status = _run(env, "status")
        assert status.returncode == 0
        assert "running" in status.stdout
        cfg = yaml.safe_load(kc.read_text())
        server = cfg["clusters"][0]["cluster"]["server"]
        assert cfg["users"][0]["user"]["token"]
        token = cfg["users"][0]["user"]["token"]
        req = urllib.request.Request(
            f"{server}/api/v1/nodes", headers={"Authorization": f"Bearer {token}"}
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            nodes = json.loads(r.read())
        assert [n["metadata"]["name"] for n in nodes["items"]] == ["kn-0", "kn-1"]
        # a kubeconfig for another user: a token the running server knows
        job_kc = tmp_path / "job-controller.kubeconfig"
        made = _run(
            env,
            "kubeconfig",
            "--user",
            "system:serviceaccount:kube-system:job-controller",
            "--output",
            str(job_kc),
        )
        assert made.returncode == 0, made.stdout + made.stderr
        job_cfg = yaml.safe_load(job_kc.read_text())
        assert job_cfg["clusters"] == cfg["clusters"]
        assert job_cfg["users"][0]["name"] == "system:serviceaccount:kube-system:job-controller"
        assert job_cfg["users"][0]["user"]["token"] != cfg["users"][0]["user"]["token"]
    finally:
        down = _run(env, "down")
    assert down.returncode == 0
    assert _run(env, "status").returncode == 1
