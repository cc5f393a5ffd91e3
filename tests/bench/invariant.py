"""The allocation invariant, watched from outside (docs/controller.md): no Slurm job of the
bridge ends while a container of a pod labelled with it still runs.

:class:`InvariantMonitor` samples it: the job ids of pods whose containers run (the
sandbox API server's store, as its kubelet stand-in wrote them), then Slurm's states of
those jobs, then the store again. A job Slurm already calls ended while, read after that,
a container of its pods still runs is a violation (the order makes it certain, never a
race of the two reads). Jobs Slurm ended on its own (scancel, preemption: not the
bridge's teardown) are the caller's to exclude.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from typing import Any

from bridge.errors import SlurmError
from bridge.slurm.client import SlurmClient
from bridge.wellknown import LABEL_JOB_ID

SAMPLE_SECONDS = 0.05


def running_jobs(pods: Iterable[dict[str, Any]]) -> set[int]:
    """Job ids of the pods (labelled with one) some container of which runs."""
    out: set[int] = set()
    for p in pods:
        raw = (p["metadata"].get("labels") or {}).get(LABEL_JOB_ID)
        statuses = (p.get("status") or {}).get("containerStatuses") or []
        if raw and any("terminated" not in (c.get("state") or {}) for c in statuses):
            out.add(int(raw))
    return out


class InvariantMonitor:
    def __init__(
        self,
        pods: Callable[[], Iterable[dict[str, Any]]],
        slurm: SlurmClient,
        *,
        exempt: Callable[[int], bool] = lambda _job: False,
    ) -> None:
        self.pods = pods
        self.slurm = slurm
        self.exempt = exempt  # jobs Slurm ended on its own (scancel by the test ...)
        self.violations: set[int] = set()
        self.samples = 0

    async def sample(self) -> None:
        running = running_jobs(self.pods())
        if not running:
            return
        states = await self.slurm.list_job_states(sorted(running))
        ended = {s.job_id for s in states if not s.state.active}
        still = running_jobs(self.pods())  # read after Slurm said "ended"
        self.violations |= {j for j in ended & still if not self.exempt(j)}
        self.samples += 1

    async def run(self) -> None:
        while True:
            with contextlib.suppress(SlurmError):
                await self.sample()
            await asyncio.sleep(SAMPLE_SECONDS)
