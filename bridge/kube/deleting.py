"""Deleting objects, with an optional grace period and a uid precondition."""

from __future__ import annotations

from typing import Any

from bridge.kube.api import KubeApi
from bridge.kube.resources import KubeObject, Resource


class KubeDeleting(KubeApi):
    """The delete verb."""

    async def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        grace_period_seconds: int | None = None,
        uid: str | None = None,
    ) -> KubeObject:
        """Delete; ``uid`` adds a precondition (409 when the name now holds another object)."""
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        query: list[tuple[str, Any]] = []
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
            query.append(("gracePeriodSeconds", grace_period_seconds))
        if uid:
            body["preconditions"] = {"uid": uid}
        return await self.request(
            "DELETE",
            res.path(namespace, name),
            query=query,
            body=body,
            what=f"delete {res.describe(namespace, name)}",
        )


__all__ = ["KubeDeleting"]
