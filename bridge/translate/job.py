"""The one entry point: a complete group of pods -> one Slurm placeholder ``JobSpec``.

Precedence of every Slurm option: pod annotations > group object annotations (PodGroup,
LWS, JobSet, Job) > defaults derived from the workload (deadline, priority) > config.
All pods of a group must carry the same slurmjob annotations.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from bridge.bounded import BoundedMap
from bridge.errors import InvalidInput
from bridge.models import GroupId, JobSpec
from bridge.text import text_problem
from bridge.translate import kobj
from bridge.translate.annotations import (
    SlurmJobOptions,
    annotation_key,
    option_annotations,
    parse_slurmjob_annotations,
)
from bridge.translate.dra import DraInputs, pod_devices
from bridge.translate.grouping import (
    GroupRef,
    check_source,
    expected_size,
    group_of,
    order_pods,
)
from bridge.translate.identity import admin_comment, human_comment
from bridge.translate.placement import NodeSet, excluded_nodes
from bridge.translate.policy import ResolvedPolicy, enforce_policy
from bridge.translate.resources import (
    PodResources,
    gres_floor_problem,
    pod_resources,
    tres_string,
)
from bridge.translate.settings import TranslateSettings
from bridge.translate.shapes import Shape, components
from bridge.translate.topology import TopologyRequest, topology_request
from bridge.wellknown import slurmjob_annotation
from bridge.workloads import Related, kind_named, with_object

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class Waiting:
    """The group is not complete yet: a wait state, not an error."""

    group: GroupId
    have: int
    want: int | None  # None: the group object is missing, so the size is unknown

    @property
    def reason(self) -> str:
        if self.want is None:
            return f"waiting for {self.group.kind} {self.group.namespace}/{self.group.name}"
        return f"waiting for pods: {self.have} of {self.want}"


class _OneMore(Mapping[str, Obj]):
    """``rest`` with ``key`` -> ``value`` on top, without copying ``rest``: the scheduler
    passes its whole owner cache (thousands of entries; copying it cost a Python call per
    entry) for every group it translates."""

    def __init__(self, key: str, value: Obj, rest: Mapping[str, Obj]) -> None:
        self._key, self._value, self._rest = key, value, rest

    def __getitem__(self, key: str) -> Obj:
        return self._value if key == self._key else self._rest[key]

    def __iter__(self) -> Iterator[str]:
        yield self._key
        yield from (k for k in self._rest if k != self._key)

    def __len__(self) -> int:
        return len(self._rest) + (self._key not in self._rest)


def _group_of_all(
    pods: Sequence[Obj],
    owners: Mapping[str, Obj],
    s: TranslateSettings,
    related: Related,
) -> GroupRef:
    refs = [group_of(p, owners, s, related) for p in pods]
    first = refs[0]
    for pod, ref in zip(pods, refs, strict=True):
        if ref.key != first.key:
            raise InvalidInput(
                "metadata",
                f"pod belongs to {ref.key}, not to {first.key} like the other pods",
                kobj.describe(pod, "Pod"),
            )
    return first


def _check_group_text(group: GroupId, keys: Sequence[str], where: str) -> None:
    """The group's namespace, name and uid and the pods' keys (``namespace/name``) reach
    Slurm (job name, comment, admin_comment): the rules of :mod:`bridge.text`, as for
    annotation text. Kubernetes checks object names and labels, but not an
    ownerReference's name or uid."""
    kind = kind_named(group.kind)
    uid_field = "metadata.uid" if kind.identity == "pod" else "metadata.ownerReferences.uid"
    texts = [
        (group.namespace, "metadata.namespace"),
        (group.name, kind.name_field),
        (group.uid, uid_field),
    ]
    texts += [(key, "metadata.name") for key in keys]
    for text, field in texts:
        problem = text_problem(text)
        if problem is not None:
            raise InvalidInput(field, problem, where)


