"""Submitting jobs to Slurm: ``submit`` (queued) and ``allocate`` (started now).

**Submit is never retried.** A submit whose answer was lost (timeout, connection reset,
5xx) may or may not have created a job: Slurm has no idempotency key. The rule is:

1. the caller gives every job an identity it can find again: ``admin_comment`` (the
   bridge writes the group's UID there) and/or ``name``;
2. after a ``SlurmUnavailable`` from :meth:`SlurmSubmitting.submit`, the caller scans the
   active jobs (:meth:`~bridge.slurm.fetching.SlurmFetching.scan_jobs`) for one whose
   back-link names the group and adopts it instead of submitting again;
3. only when none is found does it submit again; a periodic sweep cancels strays (jobs
   whose identity matches no live group).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bridge.errors import SlurmBusy
from bridge.logging import get_logger
from bridge.models import JobSpec
from bridge.slurm.api import SlurmApi
from bridge.slurm.models import Allocated, AllocateOutcome, AllocationRefused, SubmitResult

_log = get_logger("bridge.slurm")


def _queued_despite_errors(parsed: Any) -> bool:
    """A submit answer with a job id: the job is queued, whatever ``errors[]`` says.
    slurmctld queues a job and then reports why it cannot start yet as the submit's return
    code: topology/block's "No suitable topology unit found" (7203) comes back as HTTP 500
    with ``job_id`` set and the job PENDING (measured on 26.05). Raising would make the
    caller submit the same group again."""
    job_id = parsed.get("job_id") if isinstance(parsed, Mapping) else None
    return isinstance(job_id, int) and not isinstance(job_id, bool) and job_id > 0


class SlurmSubmitting(SlurmApi):
    """The two calls that create a job; neither is retried."""

    async def submit_result(self, spec: JobSpec) -> SubmitResult:
        """Submit ``spec`` once (never retried: see the module docstring)."""
        c = await self.codec()
        body = c.encode_submit(spec)
        resp = await self.request(
            "POST",
            c.path("job/submit"),
            endpoint="job_submit",
            idempotent=False,
            body=body,
            accept=_queued_despite_errors,
        )
        result = c.decode_submit(resp.body)
        for w in result.warnings:
            _log.info("slurm_submit_warning", job_id=result.job_id, warning=w.description)
        return result

    async def submit(self, spec: JobSpec) -> int:
        """Submit ``spec`` (external placeholder or batch) and return the job id."""
        return (await self.submit_result(spec)).job_id

    async def allocate(self, spec: JobSpec) -> AllocateOutcome:
        """Start the external job ``spec`` NOW (``POST job/allocate``, ``immediate``).

        :class:`Allocated`: it is RUNNING when this returns (~5 ms on 26.05).
        :class:`AllocationRefused`: Slurm cannot start it now (busy, or a job pending in
        the partition comes first); it left a FAILED record with ``spec``'s name and
        comments, and no job id. Other rejections raise :class:`SlurmRejected`; a lost
        answer raises :class:`SlurmUnavailable` and, as for :meth:`submit`, the job may
        exist: never retried here, the caller looks it up by identity.
        """
        c = await self.codec()
        body = c.encode_allocate(spec)
        try:
            resp = await self.request(
                "POST", c.path("job/allocate"), endpoint="job_allocate", idempotent=False, body=body
            )
        except SlurmBusy as e:
            return AllocationRefused(error_number=e.error_number, message=e.slurm_message)
        result = c.decode_submit(resp.body)
        return Allocated(job_id=result.job_id, user_msg=result.user_msg, warnings=result.warnings)


__all__ = ["SlurmSubmitting"]
