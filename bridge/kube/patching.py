"""Changing objects in place: ``patch`` with an explicit content type, ``modify`` (a
read-modify-write that retries on 409), and the finalizer helpers built on it.

Patches name their content type explicitly: a dict patch of a custom resource would
otherwise go out as json-patch (400), and strategic merge on a custom resource is 415.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from bridge.errors import KubeConflict, KubeInvalid, KubeNotFound
from bridge.kube.fetching import KubeFetching
from bridge.kube.resources import KubeObject, Resource

PatchType = Literal["merge", "strategic", "json"]
_CONTENT_TYPES: dict[PatchType, str] = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
}
# How often a read-modify-write retries after a 409 (someone else wrote in between).
CONFLICT_ATTEMPTS = 5


class KubePatching(KubeFetching):
    """The verbs that change part of an object (``modify`` reads it first)."""

    async def patch(
        self,
        res: Resource,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        patch_type: PatchType = "merge",
        subresource: str = "",
    ) -> KubeObject:
        if patch_type == "strategic" and not res.builtin:
            raise KubeInvalid(
                f"patch {res.describe(namespace, name)}: strategic merge is not supported on "
                "custom resources (the server answers 415); use merge or json",
                status=415,
            )
        sub = f"/{subresource}" if subresource else ""
        return await self.request(
            "PATCH",
            res.path(namespace, name, subresource),
            body=patch,
            content_type=_CONTENT_TYPES[patch_type],
            what=f"patch{sub} {res.describe(namespace, name)}",
        )

    async def modify(
        self,
        res: Resource,
        name: str,
        change: Callable[[KubeObject], KubeObject | None],
        *,
        namespace: str | None = None,
        subresource: str = "",
    ) -> KubeObject:
        """Read-modify-write with optimistic concurrency.

        ``change(current)`` returns a merge patch, or None when nothing needs to change (no
        request is sent). The patch carries the read resourceVersion, so a concurrent
        writer makes it 409; it is then re-read and retried (``CONFLICT_ATTEMPTS`` times).
        """
        last: KubeConflict | None = None
        for _ in range(CONFLICT_ATTEMPTS):
            current = await self.get(res, name, namespace)
            patch = change(current)
            if patch is None:
                return current
            meta = dict(patch.get("metadata") or {})
            meta["resourceVersion"] = (current.get("metadata") or {}).get("resourceVersion")
            patch = {**patch, "metadata": meta}
            try:
                return await self.patch(
                    res, name, patch, namespace=namespace, subresource=subresource
                )
            except KubeConflict as e:
                last = e
        assert last is not None
        raise last

    # -- metadata helpers (any resource) ----------------------------------------------
    async def add_finalizer(
        self, res: Resource, name: str, finalizer: str, namespace: str | None = None
    ) -> KubeObject:
        def change(obj: KubeObject) -> KubeObject | None:
            current = list((obj.get("metadata") or {}).get("finalizers") or [])
            if finalizer in current:
                return None
            return {"metadata": {"finalizers": [*current, finalizer]}}

        return await self.modify(res, name, change, namespace=namespace)

    async def remove_finalizer(
        self, res: Resource, name: str, finalizer: str, namespace: str | None = None
    ) -> KubeObject | None:
        """Remove ``finalizer``; None when the object is gone (already finalized)."""

        def change(obj: KubeObject) -> KubeObject | None:
            current = list((obj.get("metadata") or {}).get("finalizers") or [])
            if finalizer not in current:
                return None
            return {"metadata": {"finalizers": [f for f in current if f != finalizer]}}

        try:
            return await self.modify(res, name, change, namespace=namespace)
        except KubeNotFound:
            return None


__all__ = ["CONFLICT_ATTEMPTS", "KubePatching", "PatchType"]
