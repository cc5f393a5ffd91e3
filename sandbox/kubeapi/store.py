"""In-memory object store with a global resourceVersion, a bounded event history and
watch subscriptions.

Every write bumps one global counter (like etcd's revision); resourceVersions are its
decimal strings. The history keeps the last ``history_size`` events; anything older (or
older than the last :meth:`Store.compact`) is gone, and watching from it is a 410.
"""

from __future__ import annotations

import asyncio
import bisect
import builtins
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bridge.fastjson import clone

Key = tuple[str, str]  # (group, plural)
Obj = dict[str, Any]


@dataclass(frozen=True)
class StoreEvent:
    """One change: ``obj`` is the object after the change (for DELETED: as it was last,
    with the deletion's resourceVersion); ``old`` the object before it."""

    rv: int
    key: Key
    type: str
    obj: Obj
    old: Obj | None


@dataclass
class Subscription:
    key: Key | None  # None: every resource
    queue: asyncio.Queue[StoreEvent] = field(default_factory=asyncio.Queue)


def _every(obj: Obj) -> bool:
    return True


def ns_name(obj: Obj) -> tuple[str, str]:
    md = obj.get("metadata") or {}
    return (md.get("namespace") or "", md.get("name") or "")


class Store:
    def __init__(self, history_size: int = 10_000) -> None:
        self._objects: dict[Key, dict[tuple[str, str], Obj]] = {}
        self._rv = 0
        self._compacted = 0
        self._history: deque[StoreEvent] = deque()
        self._history_size = history_size
        self._subs: list[Subscription] = []
        # owner uid -> the objects whose ownerReferences name it (the garbage collector's)
        self._owned: dict[str, set[tuple[Key, str, str]]] = {}
        # per resource, its (namespace, name) keys in order, kept until one is added or
        # removed: a page starts where its continue key points (as kube-apiserver's watch
        # cache does), instead of sorting and walking every key on every page (41 pages of
        # 41,000 pods: 1.7 s, 0.3 s with this)
        self._sorted: dict[Key, builtins.list[tuple[str, str]]] = {}

    @property
    def resource_version(self) -> int:
        return self._rv

    @property
    def compacted(self) -> int:
        """Events at or before this revision are gone from the history."""
        return self._compacted

    def compact(self) -> None:
        """Drop the whole history: watches/continues from any older version get 410."""
        self._compacted = self._rv
        self._history.clear()

    def get(self, key: Key, namespace: str, name: str) -> Obj | None:
        obj = self._objects.get(key, {}).get((namespace, name))
        return clone(obj) if obj is not None else None

    def peek(self, key: Key, namespace: str, name: str) -> Obj | None:
        """The stored object itself, not a copy: to read, never to change."""
        return self._objects.get(key, {}).get((namespace, name))

    def list(
        self,
        key: Key,
        namespace: str | None = None,
        where: Callable[[Obj], bool] | None = None,
    ) -> list[Obj]:
        """Objects sorted by (namespace, name) like etcd keys; deep copies of those
        ``where`` accepts (it sees the stored object and must not change it)."""
        return self.page(key, namespace, where or _every)[0]

    def page(
        self,
        key: Key,
        namespace: str | None,
        where: Callable[[Obj], bool],
        *,
        after: tuple[str, str] | None = None,
        limit: int = 0,
        count_rest: bool = True,
    ) -> tuple[builtins.list[Obj], int]:
        """One page of a list: copies of the first ``limit`` (0: all) objects past
        ``after`` (namespace, name) that ``where`` accepts, in key order, and how many more
        it accepts (``count_rest`` False: 1 when there is any more, found by looking no
        further than the first). Only the page is copied: paging through n objects costs
        O(n) copies, not O(n) per page."""
        objs = self._objects.get(key, {})
        keys = self._sorted.get(key)
        if keys is None:
            keys = self._sorted[key] = sorted(objs)
        start = bisect.bisect_right(keys, after) if after is not None else 0
        if namespace:
            start = max(start, bisect.bisect_left(keys, (namespace, "")))
        out: builtins.list[Obj] = []
        more = 0
        for i in range(start, len(keys)):
            k = keys[i]
            if namespace and k[0] != namespace:
                break  # past the namespace's keys
            obj = objs[k]
            if not where(obj):
                continue
            if limit and len(out) >= limit:
                more += 1
                if not count_rest:
                    break
            else:
                out.append(clone(obj))
        return out, more

    def names(self, key: Key) -> set[str]:
        """The names of a resource's objects (no copies)."""
        return {name for _, name in self._objects.get(key, {})}

    def count(self, key: Key) -> int:
        return len(self._objects.get(key, {}))

    def _index(self, key: Key, obj: Obj | None, *, add: bool) -> None:
        if obj is None:
            return
        ref = (key, *ns_name(obj))
        for owner in (obj.get("metadata") or {}).get("ownerReferences") or []:
            uid = str((owner or {}).get("uid") or "")
            if add:
                self._owned.setdefault(uid, set()).add(ref)
            elif uid in self._owned:
                self._owned[uid].discard(ref)
                if not self._owned[uid]:
                    del self._owned[uid]

    def dependents(self, uid: str) -> builtins.list[tuple[Key, Obj]]:
        """(key, object) of every object whose ownerReferences name ``uid``; copies."""
        out = []
        for key, ns, name in sorted(self._owned.get(uid, ())):
            obj = self._objects.get(key, {}).get((ns, name))
            if obj is not None:
                out.append((key, clone(obj)))
        return out

    def _emit(self, ev: StoreEvent) -> None:
        self._history.append(ev)
        while len(self._history) > self._history_size:
            dropped = self._history.popleft()
            self._compacted = dropped.rv
        for sub in self._subs:
            if sub.key is None or sub.key == ev.key:
                sub.queue.put_nowait(ev)

    def put(self, key: Key, obj: Obj, *, created: bool) -> Obj:
        """Store ``obj`` with a new resourceVersion; emit ADDED or MODIFIED."""
        self._rv += 1
        stored = clone(obj)
        stored.setdefault("metadata", {})["resourceVersion"] = str(self._rv)
        k = ns_name(stored)
        old = self._objects.setdefault(key, {}).get(k)
        if old is None:
            self._sorted.pop(key, None)
        self._objects[key][k] = stored
        self._index(key, old, add=False)
        self._index(key, stored, add=True)
        self._emit(StoreEvent(self._rv, key, "ADDED" if created else "MODIFIED", stored, old))
        return clone(stored)

    def remove(self, key: Key, namespace: str, name: str) -> Obj | None:
        """Remove an object; emit DELETED carrying the deletion's resourceVersion."""
        old = self._objects.get(key, {}).pop((namespace, name), None)
        if old is None:
            return None
        self._sorted.pop(key, None)
        self._index(key, old, add=False)
        self._rv += 1
        gone = clone(old)
        gone["metadata"]["resourceVersion"] = str(self._rv)
        self._emit(StoreEvent(self._rv, key, "DELETED", gone, old))
        return clone(gone)

    def drop_resource(self, key: Key) -> builtins.list[Obj]:
        """Remove every object of a resource (its CRD went away)."""
        out = []
        for ns, name in list(self._objects.get(key, {})):
            gone = self.remove(key, ns, name)
            if gone is not None:
                out.append(gone)
        self._objects.pop(key, None)
        self._sorted.pop(key, None)
        return out

    def subscribe_since(self, key: Key, rv: int) -> tuple[builtins.list[StoreEvent], Subscription]:
        """History events of ``key`` newer than ``rv`` plus a live subscription, taken
        atomically (no await in between) so nothing is lost or duplicated.
        The caller checks ``rv`` against :attr:`compacted` first."""
        past = [e for e in self._history if e.key == key and e.rv > rv]
        sub = Subscription(key)
        self._subs.append(sub)
        return past, sub

    def subscribe(self, key: Key | None) -> Subscription:
        """Live events of ``key`` (None: of every resource)."""
        sub = Subscription(key)
        self._subs.append(sub)
        return sub

    @property
    def subscriber_count(self) -> int:
        """Open watch subscriptions (tests check abandoned watches are cleaned up)."""
        return len(self._subs)

    def unsubscribe(self, sub: Subscription) -> None:
        if sub in self._subs:
            self._subs.remove(sub)
