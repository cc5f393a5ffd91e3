"""The Kubernetes client the components use: the verbs on any resource, and the operations
on the objects the bridge works with.

:class:`KubeClient` is the request path (:mod:`bridge.kube.api`, credentials and TLS from
:mod:`bridge.kube.auth`) with the verbs (:mod:`bridge.kube.fetching`,
:mod:`bridge.kube.creating`, :mod:`bridge.kube.patching`, :mod:`bridge.kube.deleting`),
plus what this module adds: pods (conditions, failing, deleting, idempotent binding),
nodes (taints), namespaces and PodGroup status. :mod:`bridge.kube.watch`,
:mod:`bridge.kube.events` and :mod:`bridge.kube.leader` build on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bridge.errors import KubeConflict, KubeNotFound
from bridge.kube.api import error_for_status, status_text
from bridge.kube.creating import KubeCreating
from bridge.kube.deleting import KubeDeleting
from bridge.kube.fetching import ObjectList
from bridge.kube.patching import KubePatching, PatchType
from bridge.kube.resources import (
    NAMESPACES,
    NODES,
    PODGROUPS,
    PODS,
    KubeObject,
    Resource,
    format_time,
)
from bridge.text import clip
from bridge.wellknown import CONDITION_POD_SCHEDULED

# The longest pod condition (or Failed) message we write: it may quote tenant text.
CONDITION_MESSAGE_MAX = 2048


class KubeClient(KubePatching, KubeCreating, KubeDeleting):
    """The verbs of :mod:`bridge.kube.api`'s one session, and the operations on pods, nodes,
    namespaces and PodGroups.

    Build it with :meth:`connect` (kubeconfig or in-cluster) or :meth:`from_config`; close
    it with :meth:`close` or ``async with``.
    """

    # -- pods -------------------------------------------------------------------------
    async def get_pod(self, namespace: str, name: str) -> KubeObject:
        return await self.get(PODS, name, namespace)

    async def list_pods(
        self,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ObjectList:
        return await self.list(
            PODS, namespace, label_selector=label_selector, field_selector=field_selector
        )

    async def patch_pod(
        self, namespace: str, name: str, patch: Any, *, patch_type: PatchType = "strategic"
    ) -> KubeObject:
        return await self.patch(PODS, name, patch, namespace=namespace, patch_type=patch_type)

    async def patch_pod_status(
        self, namespace: str, name: str, patch: Any, *, patch_type: PatchType = "strategic"
    ) -> KubeObject:
        """Patch ``pods/{name}/status`` (strategic merge: conditions merge by type)."""
        return await self.patch(
            PODS, name, patch, namespace=namespace, patch_type=patch_type, subresource="status"
        )

    async def set_pod_condition(
        self,
        namespace: str,
        name: str,
        cond_type: str,
        status: bool,
        *,
        reason: str,
        message: str,
        pod: KubeObject | None = None,
    ) -> KubeObject:
        """Set one pod condition; no request when it already says exactly this.

        ``lastTransitionTime`` moves only when the status flips (as kubelet/scheduler do).
        Pass the ``pod`` you hold to save a read. ``message`` is clipped
        (:func:`bridge.text.clip`): it may quote tenant text.
        """
        if pod is None:
            pod = await self.get_pod(namespace, name)
        cond = self._changed_condition(
            pod, cond_type, "True" if status else "False", reason, message
        )
        if cond is None:
            return pod
        cond["lastProbeTime"] = None
        return await self.patch_pod_status(namespace, name, {"status": {"conditions": [cond]}})

    async def set_status_condition(
        self,
        res: Resource,
        namespace: str,
        name: str,
        cond_type: str,
        status: bool,
        *,
        reason: str,
        message: str,
    ) -> KubeObject:
        """Set one condition of ``status.conditions`` of an object whose status is a
        subresource and takes merge patches only (a built-in PodGroup, a
        CompositePodGroup): read-modify-write, the other conditions kept; no write when
        it already says exactly this."""

        def change(current: KubeObject) -> KubeObject | None:
            cond = self._changed_condition(
                current, cond_type, "True" if status else "False", reason, message
            )
            if cond is None:
                return None
            others = [
                c
                for c in (current.get("status") or {}).get("conditions") or []
                if c.get("type") != cond_type
            ]
            return {"status": {"conditions": [*others, cond]}}

        return await self.modify(res, name, change, namespace=namespace, subresource="status")

    def _changed_condition(
        self, obj: KubeObject, cond_type: str, want: str, reason: str, message: str
    ) -> dict[str, Any] | None:
        """The condition ``obj`` should carry, or None when it already says exactly this.
        ``lastTransitionTime`` moves only when the status flips; ``message`` is clipped."""
        message = clip(message, CONDITION_MESSAGE_MAX)
        existing = next(
            (
                c
                for c in (obj.get("status") or {}).get("conditions") or []
                if c.get("type") == cond_type
            ),
            None,
        )
        if (
            existing is not None
            and existing.get("status") == want
            and existing.get("reason", "") == reason
            and existing.get("message", "") == message
        ):
            return None
        ltt = (
            existing.get("lastTransitionTime")
            if existing is not None and existing.get("status") == want
            else None
        ) or format_time(self.clock.now())
        return {
            "type": cond_type,
            "status": want,
            "reason": reason,
            "message": message,
            "lastTransitionTime": ltt,
        }

    async def set_pod_unschedulable(
        self,
        namespace: str,
        name: str,
        *,
        reason: str,
        message: str,
        pod: KubeObject | None = None,
    ) -> KubeObject:
        """``PodScheduled=False`` with ``reason``/``message`` (why the pod waits)."""
        return await self.set_pod_condition(
            namespace,
            name,
            CONDITION_POD_SCHEDULED,
            False,
            reason=reason,
            message=message,
            pod=pod,
        )

    async def fail_pod(
        self,
        namespace: str,
        name: str,
        *,
        reason: str,
        message: str,
        conditions: Sequence[KubeObject] = (),
    ) -> KubeObject:
        """Phase ``Failed`` with ``reason``/``message`` (plus our own conditions; the
        message clipped like a condition's)."""
        message = clip(message, CONDITION_MESSAGE_MAX)
        status: dict[str, Any] = {"phase": "Failed", "reason": reason, "message": message}
        if conditions:
            now = format_time(self.clock.now())
            status["conditions"] = [{"lastTransitionTime": now, **c} for c in conditions]
        return await self.patch_pod_status(namespace, name, {"status": status})

    async def delete_pod(
        self,
        namespace: str,
        name: str,
        *,
        grace_period_seconds: int | None = None,
        uid: str | None = None,
    ) -> KubeObject | None:
        """Delete a pod; None when it is already gone."""
        try:
            return await self.delete(
                PODS, name, namespace, grace_period_seconds=grace_period_seconds, uid=uid
            )
        except KubeNotFound:
            return None

    async def bind_pod(
        self,
        namespace: str,
        name: str,
        pod_uid: str,
        node: str,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        """Bind a pod to ``node``. Idempotent. ``annotations``: the API server adds them to
        the pod in the same write as its node (kube-apiserver's BindingREST copies a
        Binding's ``metadata.annotations``, never its labels).

        The server answers 201 with a ``Status`` (the generated typed call raises
        ``ValueError`` parsing it, after binding), so the request is sent raw and the
        status checked here. A 409 means the pod is already bound, the UID does not match
        or the pod is terminating; which one is decided from the pod itself (one GET), not
        from the message text: bound to the same node = success, otherwise
        :class:`KubeConflict` naming what the pod is.
        """
        what = f"bind Pod {namespace}/{name} to node {node}"
        meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": pod_uid}
        if annotations:
            meta["annotations"] = dict(annotations)
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        status, data = await self.raw(
            "POST", PODS.path(namespace, name, "binding"), body=body, what=what
        )
        if 200 <= status < 300:
            return
        if status != 409:
            raise error_for_status(status, data, what)
        _, message = status_text(data)
        pod = await self.get_pod(namespace, name)
        meta = pod.get("metadata") or {}
        bound_to = (pod.get("spec") or {}).get("nodeName") or ""
        if meta.get("uid") != pod_uid:
            raise KubeConflict(
                f"{what}: the pod now has uid {meta.get('uid')}, not {pod_uid}",
                status=409,
                reason="UIDMismatch",
            )
        if bound_to == node:
            return
        if bound_to:
            raise KubeConflict(
                f"{what}: already bound to node {bound_to}", status=409, reason="AlreadyBound"
            )
        if meta.get("deletionTimestamp"):
            raise KubeConflict(f"{what}: the pod is terminating", status=409, reason="Terminating")
        raise KubeConflict(f"{what}: HTTP 409: {message}", status=409, reason="Conflict")

    # -- nodes ------------------------------------------------------------------------
    async def patch_node(
        self, name: str, patch: Any, *, patch_type: PatchType = "strategic"
    ) -> KubeObject:
        return await self.patch(NODES, name, patch, patch_type=patch_type)

    async def add_node_taint(self, name: str, taint: KubeObject) -> KubeObject:
        """Add (or update) the taint with this key+effect; no request when already there."""

        def change(node: KubeObject) -> KubeObject | None:
            taints = list((node.get("spec") or {}).get("taints") or [])
            same = [t for t in taints if _taint_id(t) == _taint_id(taint)]
            if same and all(t.get("value") == taint.get("value") for t in same):
                return None
            kept = [t for t in taints if _taint_id(t) != _taint_id(taint)]
            new = dict(taint)
            if "timeAdded" not in new:
                new["timeAdded"] = format_time(self.clock.now())
            return {"spec": {"taints": [*kept, new]}}

        return await self.modify(NODES, name, change)

    async def remove_node_taint(self, name: str, key: str, effect: str | None = None) -> KubeObject:
        """Remove taints with ``key`` (and ``effect`` when given)."""

        def change(node: KubeObject) -> KubeObject | None:
            taints = list((node.get("spec") or {}).get("taints") or [])
            kept = [
                t
                for t in taints
                if not (t.get("key") == key and (effect is None or t.get("effect") == effect))
            ]
            if len(kept) == len(taints):
                return None
            return {"spec": {"taints": kept}}

        return await self.modify(NODES, name, change)

    async def set_node_condition(
        self,
        name: str,
        cond_type: str,
        status: str,
        *,
        reason: str,
        message: str,
        node: KubeObject | None = None,
    ) -> KubeObject:
        """Set one node condition (``status``: True, False or Unknown) with a strategic
        merge of ``nodes/{name}/status`` (conditions merge by type: the kubelet's stay);
        no request when it already says exactly this."""
        if node is None:
            node = await self.get(NODES, name)
        cond = self._changed_condition(node, cond_type, status, reason, message)
        if cond is None:
            return node
        cond["lastHeartbeatTime"] = format_time(self.clock.now())
        return await self.patch(
            NODES,
            name,
            {"status": {"conditions": [cond]}},
            patch_type="strategic",
            subresource="status",
        )

    async def remove_node_condition(self, name: str, cond_type: str) -> KubeObject:
        """Remove the node condition ``cond_type`` (read-modify-write of the list)."""

        def change(node: KubeObject) -> KubeObject | None:
            conds = list((node.get("status") or {}).get("conditions") or [])
            kept = [c for c in conds if c.get("type") != cond_type]
            return None if len(kept) == len(conds) else {"status": {"conditions": kept}}

        return await self.modify(NODES, name, change, subresource="status")

    # -- namespaces -------------------------------------------------------------------
    async def get_namespace(self, name: str) -> KubeObject:
        return await self.get(NAMESPACES, name)

    # -- PodGroups --------------------------------------------------------------------
    async def patch_podgroup_status(
        self, namespace: str, name: str, status: KubeObject
    ) -> KubeObject:
        """Merge-patch ``podgroups/{name}/status`` (json-patch/strategic would be refused)."""
        return await self.patch(
            PODGROUPS, name, {"status": status}, namespace=namespace, subresource="status"
        )


def _taint_id(taint: Mapping[str, Any]) -> tuple[str, str]:
    return str(taint.get("key") or ""), str(taint.get("effect") or "")


__all__ = ["CONDITION_MESSAGE_MAX", "KubeClient"]
