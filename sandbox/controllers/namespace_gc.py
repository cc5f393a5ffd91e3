"""kube-controller-manager's namespace controller and garbage collector, in the sandbox.

Both write through :class:`~sandbox.kubeapi.admission_chain.Writes` as the identities the real
controllers have (``system:serviceaccount:kube-system:namespace-controller`` and
``...:generic-garbage-collector``), so admission webhooks that match their DELETEs are
called, and a webhook that is down blocks them exactly as on a cluster.

Namespace controller: a namespace with a deletionTimestamp (phase Terminating) has every
namespaced object deleted through the API (DELETE, ``propagationPolicy: Background``);
objects with finalizers stay, with their deletionTimestamp, until their owners remove the
finalizers; failed deletions are retried with back-off (``retry_initial`` doubling up to
``retry_max`` seconds). The namespace's status conditions say why it waits, as
kube-controller-manager writes them (``NamespaceDeletionContentFailure``,
``NamespaceContentRemaining``, ``NamespaceFinalizersRemaining``...). The namespace goes
away only once it is empty.

Garbage collector: when an object is removed, its dependents (objects whose
``ownerReferences`` name its uid) are deleted in the background when no other owner
remains, else the dangling reference is removed. An owner deleted with
``propagationPolicy: Orphan`` (finalizer ``orphan``; the default of batch/v1 Jobs) has the
references to it removed from its dependents, then the finalizer; with ``Foreground``
(finalizer ``foregroundDeletion``) its dependents are deleted (foreground too) and the
finalizer goes once no dependent with ``blockOwnerDeletion`` is left. Deviation:
dependents whose owner was already gone when the sandbox started are not collected.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter

from bridge.fastjson import clone
from sandbox.controllers.loop import ControllerLoop
from sandbox.kubeapi.errors import ApiError
from sandbox.kubeapi.identity import GARBAGE_COLLECTOR, NAMESPACE_CONTROLLER
from sandbox.kubeapi.registry import ResourceDef
from sandbox.kubeapi.store import Obj, StoreEvent
from sandbox.kubeapi.verbs import (
    FOREGROUND_FINALIZER,
    NS_KEY,
    ORPHAN_FINALIZER,
)

_BACKGROUND = {"propagationPolicy": "Background"}

_OK = {
    "NamespaceDeletionDiscoveryFailure": (
        "ResourcesDiscovered",
        "All resources successfully discovered",
    ),
    "NamespaceDeletionGroupVersionParsingFailure": (
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    "NamespaceDeletionContentFailure": (
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    "NamespaceContentRemaining": ("ContentRemoved", "All content successfully removed"),
    "NamespaceFinalizersRemaining": (
        "ContentHasNoFinalizers",
        "All content-preserving finalizers finished",
    ),
}


def namespace_conditions(
    failures: list[str], remaining: Counter[str], finalizers: Counter[str], now: str
) -> list[Obj]:
    """The namespace controller's status conditions for one pass over the contents."""
    bad: dict[str, tuple[str, str]] = {}
    if failures:
        bad["NamespaceDeletionContentFailure"] = (
            "ContentDeletionFailed",
            f"Failed to delete all resource types, {len(failures)} remaining: "
            + ", ".join(failures),
        )
    if remaining:
        bad["NamespaceContentRemaining"] = (
            "SomeResourcesRemain",
            "Some resources are remaining: "
            + ", ".join(f"{gr} has {n} resource instances" for gr, n in sorted(remaining.items())),
        )
    if finalizers:
        bad["NamespaceFinalizersRemaining"] = (
            "SomeFinalizersRemain",
            "Some content in the namespace has finalizers remaining: "
            + ", ".join(f"{f} in {n} resource instances" for f, n in sorted(finalizers.items())),
        )
    out = []
    for ctype, (reason, message) in _OK.items():
        status = "True" if ctype in bad else "False"
        reason, message = bad.get(ctype, (reason, message))
        out.append(
            {
                "type": ctype,
                "status": status,
                "lastTransitionTime": now,
                "reason": reason,
                "message": message,
            }
        )
    return out


