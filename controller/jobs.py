"""Jobs reconciler (Slurm -> Kubernetes): pods outlive their Slurm job.

A job that ended in Slurm (CANCELLED, TIMEOUT, PREEMPTED, NODE_FAIL, FAILED, COMPLETED,
BOOT_FAIL, DEADLINE, OUT_OF_MEMORY) or is definitely gone while its pods still run or
wait: policy ``fail`` marks each pod Failed with reason ``SlurmJob<State>`` and a message
naming the state and Slurm's reason; policy ``delete`` deletes them (upstream's way).
A PodGroup's status phase follows (Failed; Finished when every pod Succeeded). A job
Slurm selected for preemption (still RUNNING for its GraceTime: controller/preemption.py)
is treated as PREEMPTED at once, so its pods stop while Slurm still holds the nodes.
A heterogeneous job (docs/hetjob.md) is one unit: its pods all carry the leader's id, and
any component that ended or is being preempted ends every pod of the gang, with that
component's state and reason.

A job Slurm ended for a reason outside the workload (:data:`DISRUPTION_STATES`: preempted,
node or boot failure, time limit, deadline, cancelled from outside, or gone) also gives
its pods the condition ``DisruptionTarget=True`` (reason ``SlurmJob<State>``, the message
naming the state), as kube-scheduler's preemption and the taint manager do: a Job's
``podFailurePolicy`` can then ignore it. A program's own failure (FAILED, OUT_OF_MEMORY)
or end (COMPLETED) is no disruption.

Where Slurm preempts the job (selected for preemption, or ended ``PREEMPTED``, a hetjob's
component too), the built-in PodGroups (``scheduling.k8s.io``) its pods name get
``DisruptionTarget=True`` with reason ``PreemptionByScheduler`` and the message naming the
job, as kube-scheduler sets it on a PodGroup it preempts (1.37; their gang
CompositePodGroup too, found by the applier): once per PodGroup and job (``marked``: those
already written), whether or not a pod is left to stop.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Literal

from bridge.translate import kobj
from bridge.wellknown import LABEL_POD_GROUP
from bridge.workloads.builtin import podgroup_name
from controller.model import (
    Action,
    DeletePod,
    DisruptPodGroup,
    FailPod,
    JobKind,
    KubeObject,
    SetPodGroupPhase,
    SlurmJobStatus,
    has_finalizer,
    pod_done,
    pod_ns_name,
    pod_phase,
)

Policy = Literal["fail", "delete"]

# Slurm's end states that say "ended from outside the workload" (docs/controller.md).
# CANCELLED counts: the bridge cancels a job only once its pods have all stopped, so a
# job cancelled under running pods was cancelled by someone else (an operator's scancel).
DISRUPTION_STATES = frozenset(
    {"PREEMPTED", "NODE_FAIL", "BOOT_FAIL", "TIMEOUT", "DEADLINE", "CANCELLED"}
)


def is_disruption(view: SlurmJobStatus) -> bool:
    """Slurm ended (or lost) the job, or is preempting it, for a reason outside the
    workload."""
    return (
        view.preempted
        or view.kind is JobKind.GONE
        or (
            (view.kind is JobKind.ENDED or view.component_ended) and view.state in DISRUPTION_STATES
        )
    )


def is_preemption(view: SlurmJobStatus) -> bool:
    """Slurm preempts the job: selected for preemption (its GraceTime runs), or ended
    ``PREEMPTED`` (the whole job, or a hetjob's component)."""
    ended = view.kind is JobKind.ENDED or view.component_ended
    return view.preempted or (ended and view.state == "PREEMPTED")


def reason_for(view: SlurmJobStatus) -> str:
    """``SlurmJobCancelled``, ``SlurmJobNodeFail``, ``SlurmJobOutOfMemory``, ``SlurmJobGone``."""
    if view.kind is JobKind.GONE:
        return "SlurmJobGone"
    if view.preempted:
        return "SlurmJobPreempted"
    words = view.state.replace("-", "_").split("_")
    return "SlurmJob" + "".join(w.capitalize() for w in words if w)


def message_for(job_id: int, view: SlurmJobStatus) -> str:
    if view.kind is JobKind.GONE:
        return f"Slurm job {job_id} no longer exists in Slurm"
    if view.preempted:
        return (
            f"Slurm job {job_id} was selected for preemption: it keeps its nodes only "
            "for its partition's GraceTime"
        )
    msg = f"Slurm job {job_id} ended with state {view.state}"
    if view.reason and view.reason != "None":
        msg += f" (reason: {view.reason})"
    if view.component:
        msg += f" in hetjob component {view.component}: every pod of the gang stops"
    return msg


def _pod_groups(pods: Sequence[KubeObject]) -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for p in pods:
        group = kobj.labels(p).get(LABEL_POD_GROUP)
        if group:
            out.add((pod_ns_name(p)[0], str(group)))
    return out


def _builtin_podgroups(pods: Sequence[KubeObject]) -> list[tuple[str, str]]:
    """The built-in PodGroups ``pods`` name (``spec.schedulingGroup.podGroupName``)."""
    return sorted({(pod_ns_name(p)[0], g) for p in pods if (g := podgroup_name(p))})


def plan(
    job_id: int,
    pods: Sequence[KubeObject],
    view: SlurmJobStatus,
    policy: Policy,
    marked: AbstractSet[tuple[str, str]] = frozenset(),
) -> list[Action]:
    if not (view.finished or view.preempted or view.component_ended):
        return []
    reason, message = reason_for(view), message_for(job_id, view)
    disruption = is_disruption(view)
    disrupted: list[Action] = []
    if is_preemption(view):
        disrupted = [
            DisruptPodGroup(ns, g, message)
            for ns, g in _builtin_podgroups(pods)
            if (ns, g) not in marked
        ]
    actions: list[Action] = []
    for pod in pods:
        if pod_done(pod):
            continue
        ns, name = pod_ns_name(pod)
        if policy == "delete":
            actions.append(DeletePod(ns, name, reason, message, disruption=disruption))
        else:
            actions.append(FailPod(ns, name, reason, message, disruption=disruption))
    if actions:
        actions += [SetPodGroupPhase(ns, g, "Failed") for ns, g in sorted(_pod_groups(pods))]
    elif (
        pods
        and all(pod_phase(p) == "Succeeded" for p in pods)
        and any(has_finalizer(p) for p in pods)
    ):
        actions += [SetPodGroupPhase(ns, g, "Finished") for ns, g in sorted(_pod_groups(pods))]
    return disrupted + actions
