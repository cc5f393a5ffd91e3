"""Reading objects: ``get``, and ``list`` / ``pages`` that follow ``continue`` tokens.

Every read goes through :meth:`bridge.kube.api.KubeApi.request`; the watch
(:mod:`bridge.kube.watch`) lists with :meth:`KubeFetching.pages` before it watches.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from bridge import fastjson
from bridge.errors import KubeGone, KubeUnavailable
from bridge.kube.api import KubeApi, answer_object, error_for_status
from bridge.kube.resources import KubeObject, Resource

# A list of the objects' metadata only (kube-apiserver's PartialObjectMetadataList, as
# client-go's metadata informers ask for it), else the full objects.
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"


@dataclass(frozen=True)
class ObjectList:
    """A list answer: the items and the list's resourceVersion (where a watch resumes)."""

    items: list[KubeObject]
    resource_version: str


class KubeFetching(KubeApi):
    """The read verbs, on any :class:`~bridge.kube.resources.Resource`, and discovery."""

    async def _discovery(self, path: str, what: str) -> dict[str, Any] | None:
        """A discovery document (``GET /apis/...``), None when not served (404)."""
        status, data = await self.raw("GET", path, what=what)
        if status == 404:
            return None
        if not 200 <= status < 300:
            raise error_for_status(status, data, what)
        try:
            body = fastjson.loads(data)
        except ValueError:
            raise KubeUnavailable(f"{what}: answer is not JSON", status=status) from None
        return body if isinstance(body, dict) else {}

    async def served_versions(self, group: str) -> tuple[str, ...]:
        """The versions the server serves of API ``group`` (discovery: ``GET /apis/<group>``),
        its preferred version first; () when it serves none."""
        body = await self._discovery(f"/apis/{group}", f"discovery of {group}")
        if body is None:
            return ()
        versions = [
            str(v.get("version"))
            for v in (body.get("versions") or [])
            if isinstance(v, dict) and v.get("version")
        ]
        preferred = (body.get("preferredVersion") or {}).get("version")
        if preferred in versions:
            versions.remove(preferred)
            versions.insert(0, preferred)
        return tuple(versions)

    async def serves(self, res: Resource) -> bool:
        """Whether the server serves ``res`` (discovery: ``GET /apis/<group>/<version>``
        lists its plural), e.g. DeviceTaintRule only from Kubernetes 1.37."""
        path = f"/apis/{res.group}/{res.version}" if res.group else f"/api/{res.version}"
        body = await self._discovery(path, f"discovery of {res.api_version}")
        return body is not None and any(
            isinstance(r, dict) and r.get("name") == res.plural for r in body.get("resources") or []
        )

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> KubeObject:
        return await self.request(
            "GET", res.path(namespace, name), what=f"get {res.describe(namespace, name)}"
        )

    async def list(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
    ) -> ObjectList:
        """All objects (following ``continue`` pages); the first page's resourceVersion.

        Items get ``apiVersion`` and ``kind`` filled in when the server left them out.

        A continue token that expired (410) restarts the list from the beginning once.
        """
        items: list[KubeObject] = []
        rv = ""
        async for page, page_rv in self.pages(
            res,
            namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            page_size=page_size,
        ):
            if page_rv is None:  # restarted from the beginning
                items.clear()
                rv = ""
                continue
            rv = rv or page_rv
            items += page
        return ObjectList(items, rv)

    async def pages(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        metadata_only: bool = False,
    ) -> AsyncIterator[tuple[Sequence[KubeObject], str | None]]:
        """The list, one page at a time (at most ``page_size`` objects held), with the
        first page's resourceVersion. An empty page with resourceVersion None means the
        continue token expired and the list starts again from the beginning (once).

        ``metadata_only``: each object's ``metadata`` alone (``kind``
        ``PartialObjectMetadata``; :data:`METADATA_LIST`), for a reader of names, labels or
        annotations: a fraction of the bytes to send and decode. A server that does not
        serve that form answers with the whole objects, which read the same."""
        base: list[tuple[str, Any]] = []
        if label_selector:
            base.append(("labelSelector", label_selector))
        if field_selector:
            base.append(("fieldSelector", field_selector))
        what = f"list {res.plural}" + (f" in {namespace}" if namespace else "")
        accept = METADATA_LIST if metadata_only else "application/json"
        for attempt in range(2):
            rv = ""
            cont = ""
            try:
                while True:
                    query = [*base, ("limit", page_size)]
                    if cont:
                        query.append(("continue", cont))
                    status, data = await self.raw(
                        "GET", res.path(namespace), query=query, accept=accept, what=what
                    )
                    page = answer_object(status, data, what)
                    meta = page.get("metadata") or {}
                    rv = rv or str(meta.get("resourceVersion") or "")
                    items: list[KubeObject] = []
                    for item in page.get("items") or []:
                        # List items come without kind/apiVersion (watch objects have
                        # them): fill them so every object dict has the same shape.
                        item.setdefault("apiVersion", res.api_version)
                        item.setdefault("kind", res.kind)
                        items.append(item)
                    cont = str(meta.get("continue") or "")
                    yield items, rv
                    if not cont:
                        return
            except KubeGone:
                if attempt or not cont:
                    raise
                yield [], None


__all__ = ["METADATA_LIST", "KubeFetching", "ObjectList"]
