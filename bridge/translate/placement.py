"""Node constraints Slurm cannot see, turned into ``excluded_nodes``.

Slurm knows nothing of node labels, taints or affinity, so every Kubernetes node a pod
could NOT run on is excluded by its Slurm name. The bridge never sends
``required_nodes``: a required list is unsatisfiable as soon as it is longer than the
job's node count, and a deleted node in it kills the job after a slurmctld restart.

A node is excluded when ANY pod of the group cannot run on it (so every node Slurm
allocates fits every pod, and the binder may put any pod on any allocated node):

* ``spec.unschedulable`` (cordoned);
* a ``NoSchedule``/``NoExecute`` taint the pod does not tolerate (the bridge's own
  ``slinky.slurm.net/managed-node`` taint is tolerated: the bridge adds that toleration
  to every pod it schedules);
* ``spec.nodeSelector`` labels missing or different;
* required node affinity (``nodeSelectorTerms`` OR-ed; ``matchExpressions`` In, NotIn,
  Exists, DoesNotExist, Gt, Lt and ``matchFields`` on ``metadata.name``, AND-ed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from bridge import fastjson
from bridge.bounded import BoundedMap
from bridge.errors import InvalidInput
from bridge.translate import kobj
from bridge.translate.topology import TopologyPolicy, node_topology
from bridge.wellknown import LABEL_SLURM_NODENAME, MANAGED_NODE_TAINT

_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
# Distinct placements (nodeSelector, affinity, tolerations: tenant text) memoized at most:
# a site's pods share a handful, and each entry holds up to one node name per node (an
# entry over 2,000 nodes was ~12 KB; 4,000 made-up placements used to keep 50 MB).
PLACEMENT_MEMO_MAX = 256
# node requirements of one pod (nodeSelector, matchExpressions, matchFields: tenant text),
# each tested against every node: more is refused (a handful is usual)
PLACEMENT_REQUIREMENTS_MAX = 64


def slurm_node_name(node: kobj.Obj) -> str:
    """The Slurm name of a Kubernetes node: its slurm-nodename label, else its own name."""
    return kobj.labels(node).get(LABEL_SLURM_NODENAME) or kobj.name(node)


def tolerates(tolerations: Sequence[Any], taint: Mapping[str, Any]) -> bool:
    """Kubernetes' rule: some toleration matches the taint's key, value and effect."""
    for t in tolerations:
        effect = kobj.text(t, "effect")
        if effect and effect != kobj.text(taint, "effect"):
            continue
        key = kobj.text(t, "key")
        operator = kobj.text(t, "operator") or "Equal"
        if operator == "Exists":
            if not key or key == kobj.text(taint, "key"):
                return True
        elif (
            operator == "Equal"
            and key
            and key == kobj.text(taint, "key")
            and kobj.text(t, "value") == kobj.text(taint, "value")
        ):
            return True
    return False


class _Requirement:
    """A node selector requirement, read once (its values a set) and tested per node."""

    __slots__ = ("bound", "key", "op", "values")

    def __init__(self, req: Any) -> None:
        self.key = kobj.text(req, "key")
        self.op = kobj.text(req, "operator")
        values = [v for v in kobj.sequence(req, "values") if isinstance(v, str)]
        self.values = frozenset(values)
        self.bound: int | None = None
        if self.op in ("Gt", "Lt") and len(values) == 1:
            try:
                self.bound = int(values[0])
            except ValueError:
                self.bound = None

    def matches(self, value: str | None) -> bool:
        op = self.op
        if op == "In":
            return value is not None and value in self.values
        if op == "NotIn":
            return value is None or value not in self.values
        if op == "Exists":
            return value is not None
        if op == "DoesNotExist":
            return value is None
        if self.bound is not None and value is not None:
            try:
                have = int(value)
            except ValueError:
                return False
            return have > self.bound if op == "Gt" else have < self.bound
        return False


class _Term:
    """A nodeSelectorTerm: all its requirements on the node's labels and name."""

    __slots__ = ("expressions", "fields")

    def __init__(self, term: Any) -> None:
        self.expressions = tuple(_Requirement(r) for r in kobj.sequence(term, "matchExpressions"))
        self.fields = tuple(_Requirement(r) for r in kobj.sequence(term, "matchFields"))

    def __len__(self) -> int:
        return len(self.expressions) + len(self.fields)

    def matches(self, node: kobj.Obj) -> bool:
        if not self.expressions and not self.fields:
            return False  # an empty term matches no node (Kubernetes' rule)
        labels = kobj.labels(node)
        for req in self.expressions:
            if not req.matches(labels.get(req.key)):
                return False
        for req in self.fields:
            name = kobj.name(node) if req.key == "metadata.name" else None
            if not req.matches(name):
                return False
        return True


