"""Capture real slurmrestd payloads into tests/golden/slurmrestd/<version>/.

Usage (against a sandbox; reads the contract env file, default
``~/.cache/slurm-bridge/slurm/cluster.env``, override with SLURM_SANDBOX_ENV):

    SLURM_SANDBOX_ENV=/root/.cache/ref-slurm/contract.env \\
        .venv/bin/python tests/golden/capture.py v0.0.43 v0.0.44

For each version it submits one external job (2 nodes of SLURM_PARTITION), waits for
RUNNING, saves submit request/response, job get, jobs list, jobs/state, nodes,
partitions, then the error cases (bad partition, too much memory, unknown job), and the
two DELETE shapes (cancel, already completed). It cancels its job before leaving.
Stdlib only. The token is sent as a header and never written: every file is checked
for it before it is saved (the script aborts if it ever appears).
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent / "slurmrestd"


def read_env(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


class Rest:
    def __init__(self, url: str, token: str, user: str) -> None:
        self.url, self.token, self.user = url.rstrip("/"), token, user

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("X-SLURM-USER-TOKEN", self.token)
        req.add_header("X-SLURM-USER-NAME", self.user)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw)
            except ValueError:
                return e.code, raw.decode(errors="replace")


def save(version: str, name: str, status: int, body: Any, token: str) -> None:
    text = json.dumps(body, indent=2, sort_keys=False) + "\n"
    if token in text:
        raise SystemExit(f"refusing to write {name}: it contains the token")
    d = HERE / version
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{name}.json").write_text(text)
    print(f"  {version}/{name}.json  HTTP {status}")


def capture(rest: Rest, env: dict[str, str], version: str) -> None:
    p = f"/slurm/{version}"
    part = env["SLURM_PARTITION"]
    tok = rest.token
    req = {
        "job": {
            "name": f"golden-capture-{version}",
            "partition": part,
            "nodes": "2",
            "tasks": 2,
            "tasks_per_node": 1,
            "cpus_per_task": 2,
            "memory_per_node": {"set": True, "number": 1000},
            "time_limit": {"set": True, "number": 10},
            "shared": ["none"],
            "comment": "golden capture",
            "admin_comment": '{"pods":["default/golden-0","default/golden-1"]}',
            "flags": ["EXTERNAL_JOB"],
            "environment": ["PATH=/usr/bin:/bin"],
            "current_working_directory": "/tmp",
        }
    }
    save(version, "external-job-submit-request", 0, req, tok)
    st, resp = rest.call("POST", f"{p}/job/submit", req)
    save(version, "external-job-submit-response", st, resp, tok)
    job_id = resp["job_id"]
    try:
        deadline = time.monotonic() + 30
        while True:
            st, got = rest.call("GET", f"{p}/job/{job_id}")
            if got["jobs"][0]["job_state"][0] == "RUNNING" or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        save(version, "external-job-get", st, got, tok)
        for name, path in (
            ("jobs-get", "/jobs/"),
            ("jobs-state-get", "/jobs/state/"),
            ("nodes-get", "/nodes/"),
            ("partitions-get", "/partitions/"),
            ("error-job-not-found", "/job/999999999"),
        ):
            st, got = rest.call("GET", p + path)
            save(version, name, st, got, tok)
        bad = json.loads(json.dumps(req))
        bad["job"]["partition"] = "no-such-partition"
        st, got = rest.call("POST", f"{p}/job/submit", bad)
        save(version, "error-bad-partition", st, got, tok)
        big = json.loads(json.dumps(req))
        big["job"]["memory_per_node"]["number"] = 10_000_000
        st, got = rest.call("POST", f"{p}/job/submit", big)
        save(version, "error-too-much-memory", st, got, tok)
    finally:
        st, got = rest.call("DELETE", f"{p}/job/{job_id}")
        save(version, "job-delete-response", st, got, tok)
        st, got = rest.call("DELETE", f"{p}/job/{job_id}")
        save(version, "job-delete-already-completed-response", st, got, tok)
        st, got = rest.call("DELETE", f"{p}/job/999999999")
        save(version, "error-delete-not-found", st, got, tok)


def main(argv: list[str]) -> int:
    env_path = Path(
        os.environ.get("SLURM_SANDBOX_ENV", Path.home() / ".cache/slurm-bridge/slurm/cluster.env")
    )
    env = read_env(env_path)
    token = Path(env["SLURM_JWT_FILE"]).read_text().strip()
    rest = Rest(env["SLURM_REST_URL"], token, env.get("SLURM_USER", "slurm"))
    for version in argv or ["v0.0.43", "v0.0.44"]:
        print(f"capturing {version} from {env['SLURM_REST_URL']}")
        capture(rest, env, version)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
