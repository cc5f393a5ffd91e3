"""When Slurm expects a pending job to start: its plan, in words, and when a pod's copy of
it is stale. Pure: the callers pass the time in (docs/why-pending.md).

Slurm's backfill scheduler plans a start for each pending job it considers: the job
record's ``start_time`` while PENDING (what ``squeue --start`` shows). Three cases:

* a plan: a time, shown as ``Slurm expects it to start at 2026-11-29T14:05:00Z (in 12 min)``
  and in the pod annotation ``slinky.slurm.net/expected-start``;
* no plan yet (``start_time`` unset: no backfill pass has looked at the job, or
  ``bf_max_job_test`` stopped before it): ``no start time planned yet``, never a made-up
  time;
* a job that can only start after a job without a time limit (INFINITE) ends: Slurm then
  puts its start a year ahead (measured on 26.05: exactly 365 days after its pass), which is
  no plan at all; shown as ``no start time planned yet: a job ahead has no time limit``.

A pod's copy is written again only when the plan moved by more than a step
(``scheduler.expectedStartStepSeconds``), appeared, went away, or crossed "now" (the pod
said "in 3 min" and the time has come): :func:`stale`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from bridge.slurm.models import SlurmJob

# Slurm puts a job that waits for a job without a time limit this far ahead (a year,
# minus a day of slack for the time between its pass and our read).
UNKNOWABLE_AHEAD = timedelta(days=364)

NO_PLAN = "no start time planned yet"
NO_LIMIT = ": a job ahead has no time limit (INFINITE)"
EXPECTS = "Slurm expects it to start at "
# the separators of the note in a pod's pending message (read back by :func:`strip_note`)
NOTE_SEP = "; "
DUE = "due now"


# Who made the plan a pod shows (the annotation ``slinky.slurm.net/expected-start-by``).
BY_SLURM = "slurm"
BY_BRIDGE = "slurm-bridge"
PLANNED_BY = {
    BY_SLURM: "planned by Slurm's backfill",
    BY_BRIDGE: "planned by slurm-bridge from Slurm's queue",
}
BRIDGE_EXPECTS = "slurm-bridge expects it to start at "
# The bridge's plan replaces Slurm's only when it is earlier than Slurm's by more than
# this, and its own whole-node walk is later than its per-CPU one by more than this (Slurm's
# backfill plans at bf_resolution, 60 s by default: a smaller difference is its rounding).
WHOLE_NODE_MARGIN = timedelta(seconds=30)


@dataclass(frozen=True)
class Plan:
    """The plan a pending job's pods show: ``start`` (None: no plan); ``unknowable``:
    Slurm put the start a year ahead, behind a job without a time limit; ``by`` who made
    it (:data:`BY_SLURM`: Slurm's backfill, the job's ``start_time``; :data:`BY_BRIDGE`:
    the bridge's per-CPU plan of Slurm's queue, :mod:`bridge.queueplan`, then
    ``slurm_start`` is Slurm's own)."""

    start: datetime | None = None
    unknowable: bool = False
    by: str = BY_SLURM
    slurm_start: datetime | None = None

    @property
    def planned(self) -> bool:
        return self.start is not None


NO_PLAN_YET = Plan()


def plan_of(start_time: datetime | None, now: datetime) -> Plan:
    """The plan a PENDING job's ``start_time`` stands for, read at ``now``."""
    if start_time is None:
        return NO_PLAN_YET
    if start_time - now >= UNKNOWABLE_AHEAD:
        return Plan(None, unknowable=True)
    return Plan(start_time.astimezone(UTC))


def choose(slurm: Plan, cpu: datetime | None, whole: datetime | None) -> Plan:
    """The plan to show: Slurm's (``slurm``, from its ``start_time``), or the bridge's
    per-CPU plan ``cpu`` (:mod:`bridge.queueplan`) where Slurm's is pessimistic because
    its backfill reserves whole nodes: Slurm has a plan, the bridge's is earlier by more
    than :data:`WHOLE_NODE_MARGIN`, and the bridge's own walk of the same queue with
    whole-node reservations (``whole``) is later than ``cpu`` by more than that too (the
    difference is then the whole-node reservations', not something the bridge does not
    see: a limit, a reservation, a job it does not know). Slurm's "no plan" stands: the
    bridge never plans a job Slurm has not."""
    if slurm.start is None or cpu is None:
        return slurm
    if whole is None or whole - cpu <= WHOLE_NODE_MARGIN:
        return slurm
    if slurm.start - cpu <= WHOLE_NODE_MARGIN:
        return slurm
    return Plan(cpu.astimezone(UTC), by=BY_BRIDGE, slurm_start=slurm.start)


# A job without a time limit: Slurm shows INFINITE (unset) while it is pending, and a year
# (525600 minutes, its end a year after its start) once it runs (measured on 26.05).
YEAR_MINUTES = 525600


def unlimited(job: SlurmJob) -> bool:
    """``job`` has no time limit (INFINITE): Slurm can plan nothing after it."""
    return job.time_limit_minutes is None or job.time_limit_minutes >= YEAR_MINUTES


def job_start(job: SlurmJob) -> datetime | None:
    """A pending job's ``start_time`` (a hetjob: its last component's, None while one has
    none: the components start together)."""
    starts = [c.start_time for c in job.components]
    return None if None in starts else max(s for s in starts if s is not None)


def rfc3339(t: datetime) -> str:
    """``2026-11-29T14:05:00Z``: UTC, whole seconds (the annotation's form)."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str | None) -> datetime | None:
    """The time an annotation holds; None when absent or not RFC 3339 (a user's edit)."""
    if not text:
        return None
    try:
        t = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def human_in(seconds: float) -> str:
    """How far ahead: ``in 40 s``, ``in 12 min``, ``in 2 h 5 min``, ``in 3 d 4 h``;
    ``due now`` when the time has come."""
    s = int(seconds)
    if s <= 0:
        return DUE
    if s < 60:
        return f"in {s} s"
    m = -(-s // 60)  # whole minutes, rounded up: "in 1 min" until it is due
    if m < 60:
        return f"in {m} min"
    h, m = divmod(m, 60)
    if h < 24:
        return f"in {h} h {m} min" if m else f"in {h} h"
    d, h = divmod(h, 24)
    return f"in {d} d {h} h" if h else f"in {d} d"


def short_in(seconds: float) -> str:
    """The same, short (a table column): ``40s``, ``12m``, ``2h5m``, ``3d4h``, ``due``."""
    return human_in(seconds).removeprefix("in ").replace(" min", "m").replace(" ", "")


def note(plan: Plan, now: datetime) -> str:
    """The end of a pending pod's message: ``; Slurm expects it to start at T (in 12
    min), planned by Slurm's backfill``, ``; slurm-bridge expects it to start at T (in 7
    min), planned by slurm-bridge from Slurm's queue (Slurm's backfill: T2, reserving
    whole nodes)`` or ``; no start time planned yet`` (read back by :func:`strip_note`)."""
    if plan.start is None:
        return NOTE_SEP + NO_PLAN + (NO_LIMIT if plan.unknowable else "")
    ahead = human_in((plan.start - now).total_seconds())
    if plan.by == BY_BRIDGE:
        slurm = (
            f" (Slurm's backfill: {rfc3339(plan.slurm_start)}, reserving whole nodes)"
            if plan.slurm_start is not None
            else ""
        )
        by = PLANNED_BY[BY_BRIDGE]
        return f"{NOTE_SEP}{BRIDGE_EXPECTS}{rfc3339(plan.start)} ({ahead}), {by}{slurm}"
    return f"{NOTE_SEP}{EXPECTS}{rfc3339(plan.start)} ({ahead}), {PLANNED_BY[BY_SLURM]}"


def _note_at(message: str) -> int:
    """Where the note :func:`note` put at the end of ``message`` begins (-1: none)."""
    for head in (NOTE_SEP + EXPECTS, NOTE_SEP + BRIDGE_EXPECTS, NOTE_SEP + NO_PLAN):
        i = message.rfind(head)
        if i >= 0:
            return i
    return -1


def strip_note(message: str) -> str:
    """``message`` without the note :func:`note` put at its end."""
    i = _note_at(message)
    return message if i < 0 else message[:i]


def said_by(message: str) -> str | None:
    """Who made the plan ``message``'s note tells (None: it tells none)."""
    i = _note_at(message)
    if i < 0 or message.startswith(NOTE_SEP + NO_PLAN, i):
        return None
    return BY_BRIDGE if message.startswith(NOTE_SEP + BRIDGE_EXPECTS, i) else BY_SLURM


def said_due(message: str) -> bool:
    """The pod's message said its start had come (``(due now)``)."""
    i = _note_at(message)
    return i >= 0 and f"({DUE})" in message[i:]


def moved(shown: datetime | None, start: datetime | None, step: float) -> bool:
    """The plan appeared, went away, or moved by more than ``step`` seconds."""
    if shown is None or start is None:
        return (shown is None) != (start is None)
    return abs((start - shown).total_seconds()) > step


def stale(
    *,
    shown: datetime | None,
    message: str,
    new_message: str,
    plan: Plan | None,
    now: datetime | None,
    step: float,
) -> bool:
    """A pod showing ``message`` and the annotation ``shown`` must be written again to show
    ``new_message`` and ``plan`` at ``now``: its reason changed (the message without its
    note), its plan moved by more than ``step`` seconds (or appeared, or went away), or
    the plan crossed "now" since the pod was told (it said "in 3 min" and the time has
    come, or it said "due now" and Slurm moved the start ahead). ``plan`` None: the new
    message tells no plan (the job is known from the pods' record only): only the reason
    counts."""
    if strip_note(message) != strip_note(new_message):
        return True
    if plan is None or now is None:
        return False
    if plan.start is None:
        return shown is not None or not message.endswith(note(plan, now))
    if moved(shown, plan.start, step) or said_by(message) != plan.by:
        return True
    return said_due(message) != (plan.start <= now)


def crossed(start: datetime | None, since: datetime, now: datetime) -> bool:
    """``start`` came between ``since`` and ``now``: the pods said "in ..." and it is due."""
    return start is not None and since < start <= now


def replanned(old: Plan, new: Plan, *, then: datetime, now: datetime, step: float) -> bool:
    """A pending job's plan made at ``now`` (``new``) is news against the one its group
    holds (``old``, from a read before ``then``, the last look): the plan appeared, went
    away (or a year ahead), changed hands, moved by more than ``step`` seconds, or came
    due since ``then``."""
    return (
        old.unknowable != new.unknowable
        or (old.start is not None and new.start is not None and old.by != new.by)
        or moved(old.start, new.start, step)
        or crossed(new.start, then, now)
    )
