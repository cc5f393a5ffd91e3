"""Fault runs on demand, with the scheduler AND the controller against the REAL Slurm
sandbox and an in-process sandbox API server (the same scenarios as the CI e2e tests in
tests/integration/test_faults_e2e.py, with TARGETS.md's full figures).

Run: ``.venv/bin/python -m tests.bench.faults --outage 60`` (the slurmrestd outage length;
add ``--restart-ctld`` / ``--timelimit`` for those scenarios too). One JSON line per
scenario; the LAST line is one JSON object with the outage run's counts and
``recovery_s`` (rest-start -> a pod created during the outage bound and the pending
pods' Slurm reason back).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from bridge.logging import configure_logging
from tests.integration.bridge_harness import running_bridge
from tests.integration.conftest import load_sandbox
from tests.integration.fault_scenarios import (
    slurmctld_restart,
    slurmrestd_outage,
    time_limit_expires,
)


async def main(outage: float, restart_ctld: bool, timelimit: bool) -> dict[str, Any]:
    sb = load_sandbox()
    with tempfile.TemporaryDirectory(prefix="sb-faults-") as tmp:
        if restart_ctld:
            async with running_bridge(sb, Path(tmp), controller=True) as b:
                print(json.dumps(await slurmctld_restart(b, sb)), flush=True)
        if timelimit:
            async with running_bridge(sb, Path(tmp), controller=True) as b:
                print(json.dumps(await time_limit_expires(b)), flush=True)
        async with running_bridge(sb, Path(tmp), controller=True) as b:
            return await slurmrestd_outage(b, sb, outage)


def cli() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.faults")
    parser.add_argument("--outage", type=float, default=60.0, help="slurmrestd outage (s)")
    parser.add_argument("--restart-ctld", action="store_true", help="also restart slurmctld")
    parser.add_argument("--timelimit", action="store_true", help="also a 1-minute time limit")
    parser.add_argument("--log-level", default="warning", help="bridge logs (to stderr)")
    args = parser.parse_args()
    configure_logging(args.log_level, "console")
    if args.outage <= 0:
        parser.error("--outage must be > 0")
    print(json.dumps(asyncio.run(main(args.outage, args.restart_ctld, args.timelimit))))


if __name__ == "__main__":
    cli()