class NamespaceController(ControllerLoop):
    def _namespaced(self) -> list[ResourceDef]:
        """One served version of every namespaced resource."""
        return list({d.key: d for d in self.api.registry.all() if d.namespaced}.values())

    async def sync(self, namespace: str) -> bool:
        """One pass; True when the namespace is gone (or not terminating)."""
        store = self.api.store
        ns = store.get(NS_KEY, "", namespace)
        if ns is None or not ns["metadata"].get("deletionTimestamp"):
            return True
        failures: list[str] = []
        remaining: Counter[str] = Counter()
        finalizers: Counter[str] = Counter()
        for rd in self._namespaced():
            for obj in store.list(rd.key, namespace):
                name = obj["metadata"]["name"]
                if not obj["metadata"].get("deletionTimestamp"):
                    try:
                        await self.writes.delete(
                            rd, namespace, name, dict(_BACKGROUND), user=NAMESPACE_CONTROLLER
                        )
                    except ApiError as e:
                        if e.code != 404:
                            failures.append(e.message)
                left = store.get(rd.key, namespace, name)
                if left is not None:
                    remaining[rd.group_resource] += 1
                    for f in left["metadata"].get("finalizers") or []:
                        finalizers[f] += 1
        if not failures and not remaining:
            store.remove(NS_KEY, "", namespace)
            return True
        await self._set_conditions(
            ns, namespace_conditions(failures, remaining, finalizers, self.api.now())
        )
        return False

    async def _set_conditions(self, ns: Obj, conditions: list[Obj]) -> None:
        old = {c["type"]: c for c in (ns.get("status") or {}).get("conditions") or []}
        for c in conditions:  # lastTransitionTime moves only when the status does
            prev = old.get(c["type"])
            if prev is not None and prev.get("status") == c["status"]:
                c["lastTransitionTime"] = prev.get("lastTransitionTime", c["lastTransitionTime"])
        if [old.get(c["type"]) for c in conditions] == conditions:
            return
        body = clone(ns)
        body.setdefault("status", {})["conditions"] = conditions
        rd = self.api.resolve("", "v1", "namespaces")
        with contextlib.suppress(ApiError):  # a webhook on namespaces/status may refuse it
            await self.writes.update(
                rd,
                "",
                ns["metadata"]["name"],
                body,
                subresource="status",
                user=NAMESPACE_CONTROLLER,
            )

    async def _run(self) -> None:
        store = self.api.store
        sub = store.subscribe(None)
        loop = asyncio.get_running_loop()
        due: dict[str, float] = {}
        delay: dict[str, float] = {}
        for ns in store.list(NS_KEY):
            if ns["metadata"].get("deletionTimestamp"):
                due[ns["metadata"]["name"]] = loop.time()
        try:
            while True:
                now = loop.time()
                wait = max(min(due.values()) - now, 0.0) if due else None
                with contextlib.suppress(TimeoutError):
                    ev = await asyncio.wait_for(sub.queue.get(), timeout=wait)
                    self._note(ev, due, loop.time())
                while not sub.queue.empty():
                    self._note(sub.queue.get_nowait(), due, loop.time())
                for name in [n for n, t in due.items() if t <= loop.time()]:
                    del due[name]
                    try:
                        done = await self.sync(name)
                    except ApiError:
                        done = False
                    if done:
                        delay.pop(name, None)
                    else:
                        d = min(delay.get(name, self.retry_initial / 2) * 2, self.retry_max)
                        delay[name] = d
                        due[name] = loop.time() + d
        finally:
            store.unsubscribe(sub)

    @staticmethod
    def _note(ev: StoreEvent, due: dict[str, float], now: float) -> None:
        """Namespaces to look at soon: a terminating one changed, or its content did."""
        if ev.key == NS_KEY:
            if ev.type != "DELETED" and ev.obj["metadata"].get("deletionTimestamp"):
                due.setdefault(ev.obj["metadata"]["name"], now)
            return
        ns = ev.obj["metadata"].get("namespace")
        if ns and ns in due and ev.type != "ADDED":
            due[ns] = min(due[ns], now)


