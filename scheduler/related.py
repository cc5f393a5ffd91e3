"""The scheduler's watch-fed copies of the objects the workload kinds read besides the
pods: every kind's own object (a PodGroup, a JobSet, a Job ...) and the related objects
it declares (:attr:`bridge.workloads.WorkloadKind.related`: a Workload's PodGroups, a
PodGroup's parent), for the APIs :func:`bridge.workloads.object_apis` names.

Fed by the watches :mod:`scheduler.app` runs, one per API at the version the server
serves (found by discovery; an API it does not serve, e.g. a CRD not installed, is
looked for again now and then, and watched once it comes). Read in memory only: the
snapshot (:mod:`scheduler.snapshot`) takes its copy of a group's objects here, without
an await, as kueue's snapshot does; an object that comes later is an event that regroups
and wakes the groups of its kind (:meth:`scheduler.state.KubeState.on_related_event`).

Objects are kept slim (no ``status``, no managedFields, no last-applied copy: the kinds
read spec and metadata). Keyed by namespace and name per API, and by namespace and uid
for the owner chain (never by uid alone: a pod's ownerReference uid is its own text).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from bridge.kube.resources import KubeObject, Resource, slim
from bridge.translate import kobj
from bridge.workloads import Api

ApiKey = tuple[str, str]  # (group, plural)


def api_key(api: Api) -> ApiKey:
    return (api.group, api.plural)


def resource(api: Api, version: str | None = None) -> Resource:
    """The client's resource of a kind's API (``version``: the one served, else its
    first)."""
    return Resource(api.group, version or api.versions[0], api.plural, api.kind, True, api.builtin)


def kept(obj: KubeObject) -> KubeObject:
    """What is kept of an object a kind reads: its spec and metadata (slim)."""
    return slim({k: v for k, v in obj.items() if k != "status"})


class RelatedCache:
    """The objects of the kinds' APIs, by API, namespace and name (a
    :class:`bridge.workloads.Related`), and by namespace and uid (the owner chain)."""

    def __init__(self) -> None:
        # (group, plural, namespace) -> name -> object
        self._objects: dict[tuple[str, str, str], dict[str, KubeObject]] = {}
        self._by_uid: dict[tuple[str, str], KubeObject] = {}  # (namespace, uid)
        # the resource watched per API, at the version served (None: not served)
        self.served: dict[ApiKey, Resource | None] = {}

    # ------------------------------------------------------------------ the watches
    def on_event(self, api: Api, event: str, obj: KubeObject) -> None:
        """Apply one watch event of an object of ``api`` (as :func:`kept` keeps it)."""
        ns, name = kobj.namespace(obj), kobj.name(obj)
        by_name = self._objects.setdefault((api.group, api.plural, ns), {})
        old = by_name.pop(name, None)
        if old is not None:
            self._by_uid.pop((ns, kobj.uid(old)), None)
        if event == "DELETED":
            if not by_name:
                del self._objects[(api.group, api.plural, ns)]
            return
        by_name[name] = obj
        if uid := kobj.uid(obj):
            self._by_uid[(ns, uid)] = obj

    def resource(self, api: Api) -> Resource | None:
        """The resource of ``api`` at the version watched (None: not served, or not
        found yet): what a write to such an object names (a PodGroup's condition)."""
        return self.served.get(api_key(api))

    # ------------------------------------------------------------------ Related
    def get(self, api: Api, namespace: str, name: str) -> KubeObject | None:
        return self._objects.get((api.group, api.plural, namespace), {}).get(name)

    def listed(self, api: Api, namespace: str) -> Sequence[KubeObject]:
        return list(self._objects.get((api.group, api.plural, namespace), {}).values())

    def owners(self, namespace: str) -> Mapping[str, KubeObject]:
        """uid -> object, for the objects of ``namespace`` only (a view, not a copy)."""
        return _Namespace(self._by_uid, namespace)

    def __len__(self) -> int:
        return len(self._by_uid)


class _Namespace(Mapping[str, KubeObject]):
    """One namespace's objects by uid: looked up, never iterated (translation only looks
    owners up)."""

    def __init__(self, by_uid: Mapping[tuple[str, str], KubeObject], namespace: str) -> None:
        self._by_uid = by_uid
        self._namespace = namespace

    def __getitem__(self, uid: str) -> KubeObject:
        return self._by_uid[(self._namespace, uid)]

    def __iter__(self) -> Iterator[str]:
        return (uid for ns, uid in self._by_uid if ns == self._namespace)

    def __len__(self) -> int:
        return sum(1 for ns, _ in self._by_uid if ns == self._namespace)
