"""kube-controller-manager's resourceclaim controller, in the sandbox (what it does: see
:mod:`sandbox.kubeapi.dra_types`). It writes as
``system:serviceaccount:kube-system:resource-claim-controller``, through the admission path."""

from __future__ import annotations

from typing import Any

from bridge.fastjson import clone
from sandbox.controllers.loop import ControllerLoop
from sandbox.kubeapi.admission_chain import Writes
from sandbox.kubeapi.dra_types import (
    CLAIM_KEY,
    DELETE_PROTECTION,
    GROUP,
    POD_CLAIM_NAME,
    RESOURCECLAIM_CONTROLLER,
    TEMPLATE_KEY,
)
from sandbox.kubeapi.errors import ApiError
from sandbox.kubeapi.store import Obj, StoreEvent
from sandbox.kubeapi.verbs import POD_KEY, ObjectApi

_DONE = ("Succeeded", "Failed")


def _owned_by(claim: Obj, pod_uid: str) -> bool:
    return any(
        r.get("uid") == pod_uid and r.get("controller")
        for r in claim["metadata"].get("ownerReferences") or []
    )


class ResourceClaimController(ControllerLoop):
    """kube-controller-manager's resourceclaim controller (see the module docstring)."""

    def __init__(
        self, api: ObjectApi, writes: Writes, *, retry_initial: float = 0.2, retry_max: float = 5.0
    ) -> None:
        super().__init__(api, writes, retry_initial=retry_initial, retry_max=retry_max)

    def _rd(self, plural: str, group: str = GROUP) -> Any:
        return self.api.resolve(group, "v1", plural)

    async def sync_pod(self, pod: Obj) -> bool:
        """Create the pod's claims from its templates; False when something must be retried."""
        md, spec = pod["metadata"], pod.get("spec") or {}
        status = pod.get("status") or {}
        if md.get("deletionTimestamp") or status.get("phase") in _DONE:
            return True
        statuses = list(status.get("resourceClaimStatuses") or [])
        known = {s.get("name") for s in statuses}
        ns, uid = md.get("namespace", ""), md.get("uid", "")
        ok, changed = True, False
        for pc in spec.get("resourceClaims") or []:
            tname = pc.get("resourceClaimTemplateName")
            if not tname or pc.get("name") in known:
                continue
            existing = next(
                (
                    c
                    for c in self.api.store.list(CLAIM_KEY, ns)
                    if _owned_by(c, uid)
                    and (c["metadata"].get("annotations") or {}).get(POD_CLAIM_NAME) == pc["name"]
                ),
                None,
            )
            if existing is None:
                template = self.api.store.get(TEMPLATE_KEY, ns, tname)
                if template is None:
                    ok = False  # kcm retries until the template exists
                    continue
                tmd = (template.get("spec") or {}).get("metadata") or {}
                body = {
                    "apiVersion": f"{GROUP}/v1",
                    "kind": "ResourceClaim",
                    "metadata": {
                        "generateName": f"{md['name'][:28]}-{pc['name'][:28]}-",
                        "labels": dict(tmd.get("labels") or {}),
                        "annotations": {
                            **(tmd.get("annotations") or {}),
                            POD_CLAIM_NAME: pc["name"],
                        },
                        "ownerReferences": [
                            {
                                "apiVersion": "v1",
                                "kind": "Pod",
                                "name": md["name"],
                                "uid": uid,
                                "controller": True,
                                "blockOwnerDeletion": True,
                            }
                        ],
                    },
                    "spec": clone((template.get("spec") or {}).get("spec") or {}),
                }
                try:
                    existing = await self.writes.create(
                        self._rd("resourceclaims"), ns, body, user=RESOURCECLAIM_CONTROLLER
                    )
                except ApiError:
                    ok = False
                    continue
            statuses.append({"name": pc["name"], "resourceClaimName": existing["metadata"]["name"]})
            changed = True
        if changed:
            try:
                await self.writes.patch(
                    self._rd("pods", ""),
                    ns,
                    md["name"],
                    "application/strategic-merge-patch+json",
                    {"metadata": {"uid": uid}, "status": {"resourceClaimStatuses": statuses}},
                    subresource="status",
                    user=RESOURCECLAIM_CONTROLLER,
                )
            except ApiError as e:
                ok = ok and e.code == 404
        return ok

    def _pod_active(self, ns: str, ref: Obj) -> bool:
        pod = self.api.store.get(POD_KEY, ns, str(ref.get("name")))
        return (
            pod is not None
            and pod["metadata"].get("uid") == ref.get("uid")
            and (pod.get("status") or {}).get("phase") not in _DONE
        )

    async def sync_claim(self, claim: Obj) -> bool:
        """Drop finished consumers, deallocate an unused claim, delete a finished pod's
        generated claim."""
        md = claim["metadata"]
        ns = md.get("namespace", "")
        status = claim.get("status") or {}
        reserved = status.get("reservedFor") or []
        rd = self._rd("resourceclaims")
        valid = [
            r
            for r in reserved
            if r.get("resource") != "pods" or r.get("apiGroup") or self._pod_active(ns, r)
        ]
        try:
            owner = next(
                (
                    r
                    for r in md.get("ownerReferences") or []
                    if r.get("controller") and r.get("kind") == "Pod"
                ),
                None,
            )
            if (
                owner is not None
                and not valid
                and not self._pod_active(ns, owner)
                and not md.get("deletionTimestamp")
            ):
                await self.writes.delete(
                    rd,
                    ns,
                    md["name"],
                    {"preconditions": {"uid": md["uid"]}},
                    user=RESOURCECLAIM_CONTROLLER,
                )
            released = False
            if valid != reserved or (
                not valid and status.get("allocation") is not None and md.get("deletionTimestamp")
            ):
                new_status = dict(status)
                if valid:
                    new_status["reservedFor"] = valid
                else:
                    new_status.pop("reservedFor", None)
                    new_status.pop("allocation", None)
                    released = True
                await self.writes.patch(
                    rd,
                    ns,
                    md["name"],
                    "application/merge-patch+json",
                    {"metadata": {"uid": md["uid"]}, "status": new_status or None},
                    subresource="status",
                    user=RESOURCECLAIM_CONTROLLER,
                )
            fresh = self.api.store.get(CLAIM_KEY, ns, md["name"])
            if (
                (released or md.get("deletionTimestamp"))
                and fresh is not None
                and not (fresh.get("status") or {}).get("allocation")
                and DELETE_PROTECTION in (fresh["metadata"].get("finalizers") or [])
            ):
                left = [f for f in fresh["metadata"]["finalizers"] if f != DELETE_PROTECTION]
                await self.writes.patch(
                    rd,
                    ns,
                    md["name"],
                    "application/merge-patch+json",
                    {"metadata": {"finalizers": left or None, "uid": md["uid"]}},
                    user=RESOURCECLAIM_CONTROLLER,
                )
        except ApiError as e:
            return e.code == 404
        return True

    async def handle(self, ev: StoreEvent) -> bool:
        """One store event (or its retry): the object is read again from the store."""
        if ev.key not in (POD_KEY, CLAIM_KEY):
            return True
        if (
            ev.key == POD_KEY
            and ev.type != "DELETED"
            and not (ev.obj.get("spec") or {}).get("resourceClaims")  # immutable
            and (ev.obj.get("status") or {}).get("phase") not in _DONE
        ):
            return True  # no claims to create, and none to release yet (extended ones)
        md = ev.obj["metadata"]
        ns, uid = md.get("namespace", ""), md.get("uid")
        current = self.api.store.get(ev.key, ns, md.get("name", ""))
        if current is not None and current["metadata"].get("uid") != uid:
            current = None
        if ev.key == CLAIM_KEY:
            return current is None or await self.sync_claim(current)
        ok = True
        if current is not None:
            ok = await self.sync_pod(current)
        if current is None or (current.get("status") or {}).get("phase") in _DONE:
            for c in self.api.store.list(CLAIM_KEY, ns):
                reserved = (c.get("status") or {}).get("reservedFor") or []
                if _owned_by(c, str(uid)) or any(r.get("uid") == uid for r in reserved):
                    ok = await self.sync_claim(c) and ok
        return ok

    async def _run(self) -> None:
        await self._event_loop()
