"""Dangling jobs: active Slurm jobs of ours whose pods are all gone from Kubernetes.

Pods deleted while the controller was down leave no DELETED event to react to; this
periodic sweep (``slurmResyncIntervalSeconds``) finds such jobs by their admin_comment
back-link and cancels them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bridge.slurm.models import SlurmJob
from bridge.translate import back_link, link_is_ours, pod_belongs
from controller.model import Action, CancelJob, KubeObject


def ours(job: SlurmJob, mcs_label: str) -> tuple[str, ...] | None:
    """The pods an active job of ours names, or None when it is not ours / not active.

    A job whose back-link (or, for older links, mcs_label) names another cluster's mcs
    label belongs to another bridge.
    """
    if not job.state.active:
        return None
    if job.het_job_id is not None and job.het_job_id != job.job_id:
        # a hetjob's component: the pods carry its leader's id, and the leader, read by
        # its id, stands for every component (cancelling it cancels them all)
        return None
    pods: list[str] = []
    for c in job.components:
        link = back_link(c.admin_comment)
        if link is None or not link_is_ours(link, c.mcs_label, mcs_label):
            return None
        pods += link.pods
    return tuple(pods)


def candidates(jobs: Sequence[SlurmJob], mcs_label: str) -> dict[int, tuple[str, ...]]:
    """job id -> pods (``ns/name``) named, for every active job of ours."""
    out: dict[int, tuple[str, ...]] = {}
    for job in jobs:
        pods = ours(job, mcs_label)
        if pods is not None:
            out[job.job_id] = pods
    return out


def plan(
    named: Mapping[int, tuple[str, ...]], pods: Mapping[str, KubeObject | None]
) -> list[Action]:
    """Cancel every candidate none of whose named pods exists (``pods``: key -> pod/None)."""
    actions: list[Action] = []
    for job_id, keys in sorted(named.items()):
        if not any(pod_belongs(job_id, pods.get(k)) for k in keys):
            actions.append(CancelJob(job_id, "dangling: its pods are gone from Kubernetes"))
    return actions