class _Tolerations:
    """A pod's tolerations indexed by what they match, so that testing a taint costs the
    same however many a pod lists (:func:`tolerates`' rule)."""

    __slots__ = ("any_key", "equal", "exists")

    def __init__(self, tolerations: Sequence[Any]) -> None:
        self.any_key: set[str] = set()  # Exists without a key: its effect ("" = any)
        self.exists: set[tuple[str, str]] = set()  # (key, effect)
        self.equal: set[tuple[str, str, str]] = set()  # (key, value, effect)
        for t in tolerations:
            effect = kobj.text(t, "effect")
            key = kobj.text(t, "key")
            operator = kobj.text(t, "operator") or "Equal"
            if operator == "Exists":
                if key:
                    self.exists.add((key, effect))
                else:
                    self.any_key.add(effect)
            elif operator == "Equal" and key:
                self.equal.add((key, kobj.text(t, "value"), effect))

    def tolerate(self, taint: Mapping[str, Any]) -> bool:
        key, effect = kobj.text(taint, "key"), kobj.text(taint, "effect")
        value = kobj.text(taint, "value")
        return bool(
            self.any_key & {"", effect}
            or (key, "") in self.exists
            or (key, effect) in self.exists
            or (key, value, "") in self.equal
            or (key, value, effect) in self.equal
        )


def pod_fits_node(pod: kobj.Obj, node: kobj.Obj) -> bool:
    """Could Kubernetes put ``pod`` on ``node``, as far as labels, taints and cordon go?"""
    return _PodPlacement.of(pod).fits(node)


class _PodPlacement:
    """The placement fields of one pod, read once and tested against many nodes: at most
    :data:`PLACEMENT_REQUIREMENTS_MAX` node requirements (each tested against every node),
    values and tolerations indexed (their number costs nothing per node)."""

    __slots__ = ("node_selector", "required_terms", "tolerations")

    def __init__(
        self,
        tolerations: Sequence[Any],
        node_selector: Mapping[str, str],
        required_terms: Sequence[Any] | None,
    ) -> None:
        self.tolerations = _Tolerations(tolerations)
        self.node_selector = node_selector
        self.required_terms = (
            None if required_terms is None else tuple(_Term(t) for t in required_terms)
        )

    @classmethod
    def of(cls, pod: kobj.Obj) -> _PodPlacement:
        """Raises InvalidInput for more than :data:`PLACEMENT_REQUIREMENTS_MAX` node
        requirements."""
        required = kobj.get(
            pod,
            "spec",
            "affinity",
            "nodeAffinity",
            "requiredDuringSchedulingIgnoredDuringExecution",
        )
        terms = (
            kobj.sequence(required, "nodeSelectorTerms") if isinstance(required, Mapping) else None
        )
        node_selector = kobj.string_map(pod, "spec", "nodeSelector")
        count = len(node_selector) + sum(
            len(kobj.sequence(t, "matchExpressions")) + len(kobj.sequence(t, "matchFields"))
            for t in terms or ()
        )
        if count > PLACEMENT_REQUIREMENTS_MAX:
            raise InvalidInput(
                "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
                f"{count} node requirements (spec.nodeSelector and every nodeSelectorTerm's "
                f"matchExpressions and matchFields together): the bridge tests at most "
                f"{PLACEMENT_REQUIREMENTS_MAX} against every node",
                kobj.describe(pod, "Pod"),
            )
        return cls(kobj.sequence(pod, "spec", "tolerations"), node_selector, terms)

    def fits(self, node: kobj.Obj) -> bool:
        if kobj.get(node, "spec", "unschedulable") is True:
            return False
        for taint in kobj.sequence(node, "spec", "taints"):
            if kobj.text(taint, "key") == MANAGED_NODE_TAINT:
                continue
            if kobj.text(taint, "effect") in _BLOCKING_EFFECTS and not self.tolerations.tolerate(
                taint
            ):
                return False
        if self.node_selector:
            labels = kobj.labels(node)
            for key, value in self.node_selector.items():
                if labels.get(key) != value:
                    return False
        return self.required_terms is None or any(t.matches(node) for t in self.required_terms)


def placement_key(pod: kobj.Obj) -> str:
    """What :func:`pod_fits_node` reads of a pod, as a comparable key."""
    spec = kobj.get(pod, "spec")
    if not isinstance(spec, Mapping):
        return ""
    fields = {k: spec.get(k) for k in ("tolerations", "nodeSelector", "affinity")}
    return fastjson.canonical(fields)


def _distinct(pods: Sequence[kobj.Obj]) -> dict[str, _PodPlacement]:
    """Pods of one workload share their placement fields: each distinct set, by key."""
    return {k: _PodPlacement.of(p) for k, p in {placement_key(p): p for p in pods}.items()}


_Exclusion = tuple[int, int, tuple[str, ...]]