def _options(pods: Sequence[Obj], group_object: Obj | None, ref: GroupRef) -> SlurmJobOptions:
    """Pod annotations over group-object annotations (those its kind gives its job:
    :meth:`~bridge.workloads.WorkloadKind.annotations`); pods must agree with each other."""
    first = pods[0]
    first_notes = kobj.annotations(first)
    pod_opts = parse_slurmjob_annotations(first_notes, obj=kobj.describe(first, "Pod"))
    want = pod_opts.set_fields()
    same = option_annotations(first_notes)
    for pod in pods[1:]:
        notes = kobj.annotations(pod)
        if option_annotations(notes) == same:
            continue  # the same option annotations parse to the same options
        here = kobj.describe(pod, "Pod")
        got = parse_slurmjob_annotations(notes, obj=here).set_fields()
        if got != want:
            field = sorted(k for k in want.keys() | got.keys() if want.get(k) != got.get(k))[0]
            raise InvalidInput(
                annotation_key(field),
                f"differs between pods of one group ({kobj.pod_key(first)}: {want.get(field)!r}, "
                f"{kobj.pod_key(pod)}: {got.get(field)!r})",
                here,
            )
    if group_object is None:
        return pod_opts
    notes = kind_named(ref.kind).annotations(group_object)
    group_opts = parse_slurmjob_annotations(notes, obj=kobj.describe(group_object))
    return pod_opts.overlay(group_opts)


