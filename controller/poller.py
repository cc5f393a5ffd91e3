"""The Slurm poller: what Slurm says of every job the labelled pods name.

Each poll asks ``GET /jobs/state/`` for the jobs not known to be over (one request per
:data:`~bridge.slurm.client.STATE_IDS_PER_URL` ids) and keeps one
:class:`~controller.model.SlurmJobStatus` per job; a job that changed is queued. A job that
ended, or that the list leaves out, is read once (``GET /job/{id}``) for Slurm's reason,
or a definite 404 (GONE). Unknown is not gone: a failed poll changes nothing.

Preemption (:mod:`controller.preemption`): while a bridge partition has a GraceTime, a few
RUNNING jobs' records are read each poll, in turn, since only the record shows that Slurm
selected a job for preemption; such a job's pods are failed at once while Slurm still
holds the nodes. :meth:`SlurmPoller.check_grace` (each sweep) decides whether to read
them and warns, once per change, where the grace contract may not hold.

Pacing (:class:`~bridge.clock.PollPace`): ``slurmPollIntervalSeconds`` while job states
change, backing off once none does; a job id never asked about pokes it at once
(:meth:`SlurmPoller.poke`).
"""

from __future__ import annotations

import asyncio

from bridge.config import BridgeConfig
from bridge.errors import SlurmError, SlurmNotFound
from bridge.logging import get_logger
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import JobState, SlurmJob, het_shown
from controller import preemption
from controller.caches import WatchCaches
from controller.model import NO_NEXT, UNKNOWN, JobKind, Key, Next, SlurmJobStatus, job_key
from controller.ownership import Ownership
from controller.slurm_metrics import JobFactsTable

log = get_logger("controller")

# Job records (GET /job/{id}) in flight at once: the preemption reads of a poll, and the
# sweep's reads by id.
READ_CONCURRENCY = 8


def _running(state: JobState | None) -> bool:
    return state is not None and state.primary == "RUNNING"


def _het_state(
    job_id: int, states: dict[int, JobState], het: dict[int, tuple[int, ...] | None]
) -> JobState | None:
    """A job's state in a poll; for a hetjob leader, its shown component's
    (:func:`bridge.slurm.models.het_shown`) when that one is not active (None while its
    components are not known yet, or one is not listed: the job is then read)."""
    state = states.get(job_id)
    if job_id not in het:
        return state
    comps = het[job_id]
    if comps is None:
        return None
    listed = [states.get(c) for c in (job_id, *comps)]
    shown = listed[het_shown([s.primary if s is not None else None for s in listed])]
    return shown if shown is None or not shown.active else state


def job_view(job: SlurmJob) -> SlurmJobStatus:
    """A job read by id as the reconcilers see it; a hetjob (read by its leader's id:
    every component) as one unit (docs/hetjob.md): its shown component
    (:attr:`bridge.slurm.models.SlurmJob.shown_offset`), once no longer active, ends every
    pod of the gang; while others still hold nodes the job stays ACTIVE
    (``component_ended``), so it is cancelled once every pod has stopped."""
    offset = job.shown_offset
    c = job.components[offset]
    if job.het_components and not c.state.active:
        where = f"{job.job_id}+{offset}"
        if any(x.state.active for x in job.components):
            return SlurmJobStatus(
                JobKind.ACTIVE,
                c.state.primary,
                c.state_reason,
                component=where,
                component_ended=True,
            )
        return SlurmJobStatus(JobKind.ENDED, c.state.primary, c.state_reason, component=where)
    kind = JobKind.ACTIVE if job.state.active else JobKind.ENDED
    return SlurmJobStatus(kind, job.state.primary, job.state_reason)


