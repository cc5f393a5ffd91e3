"""Writing whole objects: ``create`` (POST) and ``replace`` (PUT, carrying the
resourceVersion it read: a stale one answers 409)."""

from __future__ import annotations

from bridge.kube.api import KubeApi
from bridge.kube.resources import KubeObject, Resource


class KubeCreating(KubeApi):
    """The verbs that send a whole object."""

    async def create(
        self, res: Resource, obj: KubeObject, namespace: str | None = None
    ) -> KubeObject:
        name = str((obj.get("metadata") or {}).get("name") or "")
        return await self.request(
            "POST", res.path(namespace), body=obj, what=f"create {res.describe(namespace, name)}"
        )

    async def replace(
        self, res: Resource, name: str, obj: KubeObject, namespace: str | None = None
    ) -> KubeObject:
        """PUT: carries ``metadata.resourceVersion``; a stale one answers 409."""
        return await self.request(
            "PUT",
            res.path(namespace, name),
            body=obj,
            what=f"replace {res.describe(namespace, name)}",
        )


__all__ = ["KubeCreating"]
