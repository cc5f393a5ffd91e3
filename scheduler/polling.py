"""The scheduler's Slurm poll loop: one task beside the cycle's workers.

Each tick (:meth:`SlurmPolling.run_forever`):

1. during an outage, one cheap call (``ping``); when slurmctld answers again the cycle
   is told (``on_reachable``: every group processed at once, its backoff forgotten);
2. the poller's tick (:class:`~scheduler.poller.JobPoller`): the followed pending jobs'
   states, the changed ones read and handed to the cycle;
3. every ``slurmResyncIntervalSeconds``, Slurm's nodes again (:class:`SlurmState`).

Slurm's plans have a loop of their own (:meth:`SlurmPolling.plans_forever`, beside this
one): every ``scheduler.expectedStartRefreshSeconds`` after the last read ENDED, the
followed pending jobs whose plan or reason moved (``on_job``: their groups are woken). That
read is Slurm's whole job table (finished jobs too, until ``MinJobAge``): on a large or
busy Slurm it takes seconds to minutes, and in the poll loop it held up every tick behind
it (allocations and reasons noticed a read late; 2,000 pending pods took 5 minutes to show
their reasons instead of 30 s). It also takes at most :data:`PLANS_READ_SHARE` of the
time: a read that took ``d`` seconds is followed by at least ``d * (1 / share - 1)``
seconds without one, so a slow read is never followed at once by another (the refresh's
interval, counted from its start, used to run them back to back once a read took longer).

A Slurm error is counted by endpoint and logged (once per outage, not once per tick); an
unreachable Slurm is the cycle's to tell the pods (``on_unreachable``). Anything else is
the :class:`~bridge.loops.LoopGuard`'s: logged, counted, backed off, the loop goes on.
Between ticks it sleeps the poller's interval (idle back-off), cut short when a job is
newly watched. The loops never touch the work queue: what they learn goes to the cycle
through the three callbacks.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import structlog

from bridge.clock import Clock
from bridge.config import BridgeConfig
from bridge.errors import SlurmError, SlurmUnavailable
from bridge.loops import LoopGuard
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import SlurmJob
from scheduler.metrics import SchedulerMetrics
from scheduler.outage import SlurmReachability
from scheduler.poller import JobPoller
from scheduler.slurm_state import PLAN_NEW_JOBS_AFTER_SECONDS, SlurmState

log = structlog.get_logger("scheduler")

# The share of the time the plans' read of Slurm's job table may take, at most: after a
# read of ``d`` seconds the next waits at least ``d * (1 / share - 1)`` (a 1 s read: 4 s).
PLANS_READ_SHARE = 0.2


class SlurmPolling:
    def __init__(
        self,
        cfg: BridgeConfig,
        slurm: SlurmClient,
        clock: Clock,
        poller: JobPoller,
        slurm_state: SlurmState,
        outage: SlurmReachability,
        metrics: SchedulerMetrics,
        guard: LoopGuard,
        *,
        on_job: Callable[[SlurmJob], None],
        on_unreachable: Callable[[SlurmUnavailable], Awaitable[None]],
        on_reachable: Callable[[], None],
    ) -> None:
        self.cfg = cfg
        self.slurm = slurm
        self.clock = clock
        self.poller = poller
        self.slurm_state = slurm_state
        self.outage = outage
        self.metrics = metrics
        self.guard = guard
        self._on_job = on_job
        self._on_unreachable = on_unreachable
        self._on_reachable = on_reachable

    async def run_forever(self) -> None:
        last_resync = self.clock.monotonic()
        base = self.cfg.slurm_poll_interval_seconds
        while True:
            async with self.guard:  # anything but a SlurmError: logged, counted, backed off
                try:
                    if self.outage.down is not None:
                        await self._probe()
                    await self.poller.run_once()
                    resync = self.cfg.slurm_resync_interval_seconds
                    if self.clock.monotonic() - last_resync >= resync:
                        last_resync = self.clock.monotonic()
                        await self.slurm_state.refresh_slurm_nodes()
                except SlurmError as e:
                    self._count(e, "poll_failed")
                    if isinstance(e, SlurmUnavailable):
                        await self._on_unreachable(e)
            # Idle back-off (see JobPoller), cut short when a job is newly watched.
            interval, slept = self.poller.next_interval(base), 0.0
            while True:
                await self.clock.sleep(base)
                slept += base
                if slept >= interval or self.poller.has_news:
                    break

    async def plans_forever(self, guard: LoopGuard) -> None:
        """Slurm's plans, read again ``scheduler.expectedStartRefreshSeconds`` after the
        last read ended (brought forward to :data:`PLAN_NEW_JOBS_AFTER_SECONDS` while a new
        job awaits the bridge's plan), and never sooner than the last read's own length
        allows (:data:`PLANS_READ_SHARE`); nothing during an outage (the poll loop probes,
        and only its tick tells one: a slow or failed read of the whole table is counted
        and logged, and waits its rest like any other). Looked at every poll interval; ``0``
        refreshes: no loop at all."""
        if not self.cfg.scheduler.expected_start_refresh_seconds:
            return
        base = self.cfg.slurm_poll_interval_seconds
        looked = ended = self.clock.monotonic()  # the last read's start and end
        rest = 0.0  # the last read's length's due rest (PLANS_READ_SHARE)
        while True:
            await self.clock.sleep(base)
            if self.outage.down is not None or not self._plans_due(ended, rest):
                continue
            async with guard:  # anything but a SlurmError: logged, counted, backed off
                started = self.clock.monotonic()
                try:
                    await self._replan(looked)
                    looked = started
                except SlurmError as e:
                    # counted and logged; the poll loop's tick (cheap) tells an outage
                    self._count(e, "plans_read_failed")
                ended = self.clock.monotonic()
                rest = (ended - started) * (1 / PLANS_READ_SHARE - 1)

    def _count(self, e: SlurmError, event: str) -> None:
        """A failed read of either loop: counted by endpoint and logged, once per outage
        (slurm_unreachable), not once per tick."""
        self.metrics.rest_errors.labels(e.endpoint or "?", str(e.status or 0)).inc()
        quiet = self.outage.down is not None and isinstance(e, SlurmUnavailable)
        (log.debug if quiet else log.warning)(event, error=str(e))

    def _plans_due(self, ended: float, rest: float) -> bool:
        """The plans' next read is due: the refresh's interval (or the bring-forward's)
        and the last read's rest have passed since it ended."""
        every = self.cfg.scheduler.expected_start_refresh_seconds
        if self.slurm_state.awaits_plan():  # a new job awaits the bridge's plan
            every = min(every, PLAN_NEW_JOBS_AFTER_SECONDS)
        return self.clock.monotonic() - ended >= max(every, rest)

    async def _probe(self) -> None:
        """During an outage: one cheap call per tick; the cycle hears when slurmctld
        answers again."""
        pings = await self.slurm.ping()
        if any(p.responding for p in pings) and self.outage.answered():
            self._on_reachable()

    async def _replan(self, since: float) -> None:
        """The followed pending jobs whose plan or reason moved go to the cycle."""
        step = self.cfg.scheduler.expected_start_step_seconds
        for job in await self.slurm_state.replanned(step, since):
            self._on_job(job)
