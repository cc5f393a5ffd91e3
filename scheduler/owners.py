"""The scheduler's cache of group and owner objects (Job, JobSet, LWS, PodGroup ...), by uid.

Bounded and fresh: at most ``max_entries`` objects (least recently used go first), each
kept slim (no ``status``, no managedFields, no kubectl last-applied copy: translation reads
their spec and metadata only), and an entry older than ``max_age_seconds`` is not
:meth:`OwnerCache.fresh`, so the caller reads the object again (a Job's parallelism or an
LWS size may change). It is a read-only ``Mapping`` of uid -> object for translation.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from bridge.bounded import BoundedMap
from bridge.clock import Clock
from bridge.kube.resources import KubeObject, slim

MAX_ENTRIES = 4096
MAX_AGE_SECONDS = 60.0


class OwnerCache(Mapping[str, KubeObject]):
    def __init__(
        self,
        clock: Clock,
        *,
        max_entries: int = MAX_ENTRIES,
        max_age_seconds: float = MAX_AGE_SECONDS,
    ) -> None:
        self._clock = clock
        self.max_entries = max_entries
        self.max_age_seconds = max_age_seconds
        self._entries: BoundedMap[str, tuple[float, KubeObject]] = BoundedMap(
            "scheduler-owners", max_entries
        )

    def put(self, obj: KubeObject) -> None:
        """Remember ``obj`` (slimmed) under its uid; the oldest entries go past the bound."""
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        if not uid:
            return
        kept = slim({k: v for k, v in obj.items() if k != "status"})
        self._entries[uid] = (self._clock.monotonic(), kept)

    def fresh(self, uid: str) -> KubeObject | None:
        """The object when it was read less than ``max_age_seconds`` ago, else None."""
        entry = self._entries.get(uid)  # a hit is the most recently used now
        if entry is None or self._clock.monotonic() - entry[0] > self.max_age_seconds:
            return None
        return entry[1]

    def __getitem__(self, uid: str) -> KubeObject:
        return self._entries[uid][1]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)
