"""An allocation is never held for pods that cannot be bound.

Once Slurm has started a group's job, binding its pods takes four steps
(:meth:`scheduler.bind.Binder.bind_group`): assign the pods to the job's nodes, link each pod
to its node, write the DRA claims' allocation, post the Bindings. When a step keeps failing
(a claim write refused by RBAC, a pod deleted, a node gone), Slurm would otherwise hold the
allocation for nothing. After ``scheduler.bindGiveUpAttempts`` failures or
``scheduler.bindGiveUpSeconds`` since the first one, whichever comes first, the scheduler
gives the job back (:meth:`scheduler.cycle.Scheduler.release`): it cancels it, takes the job
off the pods, says why (PodScheduled reason naming the step, a Warning event) and queues
the group afresh (with the reject backoff).

:class:`BindFailures` is the pure bookkeeping: it never talks to Slurm or Kubernetes and
takes the time as an argument. Its state is in memory: a restarted scheduler starts
counting again (the bound is then per scheduler lifetime).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Step = Literal["assign", "link", "claims", "bind"]

# PodScheduled reason of pods whose job was given back, by the step that kept failing
REASONS: dict[Step, str] = {
    "assign": "NodeAssignmentFailed",
    "link": "PodLinkFailed",
    "claims": "ClaimAllocationFailed",
    "bind": "BindingFailed",
}
# PodScheduled reason of pods whose job was given back because the devices Slurm gave and
# the node's ResourceSlices disagree (a MIG slice Slurm gave that the slices do not show,
# of another profile than asked, or not fitting its GPU's counters)
REASON_DEVICE_MISMATCH = "SlurmDevicesMismatch"
_WHAT: dict[Step, str] = {
    "assign": "placing the pods on the job's nodes",
    "link": "recording the job and node on the pods",
    "claims": "writing the ResourceClaims' allocation",
    "bind": "binding the pods",
}


@dataclass(frozen=True)
class GiveBack:
    """Cancel ``job_id`` and queue its group afresh; ``reason``/``message`` for the pods."""

    job_id: int
    step: Step
    reason: str
    message: str
    # the Kubernetes node whose devices and Slurm's disagree: not asked of Slurm for the
    # group again until its ResourceSlices change (scheduler.state.GroupState.device_excluded)
    node: str | None = None
    fingerprint: str = ""  # of the node's ResourceSlices then (devices.slices_fingerprint)


@dataclass
class _Failing:
    first: float
    tries: int = 0


class BindFailures:
    """Failures of the binding steps per running job; :meth:`failed` says when to give up."""

    def __init__(self, max_attempts: int, max_seconds: float) -> None:
        self.max_attempts = max_attempts
        self.max_seconds = max_seconds
        self._jobs: dict[int, _Failing] = {}

    def failed(
        self, job_id: int, step: Step, error: str, now: float, *, counts: bool = True
    ) -> GiveBack | None:
        """Record a failed ``step``; a :class:`GiveBack` once the bound is reached.
        ``counts=False``: a wait on someone else (claims not created yet) counts toward the
        time bound only."""
        f = self._jobs.setdefault(job_id, _Failing(first=now))
        if counts:
            f.tries += 1
        waited = now - f.first
        if f.tries < self.max_attempts and waited < self.max_seconds:
            return None
        del self._jobs[job_id]
        detail = f"{_WHAT[step]} failed {f.tries} times in {waited:.0f} s: {error}"
        return GiveBack(job_id, step, REASONS[step], _given_back(job_id, detail))

    def give_back_now(
        self,
        job_id: int,
        step: Step,
        reason: str,
        error: str,
        *,
        node: str | None = None,
        fingerprint: str = "",
    ) -> GiveBack:
        """Give the job back at once: a failure that retrying cannot mend (Slurm's devices
        and ``node``'s ResourceSlices, as ``fingerprint`` says they were, disagree)."""
        self._jobs.pop(job_id, None)
        return GiveBack(job_id, step, reason, _given_back(job_id, error), node, fingerprint)

    def succeeded(self, job_id: int) -> None:
        self._jobs.pop(job_id, None)

    def __len__(self) -> int:
        return len(self._jobs)


def _given_back(job_id: int, detail: str) -> str:
    """What the pods are told when their job is given back, with why."""
    return f"Slurm job {job_id} given back to Slurm (cancelled, the group queued again): {detail}"
