"""What every workload kind answers (:class:`WorkloadKind`), and what the kinds share: the
references a pod's group is known by (:class:`GroupRef`, :class:`ObjectRef`) and the
walk up a pod's controller chain (:func:`owner_chain`). Pure: objects come in as dicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from bridge import kobj
from bridge.models import GroupId, GroupKind
from bridge.wellknown import ANNOTATION_JOB_COMPLETION_INDEX, LABEL_JOB_COMPLETION_INDEX

Obj = Mapping[str, Any]
Owners = Mapping[str, Mapping[str, Any]]  # uid -> object

# How the pods of a group are proven its own when a Slurm job's back-link has no pod uids
# (written by an older bridge): ``pod`` the group is the pod (its uid), ``controller`` the
# pods' controller ownerReference names the group's uid, ``object`` by namespace and name.
Identity = Literal["pod", "controller", "object"]

# The kind of a group of one pod (:mod:`bridge.workloads.pod`); a Job that is not a gang
# makes its pods such groups too.
POD_KIND = "Pod"


@dataclass(frozen=True)
class Api:
    """The API of a kind's object: ``group`` (empty for the core group), its ``versions``
    newest first (the first is read when the server is not asked), ``plural`` and
    ``kind``. ``discovered``: the version in use is the newest the server serves
    (discovery), not a pinned one; ``builtin``: a type of Kubernetes itself (it accepts
    strategic merge patches; a custom resource answers 415)."""

    group: str
    versions: tuple[str, ...]
    plural: str
    kind: str
    discovered: bool = False
    builtin: bool = False

    @property
    def api_version(self) -> str:
        """``group/version`` of the first version (``v1`` for the core group)."""
        return f"{self.group}/{self.versions[0]}" if self.group else self.versions[0]

    def matches(self, group: str, kind: str) -> bool:
        """``group`` and ``kind`` are this API's (an AdmissionRequest's kind, an object's
        ``apiVersion`` group: :func:`api_group`)."""
        return kind == self.kind and group == self.group


def api_group(api_version: str) -> str:
    """The group of an ``apiVersion`` (empty for the core group's ``v1``)."""
    return api_version.rpartition("/")[0]


class ObjectRef(BaseModel):
    """An object to read: enough to GET it (uid when known)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str | None = None


class GroupRef(BaseModel):
    """A pod's group: its identity, and the object that describes it (``source``).

    ``source`` is None for a plain pod. For a pod of a Job that is not a gang, ``kind``
    is ``Pod`` but ``source`` is the Job (its annotations and deadline still apply).
    ``uid`` is the group's uid when known without reading ``source``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: GroupKind
    namespace: str
    name: str
    uid: str | None = None
    source: ObjectRef | None = None
    replicated_job: str | None = None  # JobSet split per replicated job

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"

    def group_id(self, source_object: Mapping[str, Any] | None) -> GroupId:
        """The stable identity, taking the uid from ``source_object`` when not known."""
        uid = self.uid or (kobj.uid(source_object) if source_object else "") or ""
        return GroupId(kind=self.kind, namespace=self.namespace, name=self.name, uid=uid)


class Grouping(Protocol):
    """The settings that decide grouping (``TranslateSettings`` has them)."""

    @property
    def jobset_grouping(self) -> str: ...

    @property
    def gang_batch_jobs(self) -> bool: ...


class Related(Protocol):
    """The objects the kinds read besides the pods (a group's object, a PodGroup's parent
    Workload, a Workload's PodGroups), as the caller holds them in memory: the scheduler's
    watch caches (:mod:`scheduler.related`), a fixed set in tests and tools
    (:class:`RelatedObjects`). Answering never reads the API: what is not held does not
    exist (yet); its arrival is an event the caller acts on."""

    def get(self, api: Api, namespace: str, name: str) -> Obj | None:
        """The object of ``api`` named ``name`` in ``namespace``, if held."""
        ...

    def listed(self, api: Api, namespace: str) -> Sequence[Obj]:
        """Every object of ``api`` held in ``namespace``."""
        ...


class RelatedObjects:
    """A fixed set of related objects (:class:`Related`), each filed under the API whose
    kind (and, when it has one, apiVersion group) it carries; ``more`` adds an object
    (a group's own object, which translation is given apart)."""

    def __init__(self, objects: Iterable[Obj] = (), apis: Iterable[Api] = ()) -> None:
        self._apis = tuple(apis)
        self._objects: dict[tuple[str, str, str], list[Obj]] = {}
        for obj in objects:
            self._file(obj)

    def _file(self, obj: Obj) -> None:
        kind, version = kobj.text(obj, "kind"), kobj.text(obj, "apiVersion")
        for api in self._apis:
            if kind == api.kind and (not version or api_group(version) == api.group):
                key = (api.group, api.plural, kobj.namespace(obj))
                self._objects.setdefault(key, []).append(obj)

    def more(self, obj: Obj | None) -> RelatedObjects:
        """These objects and ``obj`` (None: these)."""
        if obj is None:
            return self
        both = RelatedObjects(apis=self._apis)
        both._objects = {k: list(v) for k, v in self._objects.items()}
        both._file(obj)
        return both

    def get(self, api: Api, namespace: str, name: str) -> Obj | None:
        return next((o for o in self.listed(api, namespace) if kobj.name(o) == name), None)

    def listed(self, api: Api, namespace: str) -> Sequence[Obj]:
        return self._objects.get((api.group, api.plural, namespace), ())


class WithObject:
    """``related`` and one more object (a group's own, which translation is given apart:
    the kinds find it where they look for their parent), filed under the API whose kind
    (and apiVersion group) it carries; an object that carries no kind adds nothing."""

    def __init__(self, related: Related, obj: Obj) -> None:
        self._related = related
        self._obj = obj
        self._kind = kobj.text(obj, "kind")
        self._group = api_group(kobj.text(obj, "apiVersion"))

    def _is(self, api: Api, namespace: str) -> bool:
        return (
            api.kind == self._kind
            and api.group == self._group
            and kobj.namespace(self._obj) == namespace
        )

    def get(self, api: Api, namespace: str, name: str) -> Obj | None:
        if self._is(api, namespace) and kobj.name(self._obj) == name:
            return self._obj
        return self._related.get(api, namespace, name)

    def listed(self, api: Api, namespace: str) -> Sequence[Obj]:
        found = self._related.listed(api, namespace)
        if not self._is(api, namespace):
            return found
        name = kobj.name(self._obj)
        return [*(o for o in found if kobj.name(o) != name), self._obj]


@dataclass(frozen=True)
class Claim:
    """What a kind is shown of a pod to decide whether it claims it: the pod, its labels,
    its controller chain (:func:`owner_chain`), the owner objects read (uid -> object),
    the settings, and the related objects held (:class:`Related`: a built-in PodGroup and
    the Workload or CompositePodGroup it names, :mod:`bridge.workloads.workload`,
    :mod:`bridge.workloads.composite`)."""

    pod: Obj
    namespace: str
    labels: Mapping[str, str]
    chain: Sequence[ObjectRef]
    owners: Owners
    settings: Grouping
    related: Related


@dataclass(frozen=True)
class Deadline:
    """A workload's own deadline: ``seconds`` (None: none), read from ``field`` of
    ``where`` (errors name both)."""

    seconds: int | None
    field: str
    where: str


@runtime_checkable
class WorkloadKind(Protocol):
    """One kind of workload group. The registry (:data:`bridge.workloads.REGISTRY`) asks
    each kind in turn whether it claims a pod; the first that does is the pod's group's
    kind, and answers everything else about the group.

    ``name`` is the group's kind (the first part of the queue key, ``GroupId.kind``);
    ``api`` the API of the object the group comes from (a plain pod's is pods');
    ``name_field`` the field the group's name is read from and ``source_field`` the field
    that names the group's object, both named in errors; ``size_field`` the field of the
    object its size comes from; ``template_paths`` where the object keeps pod template
    specs (admission checks their schedulerName); ``related`` the APIs of the other
    objects it reads through :class:`Related` (a Workload's PodGroups, a PodGroup's
    parent): the caller holds them (the scheduler watches every kind's API and related
    APIs, and regroups the pods of a kind when an object of one of them changes);
    ``identity`` how its pods are proven its own (:data:`Identity`)."""

    name: str
    api: Api
    name_field: str
    source_field: str
    size_field: str
    template_paths: tuple[str, ...]
    related: tuple[Api, ...]
    identity: Identity

    def claim(self, c: Claim) -> GroupRef | None:
        """The pod's group when this kind claims the pod, else None."""
        ...

    def size(
        self, ref: GroupRef, obj: Obj | None, pods: Sequence[Obj], related: Related
    ) -> int | None:
        """How many pods the group needs; None: not known (its object not read yet)."""
        ...

    def order(
        self, ref: GroupRef, obj: Obj | None, pods: Sequence[Obj], related: Related
    ) -> list[Obj]:
        """The pods in the group's deterministic order (ties break on the pod name)."""
        ...

    def awaits(self, ref: GroupRef, obj: Obj, related: Related) -> str:
        """Why the group waits for an object other than its own that it names and that
        is not there ("": it waits for none), naming the field (a PodGroup's parent
        Workload: its pods join that Workload's gang once it comes)."""
        ...

    def part(self, ref: GroupRef, pod: Obj) -> str | None:
        """The workload part a pod belongs to (a hetjob's component when the parts'
        shapes differ: docs/hetjob.md); None: the kind has no parts."""
        ...

    def deadlines(self, ref: GroupRef, obj: Obj) -> tuple[Deadline, ...] | None:
        """The workload's own deadlines, one per part (the job's time limit is the
        longest, when every part has one); None: the pods' own apply."""
        ...

    def annotations(self, obj: Obj) -> dict[str, str]:
        """The annotations the group's object gives its job (under the pods'): its own,
        and what its spec implies (a CompositePodGroup's topology constraint)."""
        ...

    def priority(self, obj: Obj) -> int | None:
        """The priority the group's object carries for its pods (a 1.37 PodGroup's or
        CompositePodGroup's ``spec.priority``, resolved from its ``priorityClassName``);
        None: the pods' own."""
        ...

    def scheduled(self, ref: GroupRef, pods: Sequence[Obj]) -> tuple[ObjectRef, ...]:
        """The objects that say the group was scheduled once its ``pods`` are bound, as
        kube-scheduler would (a built-in PodGroup's ``PodGroupInitiallyScheduled``)."""
        ...


class Kind:
    """The defaults of a :class:`WorkloadKind`: a group of named pods of one object."""

    name: str
    api: Api
    name_field: str
    source_field = "metadata.ownerReferences"
    size_field = "size"
    template_paths: tuple[str, ...] = ()
    related: tuple[Api, ...] = ()
    identity: Identity = "object"

    def claim(self, c: Claim) -> GroupRef | None:
        raise NotImplementedError

    def size(
        self, ref: GroupRef, obj: Obj | None, pods: Sequence[Obj], related: Related
    ) -> int | None:
        raise NotImplementedError

    def order(
        self, ref: GroupRef, obj: Obj | None, pods: Sequence[Obj], related: Related
    ) -> list[Obj]:
        return sorted(pods, key=kobj.name)

    def awaits(self, ref: GroupRef, obj: Obj, related: Related) -> str:
        return ""

    def part(self, ref: GroupRef, pod: Obj) -> str | None:
        return None

    def deadlines(self, ref: GroupRef, obj: Obj) -> tuple[Deadline, ...] | None:
        return None

    def annotations(self, obj: Obj) -> dict[str, str]:
        return kobj.annotations(obj)

    def priority(self, obj: Obj) -> int | None:
        return None

    def scheduled(self, ref: GroupRef, pods: Sequence[Obj]) -> tuple[ObjectRef, ...]:
        return ()

    def group(
        self,
        c: Claim,
        object_name: str,
        *,
        name: str = "",
        owned: bool = False,
        replicated_job: str | None = None,
    ) -> GroupRef:
        """The group of this kind's object ``object_name`` in the pod's namespace (named
        ``name``, else after the object); ``owned``: its uid is the pod's controller
        chain's, when the chain proved it (:func:`owner_chain`)."""
        owner = chain_owner(c.chain, self.api) if owned else None
        uid = owner.uid if owner is not None else None
        return GroupRef(
            kind=self.name,
            namespace=c.namespace,
            name=name or object_name,
            uid=uid,
            source=self.source(c.namespace, object_name, uid),
            replicated_job=replicated_job,
        )

    def source(self, namespace: str, name: str, uid: str | None = None) -> ObjectRef:
        """The reference of this kind's object ``namespace/name``."""
        return ObjectRef(
            api_version=self.api.api_version,
            kind=self.api.kind,
            namespace=namespace,
            name=name,
            uid=uid,
        )


def _controller_ref(obj: Obj) -> Mapping[str, Any] | None:
    refs = [r for r in kobj.sequence(obj, "metadata", "ownerReferences") if isinstance(r, Mapping)]
    for ref in refs:
        if ref.get("controller") is True:
            return ref
    return refs[0] if refs else None


def owner_of(
    owners: Owners, namespace: str, kind: str, name: str, uid: str
) -> Mapping[str, Any] | None:
    """The object ``owners`` holds for ``uid``, only when it is that ``kind`` and ``name`` in
    ``namespace`` (an ownerReference's uid alone proves nothing: it is the pod's own text)."""
    obj = owners.get(uid) if uid else None
    if obj is None or kobj.namespace(obj) != namespace or kobj.name(obj) != name:
        return None
    if kobj.uid(obj) != uid or kobj.text(obj, "kind") not in ("", kind):
        return None
    return obj


def owner_chain(obj: Obj, owners: Owners) -> list[ObjectRef]:
    """The controller owners of ``obj``, nearest first, as far as ``owners`` reaches. An
    entry's ``uid`` is set only when ``owners`` holds that very object in ``obj``'s
    namespace (:func:`owner_of`); the chain stops at the first owner it does not hold."""
    chain: list[ObjectRef] = []
    ns = kobj.namespace(obj)
    seen: set[str] = set()
    current: Mapping[str, Any] | None = obj
    while current is not None:
        ref = _controller_ref(current)
        if ref is None:
            break
        uid = kobj.text(ref, "uid")
        if uid in seen:  # a cycle: stop rather than loop
            break
        seen.add(uid)
        kind, name = kobj.text(ref, "kind"), kobj.text(ref, "name")
        current = owner_of(owners, ns, kind, name, uid)
        chain.append(
            ObjectRef(
                api_version=kobj.text(ref, "apiVersion"),
                kind=kind,
                namespace=ns,
                name=name,
                uid=uid if current is not None else None,
            )
        )
    return chain


def missing(api: Api, namespace: str, name: str, field: str, where: str) -> str:
    """Why a group waits for an object of ``api`` that ``field`` of ``where`` names and
    that is not there (:meth:`WorkloadKind.awaits`)."""
    return f"waiting for {api.kind} {namespace}/{name} ({field} of {where}): it does not exist"


def chain_owner(chain: Sequence[ObjectRef], api: Api) -> ObjectRef | None:
    """The nearest owner of ``chain`` that is an object of ``api`` (by kind: the chain's
    apiVersion is the pod's own text)."""
    return next((r for r in chain if r.kind == api.kind), None)


def int_label(values: Mapping[str, str], key: str) -> int | None:
    raw = values.get(key, "")
    return int(raw) if raw.isdigit() and len(raw) < 10 else None


def job_parallelism(job_spec: Any) -> int:
    """Pods of a Job that run at the same time: min(parallelism, completions)."""
    parallelism = kobj.integer(job_spec, "parallelism")
    parallelism = 1 if parallelism is None else parallelism
    completions = kobj.integer(job_spec, "completions")
    return parallelism if completions is None else min(parallelism, completions)


def completion_index(pod: Obj) -> int:
    """A Job pod's completion index (label, else annotation); -1 when it has none."""
    idx = int_label(kobj.labels(pod), LABEL_JOB_COMPLETION_INDEX)
    if idx is None:
        idx = int_label(kobj.annotations(pod), ANNOTATION_JOB_COMPLETION_INDEX)
    return -1 if idx is None else idx


def job_deadline(job: Obj) -> tuple[Deadline, ...]:
    """A batch/v1 Job's ``spec.activeDeadlineSeconds``."""
    seconds = kobj.integer(job, "spec", "activeDeadlineSeconds")
    return (Deadline(seconds, "spec.activeDeadlineSeconds", kobj.describe(job, "Job")),)