class SlurmPoller:
    def __init__(
        self,
        cfg: BridgeConfig,
        slurm: SlurmClient,
        caches: WatchCaches,
        ownership: Ownership,
        facts: JobFactsTable | None,
    ) -> None:
        """``facts``: where what a read said is kept for the job metrics (``polled``
        mode), or None."""
        self.cfg = cfg
        self.slurm = slurm
        self.caches = caches
        self.ownership = ownership
        self.facts = facts
        self.views: dict[int, SlurmJobStatus] = {}
        # hetjob leaders our pods name -> their other components' ids (None: not read yet)
        self.het: dict[int, tuple[int, ...] | None] = {}
        # Set to poll Slurm before the interval is up (a new job id appeared).
        self.poll_now = asyncio.Event()
        self.slurm_ok = False
        self.slurm_failures = 0  # failed Slurm polls in a row (readiness, tests)
        # Read RUNNING jobs' records for a preemption (a bridge partition has a GraceTime:
        # controller/preemption.py); the last job id read, for the next poll's turn.
        self.preempt_watch = False
        self._preempt_cursor = 0
        self._grace_warned: tuple[str, ...] = ()

    def remember(self, job: SlurmJob) -> None:
        """Keep what a read of ``job`` said, for the job metrics (``polled`` mode)."""
        if self.facts is not None:
            self.facts.learn(job)

    def poke(self, job_id: int) -> None:
        """A pod names ``job_id``: poll now if Slurm was never asked about it."""
        if job_id not in self.views:
            self.poll_now.set()

    def forget(self, job_id: int) -> None:
        self.views.pop(job_id, None)
        self.het.pop(job_id, None)

    def ids(self) -> list[int]:
        """The jobs a poll asks about: those the labelled pods name, not known to be over."""
        return sorted(j for j in self.caches.by_job if not self.views.get(j, UNKNOWN).finished)

    async def poll_once(self) -> Next:
        """Ask Slurm about every job our pods name that is not known to be over; answers
        the jobs that changed, to reconcile."""
        ids = self.ids()
        if not ids:
            return NO_NEXT
        changed: list[Key] = []
        try:
            rows = await self.slurm.list_job_states(ids)
        except SlurmError as e:
            self.slurm_ok = False
            self.slurm_failures += 1
            log.warning("slurm_poll_failed", error=str(e), jobs=len(ids))
            return NO_NEXT  # unknown is not gone: nothing changes
        self.slurm_ok = True
        self.slurm_failures = 0
        states = {s.job_id: s.state for s in rows}
        for s in rows:
            if s.het_offset == 0 and s.job_id not in self.het:
                self.het[s.job_id] = None  # a hetjob's leader: read below for its components
        preempted = await self._preempted(sorted(j for j in ids if _running(states.get(j))))
        for j in ids:
            st = _het_state(j, states, self.het)
            if st is not None and st.active:
                was = self.views.get(j, UNKNOWN).preempted and st.primary == "RUNNING"
                view = SlurmJobStatus(JobKind.ACTIVE, st.primary, preempted=was or j in preempted)
            else:
                # Ended, or not listed: one GET for Slurm's reason (or a definite 404).
                try:
                    job = await self.slurm.get_job(j)
                except SlurmNotFound:
                    view = SlurmJobStatus(JobKind.GONE)
                except SlurmError as e:
                    log.warning("slurm_job_get_failed", job_id=j, error=str(e))
                    continue
                else:
                    self.remember(job)
                    self.ownership.learn(job)
                    if job.het_components:
                        self.het[j] = tuple(c.job_id for c in job.het_components)
                    view = job_view(job)
            if self.views.get(j) != view:
                log.info("slurm_job_state", job_id=j, state=view.state, kind=view.kind.value)
                self.views[j] = view
                changed.append(job_key(j))
        return Next(tuple(changed))

    async def _preempted(self, running: list[int]) -> set[int]:
        """Which of the next few RUNNING jobs (in turn) Slurm selected for preemption;
        none read while no bridge partition has a GraceTime."""
        if not self.preempt_watch:
            return set()
        running = [j for j in running if not self.views.get(j, UNKNOWN).preempted]
        batch, self._preempt_cursor = preemption.next_reads(running, self._preempt_cursor)
        try:
            read = await self.slurm.get_jobs(batch, concurrency=READ_CONCURRENCY)
        except SlurmError as e:
            log.warning("slurm_preempt_read_failed", error=str(e))
            return set()
        out = {
            job.job_id
            for job in read
            if any(preemption.selected_for_preemption(c) for c in job.components)
        }
        for j in out:
            log.info("slurm_job_preempting", job_id=j)
        return out

    async def check_grace(self, bridge_partitions: frozenset[str]) -> None:
        """Whether to watch for preemption, and the grace contract's warnings (said once
        per change)."""
        try:
            parts = await self.slurm.list_partitions()
        except SlurmError as e:
            log.warning("slurm_partitions_failed", error=str(e))
            return
        self.preempt_watch = preemption.watch(parts, bridge_partitions)
        warnings = tuple(
            preemption.grace_warnings(
                parts, bridge_partitions, self.cfg.slurm_poll_interval_seconds
            )
        )
        if warnings != self._grace_warned:
            self._grace_warned = warnings
            for w in warnings:
                log.warning("grace_contract_at_risk", message=w)
