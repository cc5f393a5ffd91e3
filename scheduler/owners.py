"""The scheduler's cache of group and owner objects (Job, JobSet, LWS, PodGroup ...), by
namespace and uid.

Bounded and fresh: at most ``max_entries`` objects (least recently used go first), each
kept slim (no ``status``, no managedFields, no kubectl last-applied copy: translation reads
their spec and metadata only), and an entry older than ``max_age_seconds`` is not
:meth:`OwnerCache.fresh`, so the caller reads the object again (a Job's parallelism or an
LWS size may change).

Keyed by ``(namespace, uid)``, never by uid alone: a pod's ownerReference uid is its own
text, so a pod in one namespace may name another namespace's object by uid; it must never
find it here. Translation gets one namespace's objects (:meth:`OwnerCache.in_namespace`),
a read-only ``Mapping`` of uid -> object.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from bridge.bounded import BoundedMap
from bridge.clock import Clock
from bridge.kube.resources import KubeObject, slim

MAX_ENTRIES = 4096
MAX_AGE_SECONDS = 60.0


Key = tuple[str, str]  # (namespace, uid)


class OwnerCache(Mapping[Key, KubeObject]):
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
        self._entries: BoundedMap[Key, tuple[float, KubeObject]] = BoundedMap(
            "scheduler-owners", max_entries
        )

    def put(self, obj: KubeObject) -> None:
        """Remember ``obj`` (slimmed) under its namespace and uid; the oldest entries go
        past the bound."""
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        if not uid:
            return
        key = (str(meta.get("namespace") or ""), uid)
        kept = slim({k: v for k, v in obj.items() if k != "status"})
        self._entries[key] = (self._clock.monotonic(), kept)

    def fresh(self, namespace: str, uid: str) -> KubeObject | None:
        """The object of ``uid`` in ``namespace`` when it was read less than
        ``max_age_seconds`` ago, else None."""
        entry = self._entries.get((namespace, uid))  # a hit is the most recently used now
        if entry is None or self._clock.monotonic() - entry[0] > self.max_age_seconds:
            return None
        return entry[1]

    def in_namespace(self, namespace: str) -> Mapping[str, KubeObject]:
        """uid -> object, for the objects of ``namespace`` only (a view, not a copy)."""
        return _Namespace(self, namespace)

    def __getitem__(self, key: Key) -> KubeObject:
        return self._entries[key][1]

    def __iter__(self) -> Iterator[Key]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


class _Namespace(Mapping[str, KubeObject]):
    """One namespace's objects of an :class:`OwnerCache`, by uid: looked up, never
    iterated (translation only looks owners up)."""

    def __init__(self, cache: OwnerCache, namespace: str) -> None:
        self._cache = cache
        self._namespace = namespace

    def __getitem__(self, uid: str) -> KubeObject:
        return self._cache[(self._namespace, uid)]

    def __iter__(self) -> Iterator[str]:
        return (uid for ns, uid in self._cache if ns == self._namespace)

    def __len__(self) -> int:
        return sum(1 for ns, _ in self._cache if ns == self._namespace)
