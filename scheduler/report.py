"""What the scheduler tells: each waiting pod's PodScheduled=False condition and its
event, the Scheduled events of bound pods, Warnings on pods whose label names another
group's job, and the pending-pods gauge."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping
from datetime import datetime
from typing import Any

from bridge.clock import Clock
from bridge.expected import Plan, parse_rfc3339, stale
from bridge.kube.client import KubeClient
from bridge.kube.events import EventRecorder
from bridge.kube.resources import KubeObject
from bridge.loops import gather
from bridge.translate import foreign_label_message, kobj
from bridge.wellknown import ANNOTATION_EXPECTED_START, REASON_FOREIGN_JOB_LABEL
from scheduler.decide import parse_pending
from scheduler.metrics import SchedulerMetrics
from scheduler.outcome import NOTHING, Outcome, after
from scheduler.state import GroupState, KubeState, scheduled_condition

# An incomplete group's count ("k of n pods exist") is refreshed on its members at most
# this often.
WAITING_REFRESH_SECONDS = 1.0
# An incomplete group is told it waits only once it has waited this long: a gang whose
# members arrive in one burst (a controller creating them) is then complete before any
# "k of n" write, and its binding does not queue behind 2n status writes and events.
WAITING_GRACE_SECONDS = 1.0


# ``slurm_bridge_pending_pods{reason}`` label values at most (the most common first), each
# at most REASON_LABEL_MAX characters: a condition's message can carry tenant text (an
# annotation's value in a refusal), which must not grow /metrics.
PENDING_REASONS_MAX = 32
REASON_LABEL_MAX = 64
OTHER_REASON = "Other"


def pending_reason_labels(counts: Mapping[str, int]) -> dict[str, int]:
    """``counts`` by reason, with at most :data:`PENDING_REASONS_MAX` distinct reasons
    (the rest summed under ``Other``), each cut to :data:`REASON_LABEL_MAX` characters."""
    clipped: dict[str, int] = {}
    for reason, n in counts.items():
        label = reason[:REASON_LABEL_MAX]
        clipped[label] = clipped.get(label, 0) + n
    if len(clipped) <= PENDING_REASONS_MAX:
        return clipped
    ranked = sorted(clipped.items(), key=lambda kv: (-kv[1], kv[0]))
    out = dict(ranked[: PENDING_REASONS_MAX - 1])
    rest = sum(n for _, n in ranked[PENDING_REASONS_MAX - 1 :])
    out[OTHER_REASON] = out.get(OTHER_REASON, 0) + rest
    return out


class Reporter:
    def __init__(
        self,
        kube: KubeClient,
        events: EventRecorder,
        state: KubeState,
        metrics: SchedulerMetrics,
        clock: Clock,
    ) -> None:
        self.kube = kube
        self.events = events
        self.state = state
        self.metrics = metrics
        self.clock = clock
        self._background: set[asyncio.Task[Any]] = set()

    async def foreign_label(self, pods: list[KubeObject], job_id: int) -> None:
        """A Warning on each pod whose job-id label names a job that is not its own."""
        for pod in pods:
            await self.events.record(
                pod, "Warning", REASON_FOREIGN_JOB_LABEL, foreign_label_message(job_id)
            )

    async def unschedulable(
        self, pods: list[KubeObject], reason: str, message: str, *, warning: bool = False
    ) -> None:
        """PodScheduled=False with ``message`` on each pod; an event only when it changed
        (a Warning ``FailedScheduling`` when ``warning``, else a Normal ``Pending``)."""

        async def one(pod: KubeObject) -> None:
            cond = scheduled_condition(pod)
            if cond and cond.get("reason") == reason and cond.get("message") == message:
                return
            updated = await self.kube.set_pod_unschedulable(
                kobj.namespace(pod), kobj.name(pod), reason=reason, message=message, pod=pod
            )
            self.state.written(updated)
            await self.events.record(
                pod,
                "Warning" if warning else "Normal",
                "FailedScheduling" if warning else "Pending",
                message,
            )

        await gather(*(one(p) for p in pods), return_exceptions=True)

    def stale_pods(
        self, pods: list[KubeObject], message: str, plan: Plan | None, now: datetime | None
    ) -> list[KubeObject]:
        """The pods of a pending job whose condition or expected start must be written
        again to show ``message`` and ``plan`` (:func:`bridge.expected.stale`): a plan
        that moved by at most ``scheduler.expectedStartStepSeconds`` is not written."""
        step = self.state.cfg.scheduler.expected_start_step_seconds
        return [
            p
            for p in pods
            if stale(
                shown=parse_rfc3339(kobj.annotations(p).get(ANNOTATION_EXPECTED_START)),
                message=str((scheduled_condition(p) or {}).get("message") or ""),
                new_message=message,
                plan=plan,
                now=now,
                step=step,
            )
        ]

    def expected_shown(self, g: GroupState, plan: Plan | None, now: datetime | None) -> None:
        """The group's pods were shown ``plan``: the first plan shown is remembered, and
        how far ahead it was observed (``slurm_bridge_expected_start_seconds``)."""
        if g.expected_first is None and plan is not None and plan.start and now is not None:
            g.expected_first = plan.start
            ahead = (plan.start - now).total_seconds()
            self.metrics.expected_start_seconds.observe(max(0.0, ahead))

    def started(self, g: GroupState, start: datetime | None) -> None:
        """The group's job started at ``start``: how far off the first plan shown was
        (``slurm_bridge_expected_start_error_seconds``), once."""
        if g.expected_first is not None and start is not None:
            error = abs((start - g.expected_first).total_seconds())
            self.metrics.expected_start_error_seconds.observe(error)
            g.expected_first = None

    async def waiting(
        self, g: GroupState, pods: list[KubeObject], reason: str, message: str
    ) -> Outcome:
        """An incomplete group's condition ("k of n pods exist"). New members are told at
        once; the count on the others is refreshed at most every WAITING_REFRESH_SECONDS,
        so a gang of n arriving pod by pod costs O(n) writes, not O(n^2); and nothing is
        said before the group has waited WAITING_GRACE_SECONDS. The outcome says when the
        group is to be looked at again for that."""
        now = self.clock.monotonic()
        if g.waiting_since is None:
            g.waiting_since = now
        if now - g.waiting_since < WAITING_GRACE_SECONDS:
            return after(WAITING_GRACE_SECONDS - (now - g.waiting_since))
        if g.waiting_said_at is None or now - g.waiting_said_at >= WAITING_REFRESH_SECONDS:
            g.waiting_said_at = now
            await self.unschedulable(pods, reason, message)
            return NOTHING
        fresh = [p for p in pods if scheduled_condition(p) is None]
        if fresh:
            await self.unschedulable(fresh, reason, message)
        return after(WAITING_REFRESH_SECONDS - (now - g.waiting_said_at))

    def scheduled_later(self, bound: list[tuple[KubeObject, str]]) -> None:
        """The Scheduled events of pods just bound, in the background: a gang's bindings
        never wait behind its own events at the API server."""
        self._later(self._scheduled_events(bound))

    async def _scheduled_events(self, bound: list[tuple[KubeObject, str]]) -> None:
        async def one(pod: KubeObject, node: str) -> None:
            msg = f"Successfully assigned {kobj.pod_key(pod)} to {node}"
            await self.events.record(pod, "Normal", "Scheduled", msg)

        await gather(*(one(p, n) for p, n in bound))

    def _later(self, work: Coroutine[Any, Any, None]) -> None:
        """Best-effort work in the background (kept referenced until it ends)."""
        task = asyncio.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def update_gauges(self) -> None:
        """``slurm_bridge_pending_pods{reason}``: Slurm's pending reason (without a
        topology note), else the condition's reason, else New."""
        counts: dict[str, int] = {}
        for pod in self.state.pods.values():
            cond = scheduled_condition(pod) or {}
            pending = parse_pending(str(cond.get("message") or ""))
            reason = str(pending[1] if pending is not None else cond.get("reason", "New"))
            counts[reason] = counts.get(reason, 0) + 1
        counts = pending_reason_labels(counts)
        self.metrics.pending_pods.clear()
        for r, n in counts.items():
            self.metrics.pending_pods.labels(r).set(n)
