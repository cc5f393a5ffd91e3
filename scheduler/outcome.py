"""What one cycle's act step did, as far as the work queue goes: the :class:`Outcome`.

The act step (the cycle's arms, :mod:`scheduler.start`, :mod:`scheduler.bind`,
:mod:`scheduler.report`) never touches the work queue: it returns an outcome, and
:meth:`scheduler.cycle.Scheduler.process` requeues the group once, at the end of the
cycle, from it (as kueue's ``schedule()`` records a requeue reason per workload and calls
``requeueAndUpdate`` once). Pure: no I/O, no clock.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Requeue(enum.Enum):
    """When the group is processed again."""

    NONE = "none"  # when something changes: a pod event, the poller, the start-up sweep
    NOW = "now"  # at once (a job was made, updated or read: decide on what it is now)
    AFTER = "after"  # after :attr:`Outcome.after` seconds (a group waiting for members)
    # a step failed, or a job is not settled: the work queue's capped backoff, from
    # :attr:`Outcome.after` seconds (0: from 0.05 s)
    RETRY = "retry"
    REFUSED = "refused"  # a refusal: the same backoff, from scheduler.rejectBackoffSeconds
    AFTER_SWEEP = "after-sweep"  # once the start-up sweep ends


@dataclass(frozen=True)
class Outcome:
    requeue: Requeue = Requeue.NONE
    after: float = 0.0  # seconds, for Requeue.AFTER (the first step of Requeue.RETRY)
    # the group got its job, or its pods were bound: its failures are forgotten first
    forget: bool = False
    # pods of the group were bound: it is processed once more at once, or dropped at once
    # when none is left, whatever ``requeue`` says
    pods_bound: bool = False
    # the step failed with this (the cycle counts and logs it; ``requeue`` is RETRY)
    error: Exception | None = None

    def then(self, later: Outcome) -> Outcome:
        """This outcome followed by a later step's in the same cycle: the later one says
        when; what either forgot or bound stays forgotten or bound."""
        return Outcome(
            later.requeue,
            later.after,
            forget=self.forget or later.forget,
            pods_bound=self.pods_bound or later.pods_bound,
            error=later.error or self.error,
        )


NOTHING = Outcome()
NOW = Outcome(Requeue.NOW)
REFUSED = Outcome(Requeue.REFUSED)


def after(seconds: float) -> Outcome:
    return Outcome(Requeue.AFTER, after=seconds)


def failed(error: Exception, *, forget: bool = False) -> Outcome:
    return Outcome(Requeue.RETRY, forget=forget, error=error)
