"""`slurm-bridge admission --config FILE` as a real process: serves HTTPS, stops on SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import aiohttp
import trustme
import yaml

from tests.admission_helpers import make_pod, make_review


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_missing_certificate_exits_1_naming_the_key(tmp_path: Path) -> None:
    # a real process: main() configures logging globally, which must not leak into other tests
    cfg = tmp_path / "c.yaml"
    # nodeGuard off: it reads nodes, and this process has no Kubernetes credentials
    admission = {"tlsCertFile": str(tmp_path / "none.crt"), "nodeGuard": False}
    cfg.write_text(yaml.safe_dump({"admission": admission}))
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from admission.app import main; sys.exit(main(sys.argv[1:]))",
            "--config",
            str(cfg),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "admission.tlsCertFile" in done.stderr


async def test_cli_serves_the_webhook_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "127.0.0.1")
    cert.private_key_pem.write_to_path(str(tmp_path / "tls.key"))
    (tmp_path / "tls.crt").write_bytes(b"".join(p.bytes() for p in cert.cert_chain_pems))
    port, metrics = free_port(), free_port()
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "metricsPort": metrics,
                "healthPort": metrics,
                "admission": {
                    "port": port,
                    "bindAddress": "127.0.0.1",
                    "tlsCertFile": str(tmp_path / "tls.crt"),
                    "tlsKeyFile": str(tmp_path / "tls.key"),
                    "nodeGuard": False,  # it reads nodes: no Kubernetes credentials here
                },
            }
        )
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bridge",
        "admission",
        "--config",
        str(cfg),
        stderr=asyncio.subprocess.PIPE,
    )
    tls = ssl.create_default_context()
    ca.configure_trust(tls)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    try:
        async with aiohttp.ClientSession() as s:
            while True:
                try:
                    async with s.get(f"https://localhost:{port}/readyz", ssl=tls) as r:
                        if r.status == 200:
                            break
                except aiohttp.ClientConnectorError:
                    pass
                assert proc.returncode is None, "admission exited early"
                assert loop.time() < deadline, "admission did not become ready"
                await asyncio.sleep(0.05)
            body = make_review(make_pod(), uid="cli-1")
            async with s.post(f"https://localhost:{port}/mutate", json=body, ssl=tls) as r:
                out = await r.json()
            assert out["response"]["uid"] == "cli-1"
            assert "patch" in out["response"]
            async with s.get(f"http://127.0.0.1:{metrics}/metrics") as r:
                assert "slurm_bridge_admission_reviews_total" in await r.text()
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()
    events = err.decode()
    assert '"event": "admission_started"' in events
    assert '"event": "admission_stopped"' in events
