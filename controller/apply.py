"""Carry out the reconcilers' actions. Every action is idempotent (safe to repeat).

Failures are logged and re-raised as a whole at the end, so the worker requeues the key
with backoff; the other actions of the same plan still happen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bridge.errors import BridgeError, KubeNotFound, SlurmNotFound, SlurmRejected
from bridge.kube.client import KubeClient
from bridge.kube.events import EventKind, EventRecorder
from bridge.kube.resources import PODS, RESOURCE_CLAIMS, KubeObject, Resource
from bridge.logging import get_logger
from bridge.slurm.client import SlurmClient
from bridge.slurm.updating import NODE_ALREADY_EXISTS
from bridge.translate import kobj
from bridge.translate.dra import EXTENDED_CLAIM_ANNOTATION
from bridge.wellknown import (
    ANNOTATION_CORDONED_BY_BRIDGE,
    CLAIM_DELETE_PROTECTION,
    CONDITION_DISRUPTION_TARGET,
    CONDITION_SLURM_JOB_ENDED,
    EVENT_EXTERNAL_NODE_NO_GPUS,
    EVENT_EXTERNAL_NODE_PARTITION,
    EVENT_EXTERNAL_NODE_REGISTERED,
    EVENT_EXTERNAL_NODE_REJECTED,
    EVENT_EXTERNAL_NODE_TOPOLOGY,
    FINALIZER,
)
from bridge.workloads import Api
from bridge.workloads.builtin import (
    COMPOSITES,
    PODGROUPS,
    PREEMPTED_REASON,
    min_group_count,
    parent_composite,
)
from controller.model import (
    ACTION_KINDS,
    Action,
    CancelJob,
    CordonNode,
    DeleteClaim,
    DeletePod,
    DeleteSlurmNode,
    DisruptPodGroup,
    DrainSlurmNode,
    FailPod,
    JoinPartition,
    MarkExternalNode,
    NodeWarning,
    RegisterExternalNode,
    ReleaseClaim,
    RemoveFinalizer,
    RemoveNodeCondition,
    ResumeSlurmNode,
    SetNodeCondition,
    SetNodeTopology,
    SetPodGroupPhase,
    TaintNode,
    UncordonNode,
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
        # the built-in PodGroups and CompositePodGroups by plural, once found served
        self._served: dict[str, Resource] = {}

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

    async def _builtin(self, api: Api) -> Resource | None:
        """``api`` (PodGroups, CompositePodGroups) at the newest version the server serves
        (1.37's v1beta1, 1.36's v1alpha2; composites v1alpha3), found by discovery once;
        None while none is served."""
        if api.plural not in self._served:
            for version in api.versions:
                res = Resource(api.group, version, api.plural, api.kind, True, api.builtin)
                if await self.kube.serves(res):
                    self._served[api.plural] = res
                    break
        return self._served.get(api.plural)

    async def _disrupt(self, a: DisruptPodGroup) -> None:
        """The PodGroup's ``DisruptionTarget``, and its parent's where that is a gang
        CompositePodGroup (its children are one hetjob: the whole composite is preempted),
        as kube-scheduler marks the units it preempts."""
        res = await self._builtin(PODGROUPS)
        if res is None:  # not served: no such PodGroup to tell
            log.info("podgroups_not_served", podgroup=a.name)
            return
        podgroup = await self._disruption_target(res, a.namespace, a.name, a.message)
        parent = parent_composite(podgroup)
        composites = await self._builtin(COMPOSITES) if parent else None
        if composites is None:
            return
        composite = await self.kube.get(composites, parent, a.namespace)
        if min_group_count(composite) is not None:
            await self._disruption_target(composites, a.namespace, parent, a.message)

    async def _disruption_target(
        self, res: Resource, namespace: str, name: str, message: str
    ) -> KubeObject:
        return await self.kube.set_status_condition(
            res,
            namespace,
            name,
            CONDITION_DISRUPTION_TARGET,
            True,
            reason=PREEMPTED_REASON,
            message=message,
        )

    async def _event(self, namespace: str, name: str, reason: str, message: str) -> None:
        if self.events is None:
            return
        ref = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"namespace": namespace, "name": name},
        }
        await self.events.record(ref, "Warning", reason, message)

    async def _node_event(self, node: str, kind: EventKind, reason: str, message: str) -> None:
        """Said once per change (a plan that keeps finding the same problem is not spam)."""
        if self.events is None:
            return
        ref: KubeObject = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}}
        await self.events.record_change(ref, kind, reason, message)

    async def _join(self, node: str, slurm_node: str, partition: str) -> None:
        try:
            joined = await self.slurm.add_node_to_partition(partition, slurm_node)
        except SlurmNotFound:
            await self._node_event(
                node,
                "Warning",
                EVENT_EXTERNAL_NODE_PARTITION,
                f"Slurm has no partition {partition!r}: Slurm node {slurm_node} carries the "
                f"feature {partition!r} only (a NodeSet with Feature={partition} picks it up)",
            )
            return
        if not joined:
            log.info("partition_update_unsupported", partition=partition, node=slurm_node)

    async def _register(self, a: RegisterExternalNode) -> None:
        gres = a.gres or None
        try:
            await self.slurm.create_external_node(
                a.slurm_node,
                cpus=a.cpus,
                memory_mib=a.memory_mib,
                features=a.features,
                gres=gres,
            )
        except SlurmRejected as e:
            if e.error_number == NODE_ALREADY_EXISTS:
                pass  # an earlier attempt got through: finish the job
            elif gres is None:
                raise
            else:
                # Slurm 26.05 refuses file-less GPUs on dynamic nodes: register without.
                await self.slurm.create_external_node(
                    a.slurm_node, cpus=a.cpus, memory_mib=a.memory_mib, features=a.features
                )
                await self._node_event(
                    a.node,
                    "Warning",
                    EVENT_EXTERNAL_NODE_NO_GPUS,
                    f"Slurm refused Gres={gres} on dynamic node {a.slurm_node} "
                    f"({e.slurm_message or e}); registered without GPUs (typed GPUs and MIG "
                    "slices need a gres.conf line with File= for the node)",
                )
        await self.slurm.set_node_comment(a.slurm_node, a.comment)
        for p in a.partitions:
            await self._join(a.node, a.slurm_node, p)
        await self._node_event(
            a.node,
            "Normal",
            EVENT_EXTERNAL_NODE_REGISTERED,
            f"registered in Slurm as EXTERNAL node {a.slurm_node}: {a.cpus} CPUs, "
            f"{a.memory_mib} MiB, Gres={a.gres or 'none'}, partitions {','.join(a.partitions)}",
        )

    async def _release_claim(self, a: ReleaseClaim) -> None:
        """Conditional writes (read resourceVersion; a conflict is read again): safe next to
        kube-controller-manager doing the same. As it does, the finalizer goes only when this
        release deallocated the claim, or the claim is being deleted (never between the
        scheduler's finalizer and its allocation of another pod)."""
        cleared = False

        def release(claim: KubeObject) -> KubeObject | None:
            nonlocal cleared
            reserved = list(kobj.sequence(claim, "status", "reservedFor"))
            left = [r for r in reserved if kobj.get(r, "uid") != a.pod_uid]
            cleared = not left and len(left) != len(reserved)
            if len(left) == len(reserved):
                return None  # not (or no longer) a consumer
            status: KubeObject = {"reservedFor": left or None}
            if not left:
                status["allocation"] = None
            return {"status": status}

        def unprotect(claim: KubeObject) -> KubeObject | None:
            fins = list(kobj.sequence(claim, "metadata", "finalizers"))
            allocated = kobj.get(claim, "status", "allocation") is not None
            if allocated or CLAIM_DELETE_PROTECTION not in fins:
                return None
            if not (cleared or kobj.get(claim, "metadata", "deletionTimestamp")):
                return None
            return {"metadata": {"finalizers": [f for f in fins if f != CLAIM_DELETE_PROTECTION]}}

        ns = a.namespace
        claim = await self.kube.modify(
            RESOURCE_CLAIMS, a.claim, release, namespace=ns, subresource="status"
        )
        if unprotect(claim) is not None:
            await self.kube.modify(RESOURCE_CLAIMS, a.claim, unprotect, namespace=ns)

    async def _delete_claim(self, a: DeleteClaim) -> None:
        claim = await self.kube.get(RESOURCE_CLAIMS, a.claim, a.namespace)
        ours = kobj.annotations(claim).get(EXTENDED_CLAIM_ANNOTATION) == "true" and any(
            kobj.get(r, "uid") == a.pod_uid and kobj.get(r, "controller")
            for r in kobj.sequence(claim, "metadata", "ownerReferences")
        )
        if ours and not kobj.get(claim, "metadata", "deletionTimestamp"):
            await self.kube.delete(RESOURCE_CLAIMS, a.claim, a.namespace, uid=kobj.uid(claim))

    async def _one(self, a: Action) -> None:
        match a:
            case FailPod():
                types = [CONDITION_SLURM_JOB_ENDED]
                if a.disruption:
                    types.append(CONDITION_DISRUPTION_TARGET)
                conds = [
                    {"type": t, "status": "True", "reason": a.reason, "message": a.message}
                    for t in types
                ]
                await self.kube.fail_pod(
                    a.namespace, a.name, reason=a.reason, message=a.message, conditions=conds
                )
                await self._event(a.namespace, a.name, a.reason, a.message)
            case DeletePod():
                await self._event(a.namespace, a.name, a.reason, a.message)
                if a.disruption:  # as the taint manager: the condition, then the delete
                    await self.kube.set_pod_condition(
                        a.namespace,
                        a.name,
                        CONDITION_DISRUPTION_TARGET,
                        True,
                        reason=a.reason,
                        message=a.message,
                    )
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
            case DisruptPodGroup():
                await self._disrupt(a)
            case DrainSlurmNode():
                await self.slurm.drain_node(a.slurm_node, a.reason)
            case ResumeSlurmNode():
                await self.slurm.resume_node(a.slurm_node)
            case TaintNode():
                taint = {"key": a.key, "value": a.value, "effect": a.effect}
                await self.kube.add_node_taint(a.node, taint)
            case UntaintNode():
                await self.kube.remove_node_taint(a.node, a.key)
            case CordonNode():
                patch = {
                    "metadata": {"annotations": {ANNOTATION_CORDONED_BY_BRIDGE: "true"}},
                    "spec": {"unschedulable": True},
                }
                await self.kube.patch_node(a.node, patch, patch_type="merge")
            case UncordonNode():
                patch = {
                    "metadata": {"annotations": {ANNOTATION_CORDONED_BY_BRIDGE: None}},
                    "spec": {"unschedulable": False},
                }
                await self.kube.patch_node(a.node, patch, patch_type="merge")
            case RegisterExternalNode():
                try:
                    await self._register(a)
                except SlurmRejected as e:
                    # e.g. MaxNodeCount reached: say so on the node, then retry with backoff.
                    await self._node_event(
                        a.node,
                        "Warning",
                        EVENT_EXTERNAL_NODE_REJECTED,
                        f"Slurm refused to register node {a.slurm_node}: {e}",
                    )
                    raise
            case MarkExternalNode():
                await self.slurm.set_node_comment(a.slurm_node, a.comment)
            case JoinPartition():
                await self._join(a.node, a.slurm_node, a.partition)
            case SetNodeTopology():
                try:
                    await self.slurm.set_node_topology(a.slurm_node, a.topology)
                except SlurmRejected as e:
                    # e.g. a block topology.yaml does not define: Slurm's words on the node
                    await self._node_event(
                        a.node,
                        "Warning",
                        EVENT_EXTERNAL_NODE_TOPOLOGY,
                        f"Slurm refused Topology={a.topology} for node {a.slurm_node}: "
                        f"{e.slurm_message or e}",
                    )
                    raise
            case DeleteSlurmNode():
                await self.slurm.delete_node(a.slurm_node)
                log.info("external_node_deleted", slurm_node=a.slurm_node)
            case SetNodeCondition():
                await self.kube.set_node_condition(
                    a.node, a.type, a.status, reason=a.reason, message=a.message
                )
            case RemoveNodeCondition():
                await self.kube.remove_node_condition(a.node, a.type)
            case NodeWarning():
                await self._node_event(a.node, "Warning", a.reason, a.message)
            case ReleaseClaim():
                await self._release_claim(a)
            case DeleteClaim():
                await self._delete_claim(a)