class GarbageCollector(ControllerLoop):
    def _owner_alive(self, ref: Obj, namespace: str) -> bool:
        rd = self.api.registry.by_kind(str(ref.get("apiVersion", "")), str(ref.get("kind", "")))
        if rd is None:
            return False
        owner = self.api.store.get(rd.key, namespace if rd.namespaced else "", str(ref.get("name")))
        return owner is not None and owner["metadata"].get("uid") == ref.get("uid")

    def dependents(self, owner: Obj) -> list[tuple[ResourceDef, Obj]]:
        out = []
        served = {d.key: d for d in self.api.registry.all()}
        ns = owner["metadata"].get("namespace") or ""
        for key, obj in self.api.store.dependents(str(owner["metadata"].get("uid") or "")):
            # a namespaced owner owns only objects of its namespace
            if key in served and (not ns or obj["metadata"].get("namespace") == ns):
                out.append((served[key], obj))
        return out

    async def collect(self, owner: Obj) -> bool:
        """Handle the dependents of a removed ``owner``; False when something failed."""
        ok = True
        uid = owner["metadata"].get("uid")
        for rd, obj in self.dependents(owner):
            md = obj["metadata"]
            ns = md.get("namespace", "")
            refs = md.get("ownerReferences") or []
            others = [r for r in refs if r.get("uid") != uid]
            try:
                if any(self._owner_alive(r, ns) for r in others):
                    kept = [r for r in refs if r.get("uid") != uid]
                    await self.writes.patch(
                        rd,
                        ns,
                        md["name"],
                        "application/merge-patch+json",
                        {"metadata": {"ownerReferences": kept, "uid": md["uid"]}},
                        user=GARBAGE_COLLECTOR,
                    )
                elif not md.get("deletionTimestamp"):
                    await self.writes.delete(
                        rd,
                        ns,
                        md["name"],
                        {**_BACKGROUND, "preconditions": {"uid": md["uid"]}},
                        user=GARBAGE_COLLECTOR,
                    )
            except ApiError as e:
                if e.code not in (404, 409):
                    ok = False
        return ok

    def _resource(self, key: tuple[str, str]) -> ResourceDef | None:
        return next((d for d in self.api.registry.all() if d.key == key), None)

    async def _drop_finalizer(self, rd: ResourceDef, obj: Obj, finalizer: str) -> None:
        md = obj["metadata"]
        left = [f for f in md.get("finalizers") or [] if f != finalizer]
        await self.writes.patch(
            rd,
            md.get("namespace", ""),
            md["name"],
            "application/merge-patch+json",
            {"metadata": {"finalizers": left or None, "uid": md["uid"]}},
            user=GARBAGE_COLLECTOR,
        )

    async def finish_owner(self, key: tuple[str, str], owner: Obj) -> bool:
        """An owner being deleted with ``orphan`` or ``foregroundDeletion``: orphan its
        dependents, or delete them (waiting for those with blockOwnerDeletion), then drop
        the finalizer. False when something failed (retried)."""
        rd = self._resource(key)
        md = owner["metadata"]
        fins = md.get("finalizers") or []
        if rd is None or not md.get("deletionTimestamp"):
            return True
        uid = md["uid"]
        try:
            if ORPHAN_FINALIZER in fins:
                for drd, dep in self.dependents(owner):
                    dmd = dep["metadata"]
                    kept = [r for r in dmd.get("ownerReferences") or [] if r.get("uid") != uid]
                    await self.writes.patch(
                        drd,
                        dmd.get("namespace", ""),
                        dmd["name"],
                        "application/merge-patch+json",
                        {"metadata": {"ownerReferences": kept or None, "uid": dmd["uid"]}},
                        user=GARBAGE_COLLECTOR,
                    )
                await self._drop_finalizer(rd, owner, ORPHAN_FINALIZER)
            elif FOREGROUND_FINALIZER in fins:
                blocking = 0
                for drd, dep in self.dependents(owner):
                    dmd = dep["metadata"]
                    refs = [r for r in dmd.get("ownerReferences") or [] if r.get("uid") == uid]
                    if any(r.get("blockOwnerDeletion") for r in refs):
                        blocking += 1
                    if not dmd.get("deletionTimestamp"):
                        await self.writes.delete(
                            drd,
                            dmd.get("namespace", ""),
                            dmd["name"],
                            {
                                "propagationPolicy": "Foreground",
                                "preconditions": {"uid": dmd["uid"]},
                            },
                            user=GARBAGE_COLLECTOR,
                        )
                if blocking == 0:
                    await self._drop_finalizer(rd, owner, FOREGROUND_FINALIZER)
        except ApiError as e:
            return e.code in (404, 409)
        return True

    def _owners_in_foreground(self, obj: Obj) -> list[tuple[tuple[str, str], Obj]]:
        """The owners of a removed dependent that wait for it (foreground deletion)."""
        out = []
        ns = obj["metadata"].get("namespace") or ""
        for ref in obj["metadata"].get("ownerReferences") or []:
            rd = self.api.registry.by_kind(str(ref.get("apiVersion", "")), str(ref.get("kind", "")))
            if rd is None:
                continue
            owner = self.api.store.get(rd.key, ns if rd.namespaced else "", str(ref.get("name")))
            if owner and FOREGROUND_FINALIZER in (owner["metadata"].get("finalizers") or []):
                out.append((rd.key, owner))
        return out

    async def handle(self, ev: StoreEvent) -> bool:
        """One store event: a removed owner's dependents; an owner waiting on the GC."""
        if ev.type == "DELETED":
            ok = await self.collect(ev.obj)
            for key, owner in self._owners_in_foreground(ev.obj):
                ok = await self.finish_owner(key, owner) and ok
            return ok
        fins = ev.obj["metadata"].get("finalizers") or []
        if ORPHAN_FINALIZER in fins or FOREGROUND_FINALIZER in fins:
            return await self.finish_owner(ev.key, ev.obj)
        return True

    async def _run(self) -> None:
        await self._event_loop()
