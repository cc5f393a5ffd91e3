"""The scheduler's Slurm poll loop: one task beside the cycle's workers.

Each tick (:meth:`SlurmPolling.run_forever`):

1. during an outage, one cheap call (``ping``); when slurmctld answers again the cycle
   is told (``on_reachable``: every group processed at once, its backoff forgotten);
2. the poller's tick (:class:`~scheduler.poller.JobPoller`): the followed pending jobs'
   states, the changed ones read and handed to the cycle;
3. every ``slurmResyncIntervalSeconds``, Slurm's nodes again (:class:`SlurmState`);
4. every ``scheduler.expectedStartRefreshSeconds``, the followed pending jobs whose plan
   or reason moved (``on_job``: their groups are woken).

A Slurm error is counted by endpoint and logged (once per outage, not once per tick); an
unreachable Slurm is the cycle's to tell the pods (``on_unreachable``). Anything else is
the :class:`~bridge.loops.LoopGuard`'s: logged, counted, backed off, the loop goes on.
Between ticks it sleeps the poller's interval (idle back-off), cut short when a job is
newly watched. The loop never touches the work queue: what it learns goes to the cycle
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
        last_resync = last_plans = self.clock.monotonic()
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
                    plans = self.cfg.scheduler.expected_start_refresh_seconds
                    if self.slurm_state.awaits_plan():  # a new job awaits the bridge's plan
                        plans = min(plans, PLAN_NEW_JOBS_AFTER_SECONDS)
                    if plans and self.clock.monotonic() - last_plans >= plans:
                        since, last_plans = last_plans, self.clock.monotonic()
                        await self._replan(since)
                except SlurmError as e:
                    self.metrics.rest_errors.labels(e.endpoint or "?", str(e.status or 0)).inc()
                    # One warning per outage (slurm_unreachable), not one per tick.
                    quiet = self.outage.down is not None and isinstance(e, SlurmUnavailable)
                    (log.debug if quiet else log.warning)("poll_failed", error=str(e))
                    if isinstance(e, SlurmUnavailable):
                        await self._on_unreachable(e)
            # Idle back-off (see JobPoller), cut short when a job is newly watched.
            interval, slept = self.poller.next_interval(base), 0.0
            while True:
                await self.clock.sleep(base)
                slept += base
                if slept >= interval or self.poller.has_news:
                    break

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
