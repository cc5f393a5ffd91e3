"""core/v1 Events about objects, aggregated the way kubectl shows them.

:class:`EventRecorder` creates one Event per (object, type, reason, message) and, when the
same thing happens again, patches that Event's ``count`` and ``lastTimestamp`` instead of
creating another. :meth:`EventRecorder.record_change` emits only when what it would say
about an object differs from the last thing it said (for "why is my pod pending" messages
that a scheduling cycle would otherwise repeat every second).

State is in memory, per recorder instance, bounded (least recently used entries go).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Literal

import structlog

from bridge.bounded import BoundedMap
from bridge.errors import KubeError, KubeNotFound
from bridge.kube.client import KubeClient
from bridge.kube.resources import EVENTS, KubeObject, format_time
from bridge.text import clip

log = structlog.get_logger("bridge.kube.events")

EventKind = Literal["Normal", "Warning"]


@dataclass
class _Seen:
    namespace: str
    name: str
    count: int


class EventRecorder:
    """Emit Events for ``component`` (``reportingComponent`` / ``source.component``)."""

    def __init__(
        self,
        client: KubeClient,
        component: str,
        *,
        instance: str = "",
        max_entries: int = 4096,
    ) -> None:
        self.client = client
        self.component = component
        self.instance = instance or component
        self.max_entries = max_entries
        # keyed by object and message: tenant-named objects, so bounded
        self._seen: BoundedMap[tuple[str, str, str, str], _Seen] = BoundedMap(
            "events-seen", max_entries
        )
        self._last_said: BoundedMap[str, tuple[str, str, str]] = BoundedMap(
            "events-said", max_entries
        )

    @staticmethod
    def _obj_id(obj: KubeObject) -> str:
        meta = obj.get("metadata") or {}
        return "/".join(
            str(x)
            for x in (obj.get("kind"), meta.get("namespace"), meta.get("name"), meta.get("uid"))
        )

    async def record(
        self, obj: KubeObject, kind: EventKind, reason: str, message: str
    ) -> KubeObject | None:
        """Create or bump the Event; None when the API refused (events are best effort)."""
        key = (self._obj_id(obj), kind, reason, message)
        now = format_time(self.client.clock.now())
        seen = self._seen.get(key)
        try:
            if seen is not None:
                try:
                    ev = await self.client.patch(
                        EVENTS,
                        seen.name,
                        {"count": seen.count + 1, "lastTimestamp": now},
                        namespace=seen.namespace,
                    )
                    seen.count += 1
                    return ev
                except KubeNotFound:
                    # The Event expired (TTL) or was deleted: start a new one.
                    self._seen.pop(key, None)
            ev = await self.client.create(
                EVENTS, self._event_body(obj, kind, reason, message, now), self._namespace(obj)
            )
        except KubeError as e:
            log.warning("event_failed", reason=reason, error=str(e))
            return None
        meta = ev.get("metadata") or {}
        self._seen[key] = _Seen(str(meta.get("namespace") or ""), str(meta.get("name") or ""), 1)
        return ev

    async def record_change(
        self, obj: KubeObject, kind: EventKind, reason: str, message: str
    ) -> bool:
        """Record only when it differs from the last thing said about ``obj``; True if sent."""
        oid = self._obj_id(obj)
        said = (kind, reason, message)
        if self._last_said.get(oid) == said:
            return False
        ev = await self.record(obj, kind, reason, message)
        if ev is None:
            return False
        self._last_said[oid] = said
        return True

    def forget(self, obj: KubeObject) -> None:
        """Drop what was said about ``obj`` (it was deleted)."""
        self._last_said.pop(self._obj_id(obj), None)

    @staticmethod
    def _namespace(obj: KubeObject) -> str:
        return str((obj.get("metadata") or {}).get("namespace") or "default")

    def _event_body(
        self, obj: KubeObject, kind: EventKind, reason: str, message: str, now: str
    ) -> KubeObject:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "object")
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{name}.{secrets.token_hex(8)}",
                "namespace": self._namespace(obj),
            },
            "involvedObject": {
                "apiVersion": obj.get("apiVersion", "v1"),
                "kind": obj.get("kind", ""),
                "name": name,
                "namespace": meta.get("namespace"),
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "type": kind,
            "reason": reason,
            "message": clip(message, 1024),
            "count": 1,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.instance,
        }