def _minutes(seconds: int | None, field: str, obj: str) -> int | None:
    if seconds is None:
        return None
    if seconds <= 0:
        raise InvalidInput(field, f"must be positive, got {seconds}", obj)
    return -(-seconds // 60)


def _deadline_minutes(ref: GroupRef, group_object: Obj | None, pods: Sequence[Obj]) -> int | None:
    """The workload's own deadline (:meth:`~bridge.workloads.WorkloadKind.deadlines`: a
    Job's, the longest of every replicated job's), else every pod's
    spec.activeDeadlineSeconds; ceil to minutes."""
    own = kind_named(ref.kind).deadlines(ref, group_object) if group_object is not None else None
    if own is not None:
        limits = [_minutes(d.seconds, d.field, d.where) for d in own]
    else:
        field = "spec.activeDeadlineSeconds"
        limits = [
            _minutes(
                kobj.integer(p, "spec", "activeDeadlineSeconds"), field, kobj.describe(p, "Pod")
            )
            for p in pods
        ]
    if limits and all(m is not None for m in limits):
        return max(m for m in limits if m is not None)
    return None


def _priority(pods: Sequence[Obj]) -> int | None:
    values = [kobj.integer(p, "spec", "priority") for p in pods]
    known = [v for v in values if v is not None]
    return max(0, max(known)) if known else None


def _gres_annotation(raw: str) -> str:
    """``gpu:2`` -> ``gres/gpu:2``; a full tres (``gres/gpu:2``, ``license/x:1``) is kept."""
    return ",".join(p if "/" in p else f"gres/{p}" for p in raw.split(",") if p)


def _max_resources(resources: Iterable[PodResources]) -> PodResources:
    cpus = mem = 0
    gres: dict[str, int] = {}
    for r in resources:
        cpus, mem = max(cpus, r.cpus), max(mem, r.memory_mib)
        for name, n in r.gres.items():
            gres[name] = max(gres.get(name, 0), n)
    return PodResources(cpus=cpus, memory_mib=mem, gres=gres)


def with_devices(pod: Obj, own: PodResources, dra: DraInputs | None) -> PodResources:
    """A pod's needs plus its DRA requests: GRES of the device classes are added; the CPUs
    of ``dra.cpu`` are the larger of them and the pod's ``cpu`` request (the DRA CPU
    driver asks pods to repeat the claim's CPUs in ``resources.requests.cpu``)."""
    if dra is None:
        return own
    devices = pod_devices(pod, dra)
    if not devices.requests:
        return own
    gres = dict(own.gres)
    for name, n in devices.gres.items():
        gres[name] = gres.get(name, 0) + n
    for r in devices.extended:
        # a name both the GRES table and a DeviceClass's extendedResourceName know
        # (nvidia.com/mig-1g.10gb): the DRA form owns it, the pod's own GRES drop it
        if r.gres is not None and dra.gres_mapping.get(r.resource) == r.gres:
            gres[r.gres] -= r.count
            if gres[r.gres] <= 0:
                del gres[r.gres]
    return PodResources(cpus=max(own.cpus, devices.cpus), memory_mib=own.memory_mib, gres=gres)


TEMPLATES_MAX = 4096  # pod templates whose translation inputs are kept


@dataclass(frozen=True)
class _Derived:
    """What a lone pod's translation derives from its template: its options (with the
    namespace policy applied) and its job. The job names the pod it was made for; every
    field that does is replaced for the next pod (:func:`_own_fields`), the rest (its
    needs, time limit, placement bounds) follows from the template."""

    opts: SlurmJobOptions
    # held so that the ids in the key stay theirs while the entry lives
    settings: TranslateSettings
    policy: ResolvedPolicy | None
    # the job of the pod it was first translated for: a later pod of the template gets a
    # copy with its own name, comments and excluded nodes (:func:`_own_fields`), not a
    # second validation of what the template decides (a quarter of a lone pod's
    # translation, measured on the scheduler bench)
    spec: JobSpec


class PodTemplates:
    """A lone pod's options and job by what they are read from, so that the
    pods of one template (a Deployment's ReplicaSet, a Job's pods) are parsed once: about
    half of a lone pod's translation (the annotation parsers, the resource quantities,
    the policy), measured on the scheduler bench. The key is what
    :func:`translate_group` reads for them and nothing else (see :func:`_template_key`):
    the options' annotations, each container's resources (and an init container's
    restartPolicy), the pod's own resources and overhead, its priority and
    activeDeadlineSeconds, the settings and the namespace policy. Never the pod's name,
    uid or other labels: those are translated afresh each time, as is every error (a
    template whose translation fails is not kept). Bounded like the placement memo
    (tenants choose templates): at most :data:`TEMPLATES_MAX`, least recently used
    dropped first; the key is a 128-bit digest, so an entry stays small whatever the
    annotations say."""

    def __init__(self, max_entries: int = TEMPLATES_MAX) -> None:
        self._memo: BoundedMap[tuple[bytes, int, int], _Derived] = BoundedMap(
            "translate-pod-templates", max_entries
        )

    def get(self, key: tuple[bytes, int, int]) -> _Derived | None:
        return self._memo.get(key)

    def put(self, key: tuple[bytes, int, int], derived: _Derived) -> None:
        self._memo[key] = derived

    def __len__(self) -> int:
        return len(self._memo)


def _resources_read(spec: Any) -> list[Any]:
    """What :func:`~bridge.translate.resources.pod_resources` reads of a pod's ``spec``:
    each container's resources (and an init container's restartPolicy), the pod's own
    resources and its overhead."""
    return [
        [kobj.get(c, "resources") for c in kobj.sequence(spec, "containers")],
        [
            [kobj.get(c, "resources"), kobj.get(c, "restartPolicy")]
            for c in kobj.sequence(spec, "initContainers")
        ],
        kobj.get(spec, "resources"),
        kobj.get(spec, "overhead"),
    ]


def _json_key(read: Any) -> bytes | None:
    """``read`` as canonical JSON; None when it is not plain JSON (orjson raises on
    anything else rather than guessing a text for it)."""
    try:
        return orjson.dumps(read, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return None


def _template_key(
    pod: Obj, settings: TranslateSettings, policy: ResolvedPolicy | None
) -> tuple[bytes, int, int] | None:
    """What :func:`_derive` reads of a lone pod with no group object and no DRA request,
    and which settings and namespace policy it is read with (by identity: the entry holds
    both), as a key; None when the pod is not plain JSON (then it is translated without
    the cache). A policy's rule name is left out: it only appears in errors, never kept."""
    spec = kobj.get(pod, "spec")
    text = _json_key(
        [
            option_annotations(kobj.annotations(pod)),
            *_resources_read(spec),
            kobj.get(spec, "priority"),
            kobj.get(spec, "activeDeadlineSeconds"),
        ]
    )
    if text is None:
        return None
    digest = hashlib.blake2b(text, digest_size=16).digest()
    return digest, id(settings), id(policy.policy) if policy is not None else 0


def _own_needs(pods: Sequence[Obj], gres_mapping: Mapping[str, str]) -> list[PodResources]:
    """Each pod's own needs (:func:`~bridge.translate.resources.pod_resources`), read once
    per distinct :func:`_resources_read`: the members of a gang mostly share one template
    (reading each was ~60% of a 256-pod gang's translation, measured). A read that fails
    is not kept: the first pod with it raises, naming itself, as before."""
    if len(pods) == 1:
        return [pod_resources(pods[0], gres_mapping)]
    memo: dict[bytes, PodResources] = {}
    needs = []
    for p in pods:
        key = _json_key(_resources_read(kobj.get(p, "spec")))
        need = memo.get(key) if key is not None else None
        if need is None:
            need = pod_resources(p, gres_mapping)
            if key is not None:
                memo[key] = need
        needs.append(need)
    return needs


def _derive(
    ref: GroupRef,
    group_object: Obj | None,
    ordered: Sequence[Obj],
    settings: TranslateSettings,
    policy: ResolvedPolicy | None,
    dra: DraInputs | None,
    where: str,
) -> tuple[SlurmJobOptions, list[PodResources]]:
    """The group's options (pod annotations over the group object's, the policy
    enforced) and each pod's needs."""
    opts = _options(ordered, group_object, ref)
    class_priority = None
    if settings.priority_from_priority_class:
        # the group's class (a 1.37 PodGroup's priorityClassName) over its pods'; either
        # is pod-chosen, so it counts only where the policy allows (allowPodPriority)
        chosen = kind_named(ref.kind).priority(group_object) if group_object is not None else None
        class_priority = chosen if chosen is not None else _priority(ordered)
    if policy is not None:
        opts = enforce_policy(
            opts, policy, obj=where, partition=settings.partition, class_priority=class_priority
        )
    elif opts.priority is None:
        opts = opts.model_copy(update={"priority": class_priority})
    own = _own_needs(ordered, settings.gres_mapping)
    needs = [with_devices(p, n, dra) for p, n in zip(ordered, own, strict=True)]
    return opts, needs


def translate_group(
    pods: Sequence[Obj],
    group_object: Obj | None,
    nodes: Iterable[Obj] | NodeSet,
    settings: TranslateSettings,
    *,
    owners: Mapping[str, Obj] | None = None,
    dra: DraInputs | None = None,
    policy: ResolvedPolicy | None = None,
    related: Related | None = None,
    templates: PodTemplates | None = None,
) -> JobSpec | Waiting:
    """One Slurm placeholder job for a group of pods, or :class:`Waiting` when the group
    is not complete. Raises InvalidInput naming the object, field and reason.

    ``group_object`` is the object the group comes from (PodGroup, LWS, JobSet, or Job),
    None for a plain pod; ``nodes`` the current Kubernetes nodes (for excluded_nodes; a
    :class:`~bridge.translate.placement.NodeSet` memoizes them per placement);
    ``owners`` (uid -> object) any further owner objects the caller has read; ``dra``
    the DeviceClasses, claims and templates a pod's DRA requests name (see
    :mod:`bridge.translate.dra`): their CPUs and GRES join the pod's own; ``policy`` the
    namespace's Slurm identity and limits (:mod:`bridge.translate.policy`), enforced on
    the merged annotations (None: none, for tools and tests); ``related`` the objects the
    group's kind reads besides (:class:`~bridge.workloads.Related`: a Workload's
    PodGroups, made from its templates, are one gang, a component each: docs/hetjob.md;
    ``group_object`` is always among them); ``templates``
    a :class:`PodTemplates` for a lone pod's template-derived inputs (the outcome is the
    same with or without it).
    """
    if not pods:
        raise InvalidInput("pods", "a group needs at least one pod")
    lookup: Mapping[str, Obj] = owners if owners is not None else {}
    if group_object is not None and kobj.uid(group_object):
        lookup = _OneMore(kobj.uid(group_object), group_object, lookup)
    held = with_object(related, group_object)
    ref = _group_of_all(pods, lookup, settings, held)
    check_source(ref, group_object, pods)
    group = ref.group_id(group_object)
    where = f"{ref.kind} {ref.namespace}/{ref.name}"
    size = expected_size(ref, group_object, pods, held)
    if size is not None and size < 1:
        field = kind_named(ref.kind).size_field
        raise InvalidInput(field, f"a group needs at least 1 pod, got size {size}", where)
    if size is None or len(pods) < size:
        return Waiting(group=group, have=len(pods), want=size)
    ordered = order_pods(ref, group_object, pods, held)
    keys = [kobj.pod_key(p) for p in ordered]
    _check_group_text(group, keys, where)
    node_set = nodes if isinstance(nodes, NodeSet) else list(nodes)
    lone = len(ordered) == 1 and group_object is None and dra is None
    tkey = _template_key(ordered[0], settings, policy) if templates is not None and lone else None
    kept = templates.get(tkey) if templates is not None and tkey is not None else None
    if kept is not None:
        # the same template was translated before: only what names this pod is new
        return kept.spec.model_copy(
            update=_own_fields(kept.opts, ref.name, group, settings, node_set, where, ordered, keys)
        )
    opts, needs = _derive(ref, group_object, ordered, settings, policy, dra, where)
    time_limit = opts.timelimit_minutes or _deadline_minutes(ref, group_object, ordered)
    parts = (
        components(ref, ordered, [Shape.of(p, n) for p, n in zip(ordered, needs, strict=True)])
        if settings.gang_sizing == "hetjob" and len(ordered) > 1
        else [list(range(len(ordered)))]
    )
    common = _Common(
        group=group,
        name=ref.name,
        opts=opts,
        settings=settings,
        nodes=node_set,
        where=where,
        priority=opts.priority,
        time_limit=time_limit,
    )
    if len(parts) == 1:
        need = _max_resources(needs)
        spec = _job(common, ordered, need, keys, size=size, count=len(ordered))
        if templates is not None and tkey is not None:
            templates.put(tkey, _Derived(opts, settings, policy, spec))
        return spec
    if opts.min_nodes is not None or opts.max_nodes is not None:
        key = "min-nodes" if opts.min_nodes is not None else "max-nodes"
        raise InvalidInput(
            slurmjob_annotation(key),
            f"the gang has {len(parts)} shapes, so it becomes one heterogeneous Slurm job "
            "with a component per shape, and a node count for the whole gang means nothing "
            "there; remove it (docs/hetjob.md)",
            where,
        )
    specs = []
    any_gres = any(n.gres for n in needs)
    for k, members in enumerate(parts):
        mine = [ordered[i] for i in members]
        need = _max_resources(needs[i] for i in members)
        # Exclusive placement hands a job every GRES of its nodes (gres_detail reads
        # gpu(CNT:2) for a 0-GPU component on a 2-GPU node): a component asking none,
        # beside components that ask some, shares its nodes unless told to be exclusive.
        shared = any_gres and not need.gres and opts.exclusive is None
        spec = _job(
            common,
            mine,
            need,
            [keys[i] for i in members],
            size=len(mine),
            count=len(mine),
            component=(k, len(parts)),
            exclusive=False if shared else None,
        )
        specs.append(spec)
    return specs[0].model_copy(update={"het_components": tuple(specs[1:])})


@dataclass(frozen=True)
class _Common:
    """What every component of a gang shares."""

    group: GroupId
    name: str
    opts: SlurmJobOptions
    settings: TranslateSettings
    nodes: Sequence[Obj] | NodeSet
    where: str
    priority: int | None
    time_limit: int | None


def _component_topology(
    common: _Common, nodes: int, component: tuple[int, int] | None
) -> TopologyRequest:
    """The gang's topology request for a job (or a component) of ``nodes`` nodes. A
    component it cannot apply to (a node count that is not a whole number of segments,
    fewer nodes than switches) goes without, as docs/hetjob.md says."""
    opts = common.opts

    def request(asked: bool) -> TopologyRequest:
        return topology_request(
            segment=opts.segment if asked else None,
            switches=opts.switches if asked else None,
            required_level=opts.required_topology if asked else None,
            preferred_level=opts.preferred_topology if asked else None,
            nodes=nodes,
            policy=common.settings.topology,
            where=common.where,
        )

    if component is None:
        return request(True)
    try:
        return request(True)
    except InvalidInput:
        return request(False)


def exclusive_node_bounds(
    opts: SlurmJobOptions, *, size: int, count: int, where: str
) -> tuple[int, int]:
    """The (min, max) nodes of an exclusive job of ``count`` pods, ``size`` of them needed
    at once (one pod per node), or the InvalidInput naming the annotation that cannot
    hold. The admission webhook asks it for a lone pod (1 of 1), so it denies at once
    what the scheduler would refuse."""
    gang = min(size, count)
    max_nodes = min(opts.max_nodes or count, count)
    if opts.max_nodes is not None and gang > opts.max_nodes:
        raise InvalidInput(
            slurmjob_annotation("max-nodes"),
            f"a gang of {gang} pods needs {gang} nodes with exclusive placement (one pod "
            f'per node), but max-nodes is {opts.max_nodes}; set exclusive to "false" '
            "to pack pods",
            where,
        )
    min_nodes = opts.min_nodes or gang
    if min_nodes > max_nodes:
        raise InvalidInput(
            slurmjob_annotation("min-nodes"),
            f"min-nodes ({min_nodes}) is larger than the {count} pods of the group "
            "(exclusive placement puts one pod per node)",
            where,
        )
    return min_nodes, max_nodes


def _job(
    common: _Common,
    ordered: Sequence[Obj],
    need: PodResources,
    keys: Sequence[str],
    *,
    size: int,
    count: int,
    component: tuple[int, int] | None = None,
    exclusive: bool | None = None,
) -> JobSpec:
    """One Slurm job description for ``ordered`` pods needing ``need`` each: the whole
    gang, or (``component`` = (offset, of)) one component of its heterogeneous job."""
    opts, settings, where, group = common.opts, common.settings, common.where, common.group
    cpus = opts.cpu_per_task or max(1, need.cpus)
    memory = opts.mem_per_node_mib or need.memory_mib or None
    gres_override = _gres_annotation(opts.gres) if opts.gres else None
    if exclusive is None:
        exclusive = opts.exclusive is not False
    if opts.gres:
        # exclusive: one pod per node; shared: all but one per other node may share one
        sharing = 1 if exclusive else max(1, count - (opts.min_nodes or 1) + 1)
        problem = gres_floor_problem(opts.gres, need.gres, sharing)
        if problem is not None:
            raise InvalidInput(slurmjob_annotation("gres"), problem, where)

    placement: dict[str, Any]
    if exclusive:
        min_nodes, max_nodes = exclusive_node_bounds(opts, size=size, count=count, where=where)
        placement = {
            "min_nodes": min_nodes,
            "max_nodes": max_nodes,
            "tasks": min_nodes,
            "tasks_per_node": 1,
            "memory_per_node_mib": memory,
            "tres_per_node": gres_override or tres_string(need.gres),
        }
    else:
        min_nodes = opts.min_nodes or 1
        max_nodes = max(opts.max_nodes or count, min_nodes)
        per_cpu = None if memory is None or opts.mem_per_node_mib else -(-memory // cpus)
        placement = {
            "min_nodes": min_nodes,
            "max_nodes": max_nodes,
            "tasks": count,
            "memory_per_cpu_mib": per_cpu,
            "memory_per_node_mib": opts.mem_per_node_mib,
            "tres_per_node": gres_override,
            "tres_per_task": None if gres_override else tres_string(need.gres),
        }

    topology = _component_topology(common, placement["min_nodes"], component)
    own = _own_fields(
        opts, common.name, group, settings, common.nodes, where, ordered, keys, component
    )
    return JobSpec(
        partition=opts.partition or settings.partition,
        cpus_per_task=cpus,
        exclusive=exclusive,
        time_limit_minutes=common.time_limit,
        account=opts.account,
        qos=opts.qos,
        reservation=opts.reservation,
        licenses=opts.licenses,
        constraints=opts.constraints,
        wckey=opts.wckey,
        user_id=opts.user_id,
        group_id=opts.group_id,
        priority=common.priority,
        mcs_label=settings.mcs_label,
        segment_size=topology.segment_size,
        required_switches=topology.required_switches,
        wait_for_switch_seconds=topology.wait_for_switch_seconds,
        **own,
        **placement,
    )


def _own_fields(
    opts: SlurmJobOptions,
    name: str,
    group: GroupId,
    settings: TranslateSettings,
    nodes: Sequence[Obj] | NodeSet,
    where: str,
    ordered: Sequence[Obj],
    keys: Sequence[str],
    component: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """What a job takes from its own pods rather than from their template: its name (the
    group's, unless an option names it), its comments (the group and the pods' keys and
    uids) and the nodes its pods cannot use. Every other field of a lone pod's job follows
    from its template (:class:`PodTemplates`)."""
    comment = human_comment(group, len(ordered))
    if component is not None:
        comment += f", component {component[0]} of {component[1]}"
    return {
        "name": opts.job_name or name,
        "excluded_nodes": (
            nodes.excluded(ordered, obj=where)
            if isinstance(nodes, NodeSet)
            else excluded_nodes(ordered, nodes, obj=where)
        ),
        "comment": comment,
        "admin_comment": admin_comment(
            group, keys, settings.mcs_label, [kobj.uid(p) for p in ordered]
        ),
    }
