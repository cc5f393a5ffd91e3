"""DRA for the scheduler: read what a group's DRA requests name, and allocate the claims
of bound-to-be pods to the devices Slurm allocated, before binding.

What it reads costs no list per cycle: DeviceClasses, ResourceSlices, ResourceClaims,
their templates and DeviceTaintRules come from watch-fed copies (:class:`DraCache`, fed
by :mod:`scheduler.app`). The snapshot reads the copies only (:meth:`DraAllocator.inputs`:
a claim or template they lack does not exist yet, and its arrival wakes the group). The
allocation, until a copy's initial list has arrived (or where the cluster does not serve
``resource.k8s.io/v1``), falls back to a list of the node's slices, of the claims.

Restart-safe and idempotent: every claim is written whole in one status write
(``allocation`` and ``reservedFor`` together), so a restart finds a claim either untouched
or complete; a claim already allocated for the pods being bound alone (by an earlier Slurm
job, or an earlier try) is deallocated and allocated afresh from this job's devices, so a
claim never keeps a device of another job; the extended-resource claim is found again by
its owner and annotation, never created twice.
The order per pod is: (1) the extended-resource claim exists (created with the finalizer
``resource.kubernetes.io/delete-protection``; users' claims get it added), (2) each claim's
status is written, (3) ``pod.status.extendedResourceClaimStatus`` names the claim. Only
then is the pod bound. When the pod ends the bridge's controller (:mod:`controller.claims`)
and kube-controller-manager's resourceclaim controller release and deallocate them, and
delete the generated ones.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bridge.bounded import BoundedMap
from bridge.devices.allocation import (
    DeviceId,
    Picked,
    SlurmNodeView,
    allocate_pod,
    allocated_node,
    allocation_result,
    taken_devices,
)
from bridge.devices.taints import (
    NO_EXECUTE,
    describe,
    held_devices,
    untolerated,
    with_rules,
)
from bridge.errors import InvalidInput, KubeConflict, KubeNotFound
from bridge.kube.client import KubeClient
from bridge.kube.resources import DEVICE_TAINT_RULES, PODS, RESOURCE_CLAIMS, KubeObject, Resource
from bridge.kube.resources import RESOURCE_SLICES as RESOURCE_SLICES  # re-exported
from bridge.slurm.client import SlurmClient
from bridge.translate import kobj
from bridge.translate.dra import (
    EXTENDED_CLAIM_ANNOTATION,
    EXTENDED_PREFIX,
    DeviceKind,
    DeviceRequest,
    DraInputs,
    PodDevices,
    mig_gres,
    pod_devices,
)
from bridge.translate.resources import BUILTIN_GRES
from bridge.wellknown import CLAIM_DELETE_PROTECTION, LABEL_JOB_ID

DEVICE_CLASSES = Resource("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False)
CLAIM_TEMPLATES = Resource(
    "resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True
)
DELETE_PROTECTION = CLAIM_DELETE_PROTECTION
KINDS_MAX = 1024  # resolved (class, selectors) kept per cache generation
SLICE_DEVICES_MAX = 16384  # slices whose devices are kept as selectors see them


class ClaimsNotReady(Exception):
    """A pod's claim from a template does not exist yet (kube-controller-manager creates
    it and names it in ``status.resourceClaimStatuses``): try again shortly."""


def wants_dra(
    pod: Mapping[str, Any], gres_mapping: Mapping[str, str], claimed: Iterable[str] = ()
) -> bool:
    """Whether a pod may have DRA requests (claims, or an extended resource that is not a
    native or configured one, which a DeviceClass may back, or one a DeviceClass's
    ``extendedResourceName`` in ``claimed`` names)."""
    if kobj.sequence(pod, "spec", "resourceClaims"):
        return True
    known: dict[str, str] | None = None  # built for the first resource with a "/" only
    for kind in ("initContainers", "containers"):
        for c in kobj.sequence(pod, "spec", kind):
            for which in ("requests", "limits"):
                for r in kobj.mapping(c, "resources", which):
                    if r.startswith(EXTENDED_PREFIX):
                        return True
                    if "/" not in r or r.startswith("hugepages-"):
                        continue
                    if known is None:
                        known = {**BUILTIN_GRES, **gres_mapping}
                        for name in claimed:
                            known.pop(name, None)
                    if r not in known:
                        return True
    return False


def _by_name(items: Sequence[KubeObject]) -> dict[str, KubeObject]:
    return {kobj.name(o): o for o in items}


def _pod_ref(pod: Mapping[str, Any]) -> dict[str, str]:
    return {"resource": "pods", "name": kobj.name(pod), "uid": kobj.uid(pod)}


class DraCache:
    """Watch-fed copies of the cluster's DeviceClasses, ResourceSlices (by node),
    ResourceClaims, ResourceClaimTemplates and DeviceTaintRules. ``synced`` names the
    resources whose initial list has arrived (the allocation reads the others from the
    API; the snapshot only ever reads here)."""

    def __init__(self) -> None:
        self.classes: dict[str, KubeObject] = {}
        self.claims: dict[tuple[str, str], KubeObject] = {}  # (namespace, name)
        self.templates: dict[tuple[str, str], KubeObject] = {}  # claim templates, likewise
        self._slices: dict[str, dict[str, KubeObject]] = {}  # node -> name -> slice
        self._slice_node: dict[str, str] = {}  # slice name -> node
        # DeviceTaintRules by name (Kubernetes 1.37+; where not served, listed as none)
        self.taint_rules: dict[str, KubeObject] = {}
        self.synced: set[str] = set()
        # bumped by every class and slice change: what a selector resolves to may change
        self.generation = 0

    def listed(self, res: Resource) -> None:
        self.generation += 1
        self.synced.add(res.plural)

    def on_class_event(self, event: str, obj: KubeObject) -> None:
        self.generation += 1
        if event == "DELETED":
            self.classes.pop(kobj.name(obj), None)
        else:
            self.classes[kobj.name(obj)] = obj

    def on_slice_event(self, event: str, obj: KubeObject) -> None:
        self.generation += 1
        name = kobj.name(obj)
        old = self._slice_node.pop(name, None)
        if old is not None:
            self._slices.get(old, {}).pop(name, None)
        if event != "DELETED":
            node = kobj.text(obj, "spec", "nodeName")
            self._slice_node[name] = node
            self._slices.setdefault(node, {})[name] = obj

    def on_taint_rule_event(self, event: str, obj: KubeObject) -> None:
        if event == "DELETED":
            self.taint_rules.pop(kobj.name(obj), None)
        else:
            self.taint_rules[kobj.name(obj)] = obj

    def on_claim_event(self, event: str, obj: KubeObject) -> None:
        key = (kobj.namespace(obj), kobj.name(obj))
        if event == "DELETED":
            self.claims.pop(key, None)
        elif kobj.not_older(obj, self.claims.get(key)):
            self.claims[key] = obj

    def on_template_event(self, event: str, obj: KubeObject) -> None:
        key = (kobj.namespace(obj), kobj.name(obj))
        if event == "DELETED":
            self.templates.pop(key, None)
        else:
            self.templates[key] = obj

    def slices_on(self, node: str) -> list[KubeObject]:
        return list(self._slices.get(node, {}).values())

    def all_slices(self) -> list[KubeObject]:
        return [s for by_name in self._slices.values() for s in by_name.values()]


def gres_layout(node_gres: str) -> tuple[tuple[str, int], ...]:
    """A node's typed GRES and counts in the order of its ``Gres=``, which is how Slurm
    numbers its devices of one name, once across the types
    (``gpu:a100:1,gpu:1g.10gb:7(S:0)`` -> ``(("gpu:a100", 1), ("gpu:1g.10gb", 7))``)."""
    out: list[tuple[str, int]] = []
    for part in node_gres.split(","):
        fields = part.split("(")[0].strip().split(":")
        if len(fields) == 3 and fields[2].isdigit():
            out.append((f"{fields[0]}:{fields[1]}", int(fields[2])))
    return tuple(out)


@dataclass
class _ClaimUse:
    """A claim a pod uses: the claim (None: the extended one, not created yet), the pod's
    entry name (None: the extended one), its requests, and whether its allocation on
    another node is cleared first."""

    claim: KubeObject | None
    entry: str | None
    reqs: tuple[DeviceRequest, ...]
    reclaim: bool = False


@dataclass(frozen=True)
class _PodPlan:
    """What :meth:`DraAllocator._plan_pod` decided for one pod, to be written."""

    pod: KubeObject
    node: str
    devices: PodDevices
    todo: list[_ClaimUse]
    picked: Mapping[tuple[str | None, str], Picked]


@dataclass
class _Ours:
    """One allocation: the group's Slurm job (its pods' job-id label), the uids of the
    pods being bound, the claims picked so far -> their node."""

    group: str
    uids: set[str]
    picked: dict[tuple[str, str], str] = field(default_factory=dict)


def _holders_elsewhere(claim: KubeObject, ours: _Ours) -> list[Mapping[str, Any]]:
    """The consumers a claim is reserved for that are not pods of this allocation."""
    return [
        r for r in kobj.sequence(claim, "status", "reservedFor") if r.get("uid") not in ours.uids
    ]


def _refuse_evicting(claim: KubeObject, slices: Sequence[KubeObject], where: str) -> None:
    """A claim holding a device tainted NoExecute that its request does not tolerate takes
    no new pod (KEP-5055: its pods are being evicted, the bridge's controller does it;
    the claim is freed once they are gone)."""
    for held in held_devices(claim, slices):
        evicting = untolerated(held.taints, held.tolerations, (NO_EXECUTE,))
        if evicting:
            raise InvalidInput(
                "spec.resourceClaims",
                f"ResourceClaim {kobj.name(claim)!r} holds device {held.device}, tainted "
                f"{describe(evicting[0])}, which its request {held.request!r} does not "
                "tolerate: no new pod may use it (its pods are evicted)",
                where,
            )


class DraAllocator:
    def __init__(
        self,
        kube: KubeClient,
        slurm: SlurmClient,
        *,
        device_class_gres: Mapping[str, str],
        gres_mapping: Mapping[str, str],
        node_ok: Callable[[str], bool] | None = None,
    ) -> None:
        self.kube = kube
        self.slurm = slurm
        # One allocation at a time: each reads what the claims hold, picks and writes
        # before the next one reads (jobs started together on one node, by parallel
        # workers, picked from one read: the same device for every claim).
        self._picking = asyncio.Lock()
        self.device_class_gres = dict(device_class_gres)
        self.gres_mapping = dict(gres_mapping)
        # typed GRES -> MIG profile (gpu:1g.10gb -> 1g.10gb), to read Slurm's indices
        self.profiles = {g: p for p, g in mig_gres(self.gres_mapping).items()}
        self.cache = DraCache()
        # what (class, request selectors: tenant text) resolve to against the cached
        # classes and slices, valid for one cache generation
        self._kinds: BoundedMap[tuple[str, tuple[str, ...]], DeviceKind] = BoundedMap(
            "dra-selector-kinds", KINDS_MAX
        )
        self._kinds_generation = -1
        # each slice's devices as selectors see them, per slice version
        self._slice_devices: BoundedMap[tuple[str, str, str], tuple[dict[str, Any], ...]] = (
            BoundedMap("dra-slice-devices", SLICE_DEVICES_MAX)
        )
        # which nodes' slices selectors are resolved over: a node that exists and that
        # Slurm knows (a slice naming any other node, e.g. forged, is ignored); None: all
        self.node_ok = node_ok
        self._kinds_nodes: frozenset[str] = frozenset()
        # a group's DRA inputs are followed at once, on the loop, by its CEL work (bounded
        # by selectors.BUDGET): one group a pass of the event loop, and a whole pass (its
        # timers, I/O and other work) between two, however many workers translate at once
        self._cel_turn: asyncio.Future[None] | None = None

    async def _take_cel_turn(self) -> None:
        """Wait for a pass of the event loop with no other group's CEL work in it."""
        while self._cel_turn is not None:
            await asyncio.shield(self._cel_turn)  # done at the next pass; resumed after it
        loop = asyncio.get_running_loop()
        self._cel_turn = loop.create_future()
        loop.call_soon(self._end_cel_turn)

    def _end_cel_turn(self) -> None:
        turn, self._cel_turn = self._cel_turn, None
        if turn is not None:
            turn.set_result(None)

    def _claimed(self) -> set[str]:
        return {
            kobj.text(c, "spec", "extendedResourceName") for c in self.cache.classes.values()
        } - {""}

    def wants(self, pods: Sequence[KubeObject]) -> bool:
        """Whether any of ``pods`` may have DRA requests (:func:`wants_dra`)."""
        claimed = self._claimed()
        return any(wants_dra(p, self.gres_mapping, claimed) for p in pods)

    async def cel_turn(self) -> None:
        """Wait for a pass of the event loop with no other group's CEL work in it: the
        caller's follows (:meth:`inputs` and translation), with no await between."""
        await self._take_cel_turn()

    def inputs(self, pods: Sequence[KubeObject]) -> DraInputs | None:
        """What the pods' DRA requests name (None when no pod has any), from the watch
        caches only (no read: the snapshot's copy): the classes, the claims and
        templates the pods name, the slices. A claim or template not held does not exist
        yet (translation says so; its arrival wakes the group: :mod:`scheduler.cycle`)."""
        claimed = self._claimed()
        wanting = [p for p in pods if wants_dra(p, self.gres_mapping, claimed)]
        if not wanting:
            return None
        claims: dict[str, KubeObject] = {}
        templates: dict[str, KubeObject] = {}
        for p in wanting:
            ns = kobj.namespace(p)
            for entry in kobj.sequence(p, "spec", "resourceClaims"):
                if name := kobj.text(entry, "resourceClaimName"):
                    if (claim := self.cache.claims.get((ns, name))) is not None:
                        claims[name] = claim
                elif (name := kobj.text(entry, "resourceClaimTemplateName")) and (
                    template := self.cache.templates.get((ns, name))
                ) is not None:
                    templates[name] = template
        slices = self.cache.all_slices()
        if self.node_ok is not None:
            ok = self.node_ok
            slices = [s for s in slices if ok(kobj.text(s, "spec", "nodeName"))]
        # one namespace per group (pods of a group share it)
        return DraInputs(
            classes=dict(self.cache.classes),
            claims=claims,
            templates=templates,
            device_class_gres=self.device_class_gres,
            gres_mapping=self.gres_mapping,
            slices=slices,
            kinds=self._kind_memo(frozenset(kobj.text(s, "spec", "nodeName") for s in slices)),
            devices=self._slice_devices,
        )

    def _kind_memo(
        self, nodes: frozenset[str]
    ) -> BoundedMap[tuple[str, tuple[str, ...]], DeviceKind] | None:
        """The resolution memo while classes and slices come from the cache (None when
        they are read from the API), for slices of these ``nodes``."""
        if not {DEVICE_CLASSES.plural, RESOURCE_SLICES.plural} <= self.cache.synced:
            return None
        if self._kinds_generation != self.cache.generation or self._kinds_nodes != nodes:
            self._kinds.clear()
            self._kinds_generation = self.cache.generation
            self._kinds_nodes = nodes
        return self._kinds

    async def _taint_rules(self) -> list[KubeObject]:
        """Every DeviceTaintRule: the cache once synced (or found not served), else a
        list (none where the cluster does not serve them)."""
        if DEVICE_TAINT_RULES.plural in self.cache.synced:
            return list(self.cache.taint_rules.values())
        try:
            return list((await self.kube.list(DEVICE_TAINT_RULES)).items)
        except KubeNotFound:
            return []

    async def _read(self, res: Resource, namespace: str, name: str) -> KubeObject | None:
        try:
            return await self.kube.get(res, name, namespace)
        except KubeNotFound:
            return None

    def held_slices_of(self, node: str) -> list[KubeObject]:
        """:meth:`slices_of` from the watch caches only (the snapshot's copy)."""
        return with_rules(self.cache.slices_on(node), list(self.cache.taint_rules.values()))

    async def slices_of(self, node: str) -> list[KubeObject]:
        """The ResourceSlices of Kubernetes node ``node``, with the DeviceTaintRules'
        taints merged into their devices (what the allocation reads: a tainted device is
        never picked; a rule that comes or goes changes their fingerprint, so it lifts a
        device exclusion as a slice change does)."""
        return with_rules(await self._slices_on(node), await self._taint_rules())

    async def _slices_on(self, node: str) -> list[KubeObject]:
        if RESOURCE_SLICES.plural in self.cache.synced:
            return self.cache.slices_on(node)
        listed = await self.kube.list(RESOURCE_SLICES, field_selector=f"spec.nodeName={node}")
        return list(listed.items)

    async def _all_claims(self) -> dict[tuple[str, str], KubeObject]:
        """Every claim by (namespace, name): the cache itself once synced (the claims
        written here are kept in it), else a list."""
        if RESOURCE_CLAIMS.plural in self.cache.synced:
            return self.cache.claims
        listed = await self.kube.list(RESOURCE_CLAIMS)
        return {(kobj.namespace(c), kobj.name(c)): c for c in listed.items}

    async def allocate(
        self,
        job_id: int,
        plan: Sequence[tuple[KubeObject, str]],
        to_kube: Mapping[str, str],
        *,
        group: int | None = None,
    ) -> int:
        """Allocate the claims of ``plan`` (pod, Kubernetes node) from Slurm's allocation
        of ``job_id``; the number of claims written. ``group``: the Slurm job whose pods
        may share a claim (the pods' job-id label; default ``job_id``, a hetjob's leader
        for its components). Every pod's devices are picked before anything is written, so
        a refusal writes nothing. Raises DeviceAllocationError (node and driver named;
        DeviceMismatch when Slurm and the slices disagree), InvalidInput, ClaimsNotReady."""
        plan_pods = [p for p, _ in plan]
        if not self.wants(plan_pods):
            return 0
        await self._take_cel_turn()  # the CEL work of pod_devices follows, no await between
        inputs = self.inputs(plan_pods)
        if inputs is None:
            return 0
        wanted: list[tuple[KubeObject, str, PodDevices]] = []
        for pod, node in plan:
            devices = pod_devices(pod, inputs)
            if devices.requests:
                wanted.append((pod, node, devices))
        if not wanted:
            return 0
        resources = await self.slurm.get_job_resources(job_id)
        views: dict[str, SlurmNodeView] = {}
        for r in resources:
            given = {(f"{g.name}:{g.type}" if g.type else g.name): g for g in r.gres if g.count}
            gres = {k: g.indices for k, g in given.items()}
            layout: tuple[tuple[str, int], ...] = ()
            if any(":" in k for k in gres):
                # typed indices count from the node's first device of the name; where
                # Slurm only counts, the layout keeps what is still free packable
                layout = gres_layout((await self.slurm.get_node(r.node)).gres)
            views[to_kube.get(r.node, r.node)] = SlurmNodeView(
                cores=r.cores,
                gres=gres,
                cores_per_socket=r.cores_per_socket,
                gres_layout=layout,
                counts={k: g.count for k, g in given.items()},
            )
        nodes = sorted({n for _, n, _ in wanted})
        # the DeviceTaintRules' taints merged in: a tainted device is never picked for a
        # request that does not tolerate it (bridge.devices.taints)
        slice_lists = await asyncio.gather(*(self.slices_of(n) for n in nodes))
        slices = dict(zip(nodes, slice_lists, strict=True))
        # claims by (namespace, name), kept current as they are written (a claim two pods
        # of the group share is allocated once, then only reserved for the second)
        async with self._picking:
            known = await self._all_claims()
            taken = taken_devices(list(known.values()))
            ours = _Ours(
                str(group if group is not None else job_id), {kobj.uid(p) for p, _ in plan}
            )
            pods = [
                await self._plan_pod(
                    pod,
                    node,
                    devices,
                    views.get(node, SlurmNodeView()),
                    slices[node],
                    known,
                    taken,
                    ours,
                )
                for pod, node, devices in wanted
            ]
            written = 0
            for planned in pods:
                written += await self._write_pod(planned, inputs, known)
        return written

    def _claim_of(self, pod: KubeObject, entry: Mapping[str, Any]) -> str:
        if entry.get("resourceClaimName"):
            return str(entry["resourceClaimName"])
        for st in kobj.sequence(pod, "status", "resourceClaimStatuses"):
            if kobj.text(st, "name") == entry.get("name") and kobj.text(st, "resourceClaimName"):
                return kobj.text(st, "resourceClaimName")
        raise ClaimsNotReady(
            f"{kobj.describe(pod, 'Pod')}: the claim of spec.resourceClaims "
            f"{entry.get('name')!r} does not exist yet"
        )

    async def _plan_pod(
        self,
        pod: KubeObject,
        node: str,
        devices: PodDevices,
        view: SlurmNodeView,
        slices: Sequence[KubeObject],
        known: dict[tuple[str, str], KubeObject],
        taken: set[DeviceId],
        ours: _Ours,
    ) -> _PodPlan:
        """The claims ``pod`` uses and the devices picked for those not allocated yet;
        nothing written. One another group holds is refused. One allocated but held by no
        pod outside this allocation is allocated afresh (deallocated when written): its
        devices are an earlier job's, which Slurm may have given to someone else since,
        on this node or another. One that pods bound earlier hold is shared as it is."""
        ns = kobj.namespace(pod)
        where = kobj.describe(pod, "Pod")
        todo: list[_ClaimUse] = []
        for entry in kobj.sequence(pod, "spec", "resourceClaims"):
            name = self._claim_of(pod, entry)
            claim = known.get((ns, name))
            if claim is None:
                claim = await self.kube.get(RESOURCE_CLAIMS, name, ns)
            todo.append(
                _ClaimUse(claim, str(entry.get("name")), devices.of_claim(str(entry.get("name"))))
            )
        if devices.extended:
            todo.append(
                _ClaimUse(self._extended_claim(pod, list(known.values())), None, devices.extended)
            )
        # what must be picked: requests of claims not allocated yet
        pick: list[DeviceRequest] = []
        for use in todo:
            if use.claim is None:
                pick += use.reqs
                continue
            key = (ns, kobj.name(use.claim))
            if key in ours.picked:  # another pod of this allocation picks its devices
                if ours.picked[key] != node:
                    raise InvalidInput(
                        "spec.resourceClaims",
                        f"ResourceClaim {key[1]!r} is allocated on node {ours.picked[key]} for "
                        f"another pod of the group, but Slurm placed this pod on {node}",
                        where,
                    )
                continue
            await self._check_holders(pod, use.claim, ours, where)
            allocated = kobj.get(use.claim, "status", "allocation") is not None
            elsewhere = _holders_elsewhere(use.claim, ours)
            if allocated and not elsewhere:
                # written for these pods by an earlier Slurm job (given back, or cancelled
                # before they were bound) or an earlier try: allocated afresh from this
                # job's devices (its own are free to pick again)
                use.reclaim = True
                taken.difference_update(taken_devices([use.claim]))
            elif (other := allocated_node(use.claim)) not in (None, node):
                raise InvalidInput(
                    "spec.resourceClaims",
                    f"ResourceClaim {key[1]!r} is allocated on node {other} and in use by "
                    f"{elsewhere[0].get('name')}, but Slurm placed the pod on {node}",
                    where,
                )
            elif allocated:
                _refuse_evicting(use.claim, slices, where)
            if use.reclaim or not allocated:
                pick += use.reqs
                ours.picked[key] = node
        picked = allocate_pod(node, pick, view, slices, taken, self.profiles)
        return _PodPlan(pod, node, devices, todo, picked)

    async def _write_pod(
        self, plan: _PodPlan, inputs: DraInputs, known: dict[tuple[str, str], KubeObject]
    ) -> int:
        """Write what :meth:`_plan_pod` picked: each claim's status (created, for the
        extended one), then the pod's extended-resource claim status. The claims written."""
        pod, ns = plan.pod, kobj.namespace(plan.pod)
        written = 0
        extended: KubeObject | None = None
        for use in plan.todo:
            claim = use.claim
            if claim is None:
                claim = await self._create_extended(pod, use.reqs)
                # kept at once: a retry after a failed status write finds it (never a
                # second one), whether or not the watch has brought it yet
                known[(ns, kobj.name(claim))] = claim
            else:
                # as written meanwhile for another pod of the group, if it was
                claim = known.get((ns, kobj.name(claim)), claim)
                if use.reclaim:
                    claim = await self._patch_status(
                        claim, {"allocation": None, "reservedFor": None}
                    )
                if DELETE_PROTECTION not in (kobj.get(claim, "metadata", "finalizers") or []):
                    claim = await self.kube.add_finalizer(
                        RESOURCE_CLAIMS, kobj.name(claim), DELETE_PROTECTION, ns
                    )
            updated = await self._write_status(pod, plan.node, claim, use.reqs, plan.picked, inputs)
            if updated is not None:
                claim = updated
                written += 1
            if kobj.not_older(claim, known.get((ns, kobj.name(claim)))):
                known[(ns, kobj.name(claim))] = claim
            if use.entry is None:
                extended = claim
        if extended is not None:
            await self._name_extended(pod, extended, plan.devices.extended)
        return written

    async def _check_holders(
        self, pod: KubeObject, claim: KubeObject, ours: _Ours, where: str
    ) -> None:
        """A claim belongs to one group: one reserved for a consumer that is not a pod of
        this group (another Slurm job's pod, another scheduler's, one gone) is refused,
        naming the claim and who holds it. Its devices are that job's: the pod would use
        them while its own job holds others, and keep them after that job ends."""
        for ref in kobj.sequence(claim, "status", "reservedFor"):
            uid = str(ref.get("uid") or "")
            if uid == kobj.uid(pod) or uid in ours.uids:
                continue
            who = f"{ref.get('resource') or 'consumer'} {ref.get('name')}"
            job = None
            if ref.get("resource") == "pods":
                holder = await self._read(PODS, kobj.namespace(claim), str(ref.get("name")))
                if holder is not None and kobj.uid(holder) == uid:
                    job = kobj.labels(holder).get(LABEL_JOB_ID)
                else:
                    who += " (no longer exists, its reservation not yet released)"
            if job == ours.group:
                continue
            raise InvalidInput(
                "spec.resourceClaims",
                f"ResourceClaim {kobj.name(claim)!r} is reserved by {who} of "
                + (f"Slurm job {job}" if job else "no Slurm job of the bridge")
                + f", not of this pod's group (Slurm job {ours.group}): a claim belongs to one "
                "group, whose Slurm job holds its devices; use a claim of your own",
                where,
            )

    async def _patch_status(self, claim: KubeObject, status: dict[str, Any]) -> KubeObject:
        """A merge patch of the claim's status, conditional on the uid and resourceVersion
        read (409 when it changed meanwhile)."""
        return await self.kube.patch(
            RESOURCE_CLAIMS,
            kobj.name(claim),
            {
                "metadata": {
                    "uid": kobj.uid(claim),
                    "resourceVersion": kobj.text(claim, "metadata", "resourceVersion"),
                },
                "status": status,
            },
            namespace=kobj.namespace(claim),
            subresource="status",
        )

    def _extended_claim(self, pod: KubeObject, claims: Iterable[KubeObject]) -> KubeObject | None:
        """The pod's extended-resource claim, if an earlier attempt created it."""
        uid = kobj.uid(pod)
        for c in claims:
            if kobj.namespace(c) != kobj.namespace(pod):
                continue
            if kobj.annotations(c).get(EXTENDED_CLAIM_ANNOTATION) != "true":
                continue
            if any(r.get("uid") == uid for r in kobj.sequence(c, "metadata", "ownerReferences")):
                return c
        return None

    async def _create_extended(self, pod: KubeObject, reqs: Sequence[DeviceRequest]) -> KubeObject:
        body = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {
                "generateName": f"{kobj.name(pod)[:200]}-extended-resources-",
                "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"},
                "finalizers": [DELETE_PROTECTION],
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": kobj.name(pod),
                        "uid": kobj.uid(pod),
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": r.request,
                            "exactly": {
                                "deviceClassName": r.device_class,
                                "allocationMode": "ExactCount",
                                "count": r.count,
                            },
                        }
                        for r in reqs
                    ]
                }
            },
        }
        return await self.kube.create(RESOURCE_CLAIMS, body, kobj.namespace(pod))

    async def _write_status(
        self,
        pod: KubeObject,
        node: str,
        claim: KubeObject,
        reqs: Sequence[DeviceRequest],
        picked: Mapping[tuple[str | None, str], Picked],
        inputs: DraInputs,
    ) -> KubeObject | None:
        """One status write: allocation (when not yet) and the pod in reservedFor, with the
        read resourceVersion (a concurrent change is read again, up to 3 times); the
        written claim, None when nothing needed writing."""
        for attempt in range(3):
            status = kobj.mapping(claim, "status")
            reserved = list(kobj.sequence(claim, "status", "reservedFor"))
            if status.get("allocation") is not None and any(
                r.get("uid") == kobj.uid(pod) for r in reserved
            ):
                return None
            new: dict[str, Any] = {"reservedFor": [*reserved, _pod_ref(pod)]}
            if status.get("allocation") is None:
                new["allocation"] = allocation_result(
                    node,
                    {r.request: picked[(r.claim, r.request)] for r in reqs},
                    class_config={
                        r.device_class: kobj.sequence(
                            inputs.classes.get(r.device_class), "spec", "config"
                        )
                        for r in reqs
                    },
                    claim_config=kobj.sequence(claim, "spec", "devices", "config"),
                    request_classes={r.request: r.device_class for r in reqs},
                    share_seed=kobj.uid(claim),
                )
            elif (other := allocated_node(claim)) not in (None, node):
                raise InvalidInput(
                    "spec.resourceClaims",
                    f"ResourceClaim {kobj.name(claim)!r} is allocated on node {other}",
                    kobj.describe(pod, "Pod"),
                )
            try:
                return await self._patch_status(claim, new)
            except KubeConflict:
                if attempt == 2:
                    raise
                claim = await self.kube.get(
                    RESOURCE_CLAIMS, kobj.name(claim), kobj.namespace(claim)
                )
        return None

    async def _name_extended(
        self, pod: KubeObject, claim: KubeObject, reqs: Sequence[DeviceRequest]
    ) -> None:
        want = {
            "resourceClaimName": kobj.name(claim),
            "requestMappings": [
                {"containerName": r.container, "resourceName": r.resource, "requestName": r.request}
                for r in reqs
            ],
        }
        if kobj.get(pod, "status", "extendedResourceClaimStatus") == want:
            return
        await self.kube.patch_pod_status(
            kobj.namespace(pod),
            kobj.name(pod),
            {"status": {"extendedResourceClaimStatus": want}},
            patch_type="merge",
        )
