"""Faults end to end, with BOTH the scheduler and the controller running against the
sandbox API server and the real Slurm sandbox (TARGETS.md, reliability table).

Each test prints its counts as one JSON line (``pytest -s`` shows them). The slurmrestd
outage runs for ``CI_OUTAGE_SECONDS`` here; the 60 s of TARGETS.md runs on demand:
``python -m tests.bench.faults --outage 60``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.integration.bridge_harness import Bridge, running_bridge
from tests.integration.conftest import SlurmSandbox
from tests.integration.fault_scenarios import (
    slurmctld_restart,
    slurmrestd_outage,
    time_limit_expires,
)

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]
CI_OUTAGE_SECONDS = 10.0


@pytest.fixture
async def bridge(sandbox: SlurmSandbox, tmp_path: Path) -> AsyncIterator[Bridge]:
    async with running_bridge(sandbox, tmp_path, controller=True) as b:
        yield b


def report(counts: dict[str, object]) -> None:
    print(json.dumps(counts))


async def test_time_limit_expiring_fails_the_pod_with_slurm_job_timeout(bridge: Bridge) -> None:
    report(await time_limit_expires(bridge))


async def test_slurmctld_restart_deletes_or_fails_no_pod_and_pending_pods_bind_after(
    bridge: Bridge, sandbox: SlurmSandbox
) -> None:
    report(await slurmctld_restart(bridge, sandbox))


async def test_slurmrestd_outage_is_named_on_pending_pods_and_recovered_from(
    bridge: Bridge, sandbox: SlurmSandbox
) -> None:
    report(await slurmrestd_outage(bridge, sandbox, CI_OUTAGE_SECONDS))
