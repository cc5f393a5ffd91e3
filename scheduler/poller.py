"""One poller for the jobs the scheduler owns: learns allocations without per-pod polling.

Each tick asks slurmrestd ONE compact question: ``GET /jobs/state/?job_id=..`` for the
jobs the scheduler is waiting on (pending or just submitted), one request per
:data:`~bridge.slurm.fetching.STATE_IDS_PER_URL` ids (never every job's state: that list
includes the finished jobs, and its cost grows with them: docs/benchmarks.md). Only jobs whose
state changed are read in full (``GET /job/{id}``: node list, reason), concurrently
(:data:`READ_CONCURRENCY`), and handed to ``on_change`` (the cycle keeps them and queues
their groups). Jobs whose pending reason Slurm
has not evaluated yet (``None``) are re-read from their 2nd, 4th and 8th tick
(:data:`REASON_REFRESH_AT`), so pods show Slurm's real reason (Resources, Priority ...)
within a second or two. With nothing pending the poller asks nothing.

Pacing (:meth:`JobPoller.next_interval`, the controller's too:
:class:`~bridge.clock.PollPace`): the configured interval while something moves (a
change, a newly watched job); once ticks find nothing new the interval doubles up to
:data:`~bridge.clock.IDLE_INTERVAL_MAX` seconds (longer when a tick takes several
requests: :func:`~bridge.clock.idle_cap`), so a queue of pending jobs that Slurm leaves
alone costs at most 1.5 requests a second on average.

A burst of new pending jobs must not turn that into per-job polling: at most
``REASON_BUDGET`` reason re-reads per tick (the least refreshed first), and they come
after the jobs whose state changed, which are always read (an allocation is never delayed
behind reason refreshes). Full reads run ``READ_CONCURRENCY`` at a time.

Why not ``GET /jobs/?update_time=T``: Slurm's update_time is global, so any change
anywhere returns every job in the cluster (upstream's cost: docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import structlog

from bridge.clock import PollPace
from bridge.errors import SlurmError, SlurmNotFound
from bridge.slurm.client import SlurmClient
from bridge.slurm.fetching import state_requests
from bridge.slurm.models import SlurmJob

log = structlog.get_logger("scheduler.poller")

# Ages (ticks since the watch) from which a job without a reason is re-read, once each:
# Slurm gives one at its scheduling pass, and most jobs start by then (no read wasted).
REASON_REFRESH_AT = (2, 4, 8)
REASON_BUDGET = 64  # reason re-reads per tick, at most (the least refreshed first)
READ_CONCURRENCY = 16  # full reads (GET /job/{id}) of changed jobs in flight at once


@dataclass
class Watched:
    job_id: int
    state: str
    reason_refreshes: int = 0  # re-reads done for a reason (len(REASON_REFRESH_AT): done)
    age: int = 0  # ticks since watched

    @property
    def reason_due(self) -> bool:
        n = self.reason_refreshes
        return n < len(REASON_REFRESH_AT) and self.age >= REASON_REFRESH_AT[n]


class JobPoller:
    def __init__(
        self,
        slurm: SlurmClient,
        on_change: Callable[[SlurmJob], None],
        on_gone: Callable[[int], None] | None = None,
    ) -> None:
        self._slurm = slurm
        self._on_change = on_change
        self._on_gone = on_gone
        self._watched: dict[int, Watched] = {}
        self.calls = 0
        self._pace = PollPace()
        self._news = False  # a job was watched since the last tick

    @property
    def has_news(self) -> bool:
        """A job was watched since the last tick (the next tick should not wait long)."""
        return self._news

    def next_interval(self, base: float) -> float:
        """Seconds until the next tick: ``base`` while things move, then backing off."""
        return self._pace.interval(base)

    def watch(self, job: SlurmJob) -> None:
        """Follow ``job`` until it leaves PENDING (then :meth:`unwatch` is implied)."""
        w = self._watched.get(job.job_id)
        refreshes = 0 if job.state_reason in ("", "None") else len(REASON_REFRESH_AT)
        if w is None:
            self._watched[job.job_id] = Watched(job.job_id, job.state.primary, refreshes)
            self._news = True
        else:
            w.state = job.state.primary
            w.reason_refreshes = max(w.reason_refreshes, refreshes)

    def awaits_reason(self, job_id: int) -> bool:
        """True while Slurm has not given ``job_id`` a pending reason and the poller still
        re-reads it for one (its first ticks)."""
        w = self._watched.get(job_id)
        return w is not None and w.reason_refreshes < len(REASON_REFRESH_AT)

    def unwatch(self, job_id: int) -> None:
        self._watched.pop(job_id, None)

    @property
    def watched(self) -> Iterable[int]:
        return self._watched.keys()

    async def run_once(self) -> int:
        """One tick; returns how many jobs changed."""
        if not self._watched:
            self._pace.idle_ticks = 0
            return 0
        news, self._news = self._news, False
        ids = sorted(self._watched)
        changed: list[int] = []
        refresh: list[Watched] = []
        seen: set[int] = set()
        # The listed ids, STATE_IDS_PER_URL a request: never every job's state (finished
        # ones too, see the module docstring).
        self._pace.requests = state_requests(len(ids))
        self.calls += self._pace.requests
        states = await self._slurm.list_job_states(ids)
        for item in states:
            w = self._watched.get(item.job_id)
            if w is None:
                continue
            seen.add(item.job_id)
            if item.state.primary != w.state:
                changed.append(item.job_id)
            else:
                w.age += 1
                if w.reason_due:
                    refresh.append(w)
        # A watched job Slurm no longer knows (purged): read it to confirm (404 -> gone).
        changed += [j for j in ids if j not in seen and j in self._watched]
        # Reason re-reads come after the state changes (which are always read) and are
        # capped, so a burst of new pending jobs never turns into per-job polling.
        refresh.sort(key=lambda w: (w.reason_refreshes, w.job_id))
        for w in refresh[:REASON_BUDGET]:
            w.reason_refreshes += 1
            changed.append(w.job_id)
        sem = asyncio.Semaphore(READ_CONCURRENCY)
        await asyncio.gather(*(self._read(job_id, sem) for job_id in changed))
        self._pace.ticked(bool(changed or news))
        return len(changed)

    async def _read(self, job_id: int, sem: asyncio.Semaphore) -> None:
        async with sem:
            try:
                self.calls += 1
                job = await self._slurm.get_job(job_id)
            except SlurmNotFound:
                log.info("job_vanished", job_id=job_id)
                self.unwatch(job_id)
                if self._on_gone is not None:
                    self._on_gone(job_id)
                return
            except SlurmError:
                return  # unknown is not gone: try again next tick
        if job.state.primary == "PENDING":
            self.watch(job)
        else:
            self.unwatch(job_id)
        self._on_change(job)
