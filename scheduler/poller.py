"""One poller for the jobs the scheduler owns: learns allocations without per-pod polling.

Each tick asks slurmrestd ONE compact question, ``GET /jobs/state/?job_id=..`` for the
jobs the scheduler is waiting on (pending or just submitted), in chunks. Only jobs whose
state changed are read in full (``GET /job/{id}``: node list, reason), and their groups
are queued. Jobs whose pending reason Slurm has not evaluated yet (``None``) are re-read
for their first few ticks, so pods show Slurm's real reason (Resources, Priority ...)
within a second. With nothing pending the poller asks nothing.

A burst of new pending jobs must not turn that into per-job polling: at most
``REASON_BUDGET`` reason re-reads per tick (the least refreshed first), and they come
after the jobs whose state changed, which are always read (an allocation is never delayed
behind reason refreshes). Full reads run ``READ_CONCURRENCY`` at a time.

Why not ``GET /jobs/?update_time=T``: Slurm's update_time is global, so any change
anywhere returns every job in the cluster (upstream's 30 MB per cycle).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import structlog

from bridge.errors import SlurmError, SlurmNotFound
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import SlurmJob

log = structlog.get_logger("scheduler.poller")

CHUNK = 500  # job ids per /jobs/state/ request (keeps the URL well under 8 KiB)
REASON_REFRESH_TICKS = 8
REASON_BUDGET = 16  # reason re-reads per tick, at most
READ_CONCURRENCY = 8


@dataclass
class Watched:
    job_id: int
    state: str
    reason_refreshes: int = 0


class JobPoller:
    def __init__(self, slurm: SlurmClient, on_change: Callable[[SlurmJob], None]) -> None:
        self._slurm = slurm
        self._on_change = on_change
        self._watched: dict[int, Watched] = {}
        self.calls = 0

    def watch(self, job: SlurmJob) -> None:
        """Follow ``job`` until it leaves PENDING (then :meth:`unwatch` is implied)."""
        w = self._watched.get(job.job_id)
        refreshes = 0 if job.state_reason in ("", "None") else REASON_REFRESH_TICKS
        if w is None:
            self._watched[job.job_id] = Watched(job.job_id, job.state.primary, refreshes)
        else:
            w.state = job.state.primary
            w.reason_refreshes = max(w.reason_refreshes, refreshes)

    def unwatch(self, job_id: int) -> None:
        self._watched.pop(job_id, None)

    @property
    def watched(self) -> Iterable[int]:
        return self._watched.keys()

    async def run_once(self) -> int:
        """One tick; returns how many jobs changed."""
        if not self._watched:
            return 0
        ids = sorted(self._watched)
        changed: list[int] = []
        refresh: list[Watched] = []
        seen: set[int] = set()
        for i in range(0, len(ids), CHUNK):
            chunk = ids[i : i + CHUNK]
            self.calls += 1
            states = await self._slurm.list_job_states(chunk)
            for item in states:
                seen.add(item.job_id)
                w = self._watched.get(item.job_id)
                if w is None:
                    continue
                if item.state.primary != w.state:
                    changed.append(item.job_id)
                elif w.reason_refreshes < REASON_REFRESH_TICKS:
                    refresh.append(w)
        # A watched job Slurm no longer knows (purged): read it to confirm (404 -> gone).
        changed += [j for j in ids if j not in seen]
        refresh.sort(key=lambda w: (w.reason_refreshes, w.job_id))
        for w in refresh[:REASON_BUDGET]:
            w.reason_refreshes += 1
            changed.append(w.job_id)
        sem = asyncio.Semaphore(READ_CONCURRENCY)
        await asyncio.gather(*(self._read(job_id, sem) for job_id in changed))
        return len(changed)

    async def _read(self, job_id: int, sem: asyncio.Semaphore) -> None:
        async with sem:
            try:
                self.calls += 1
                job = await self._slurm.get_job(job_id)
            except SlurmNotFound:
                log.info("job_vanished", job_id=job_id)
                self.unwatch(job_id)
                return
            except SlurmError:
                return  # unknown is not gone: try again next tick
        if job.state.primary == "PENDING":
            self.watch(job)
        else:
            self.unwatch(job_id)
        self._on_change(job)