def _exclude(distinct: Iterable[_PodPlacement], nodes: Iterable[kobj.Obj]) -> _Exclusion:
    """(nodes known, nodes excluded, sorted Slurm names of the excluded)."""
    fits = list(distinct)
    known = excluded = 0
    out: set[str] = set()
    for node in nodes:
        known += 1
        if not all(p.fits(node) for p in fits):
            excluded += 1
            out.add(slurm_node_name(node))
    return known, excluded, tuple(sorted(out))


def _checked(known: int, excluded: int, names: tuple[str, ...], obj: str) -> tuple[str, ...]:
    if known and excluded == known:
        raise InvalidInput(
            "spec.nodeSelector/affinity/tolerations",
            f"no node fits: all {known} nodes are cordoned, carry a taint the pods do not "
            "tolerate, or miss a required label",
            obj,
        )
    return names


def excluded_nodes(
    pods: Sequence[kobj.Obj], nodes: Iterable[kobj.Obj], *, obj: str
) -> tuple[str, ...]:
    """Slurm names of the nodes some pod of the group cannot use, sorted.

    Raises InvalidInput when nodes are known and every one of them is excluded: such a
    group could never run, and Slurm would only say so in a less helpful way.
    """
    # A 256-pod gang costs one pod's checks per node, not 256.
    return _checked(*_exclude(_distinct(pods).values(), nodes), obj)


def _node_fingerprint(node: kobj.Obj) -> str:
    """What :meth:`_PodPlacement.fits` and :func:`slurm_node_name` read of a node."""
    spec = kobj.get(node, "spec")
    fields = {
        "labels": kobj.labels(node),
        "name": kobj.name(node),
        "taints": spec.get("taints") if isinstance(spec, Mapping) else None,
        "unschedulable": spec.get("unschedulable") if isinstance(spec, Mapping) else None,
    }
    return fastjson.canonical(fields)


class NodeSet:
    """The Kubernetes nodes, by name, with :func:`excluded_nodes` memoized per distinct
    pod placement: a site's pods share a handful of placements, so a group costs one
    dictionary lookup, not a pass over thousands of nodes. The memo is dropped only when a
    node comes, goes, or changes what placement reads (labels, taints, cordon), not on
    status updates, and holds at most :data:`PLACEMENT_MEMO_MAX` placements (least
    recently used dropped first: a placement is tenant text)."""

    def __init__(self, nodes: Iterable[kobj.Obj] = ()) -> None:
        self._nodes: dict[str, kobj.Obj] = {}
        self._prints: dict[str, str] = {}
        self._memo: BoundedMap[tuple[str, ...], _Exclusion] = BoundedMap(
            "placement-memo", PLACEMENT_MEMO_MAX
        )
        self._to_kube: dict[str, str] | None = None
        for node in nodes:
            self.put(node)

    def put(self, node: kobj.Obj) -> None:
        name = kobj.name(node)
        self._nodes[name] = node
        fp = _node_fingerprint(node)
        if self._prints.get(name) != fp:
            self._prints[name] = fp
            self._changed()

    def remove(self, name: str) -> None:
        if self._nodes.pop(name, None) is not None:
            self._prints.pop(name, None)
            self._changed()

    def _changed(self) -> None:
        self._memo.clear()
        self._to_kube = None

    def __len__(self) -> int:
        return len(self._nodes)

    def values(self) -> Iterable[kobj.Obj]:
        return self._nodes.values()

    def to_kube(self) -> dict[str, str]:
        """Slurm node name -> Kubernetes node name (kept until a node changes)."""
        if self._to_kube is None:
            self._to_kube = {slurm_node_name(n): name for name, n in self._nodes.items()}
        return self._to_kube

    def topology_of(self, slurm_nodes: Iterable[str], policy: TopologyPolicy) -> dict[str, str]:
        """Slurm node -> its Topology= (:func:`~bridge.translate.topology.node_topology`)
        for those of ``slurm_nodes`` that name one (a bad value: none; the controller
        reports it on the node)."""
        to_kube = self.to_kube()
        out: dict[str, str] = {}
        for s in slurm_nodes:
            node = self._nodes.get(to_kube.get(s, s))
            if node is None:
                continue
            try:
                unit = node_topology(node, policy)
            except InvalidInput:
                continue
            if unit:
                out[s] = unit
        return out

    def memo_size(self) -> int:
        """How many placements are memoized (at most :data:`PLACEMENT_MEMO_MAX`)."""
        return len(self._memo)

    def excluded(self, pods: Sequence[kobj.Obj], *, obj: str) -> tuple[str, ...]:
        """:func:`excluded_nodes` of ``pods`` over these nodes."""
        # keyed by the placement fields alone: their parsed form (tolerations, affinity)
        # is built only on a miss, not for every group (~40% of this call on a hit)
        by_key = {placement_key(p): p for p in pods}
        key = tuple(sorted(by_key))
        hit = self._memo.get(key)
        if hit is None:
            distinct = (_PodPlacement.of(p) for p in by_key.values())
            hit = self._memo[key] = _exclude(distinct, self._nodes.values())
        return _checked(*hit, obj)
