"""Carry out the reconcilers' actions. Every action is idempotent (safe to repeat).

Failures are logged and re-raised as a whole at the end, so the worker requeues the key
with backoff; the other actions of the same plan still happen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bridge.errors import BridgeError, KubeNotFound, SlurmNotFound
from bridge.kube.client import KubeClient
from bridge.kube.events import EventRecorder
from bridge.kube.resources import PODS
from bridge.logging import get_logger
from bridge.slurm.client import SlurmClient
from bridge.wellknown import CONDITION_SLURM_JOB_ENDED, FINALIZER, TAINT_SLURM_NODE_UNAVAILABLE
from controller.model import (
    ACTION_KINDS,
    Action,
    CancelJob,
    DeletePod,
    DrainSlurmNode,
    FailPod,
    RemoveFinalizer,
    ResumeSlurmNode,
    SetPodGroupPhase,
    TaintNode,
    UntaintNode,
)

log = get_logger("controller.apply")


class ApplyFailed(BridgeError):
    """Some actions of a plan failed (the key is retried)."""


class Applier:
    def __init__(
        self,
        slurm: SlurmClient,
        kube: KubeClient,
        events: EventRecorder | None = None,
        on_applied: Callable[[str], None] | None = None,
    ) -> None:
        self.slurm = slurm
        self.kube = kube
        self.events = events
        self.on_applied = on_applied

    async def apply(self, actions: Sequence[Action]) -> None:
        errors: list[str] = []
        for action in actions:
            try:
                await self._one(action)
            except (KubeNotFound, SlurmNotFound):
                pass  # already gone: the goal is reached
            except BridgeError as e:
                log.warning("action_failed", action=type(action).__name__, error=str(e))
                errors.append(f"{type(action).__name__}: {e}")
                continue
            kind = ACTION_KINDS[type(action)]
            log.info("drift_corrected", kind=kind, action=repr(action))
            if self.on_applied is not None:
                self.on_applied(kind)
        if errors:
            raise ApplyFailed("; ".join(errors))

    async def _event(self, namespace: str, name: str, reason: str, message: str) -> None:
        if self.events is None:
            return
        ref = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"namespace": namespace, "name": name},
        }
        await self.events.record(ref, "Warning", reason, message)

    async def _one(self, a: Action) -> None:
        match a:
            case FailPod():
                cond = {
                    "type": CONDITION_SLURM_JOB_ENDED,
                    "status": "True",
                    "reason": a.reason,
                    "message": a.message,
                }
                await self.kube.fail_pod(
                    a.namespace, a.name, reason=a.reason, message=a.message, conditions=[cond]
                )
                await self._event(a.namespace, a.name, a.reason, a.message)
            case DeletePod():
                await self._event(a.namespace, a.name, a.reason, a.message)
                if a.grace_period_seconds == 0:
                    # Force: no kubelet will ever confirm; the finalizer must go first.
                    await self.kube.remove_finalizer(PODS, a.name, FINALIZER, a.namespace)
                await self.kube.delete_pod(
                    a.namespace, a.name, grace_period_seconds=a.grace_period_seconds
                )
            case RemoveFinalizer():
                await self.kube.remove_finalizer(PODS, a.name, FINALIZER, a.namespace)
            case CancelJob():
                log.info("job_cancel", job_id=a.job_id, why=a.why)
                await self.slurm.cancel(a.job_id)
            case SetPodGroupPhase():
                await self.kube.patch_podgroup_status(a.namespace, a.name, {"phase": a.phase})
            case DrainSlurmNode():
                await self.slurm.drain_node(a.slurm_node, a.reason)
            case ResumeSlurmNode():
                await self.slurm.resume_node(a.slurm_node)
            case TaintNode():
                taint = {
                    "key": TAINT_SLURM_NODE_UNAVAILABLE,
                    "value": a.value,
                    "effect": "NoSchedule",
                }
                await self.kube.add_node_taint(a.node, taint)
            case UntaintNode():
                await self.kube.remove_node_taint(a.node, TAINT_SLURM_NODE_UNAVAILABLE)
