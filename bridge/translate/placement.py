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

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from bridge.errors import InvalidInput
from bridge.translate import kobj
from bridge.wellknown import LABEL_SLURM_NODENAME, MANAGED_NODE_TAINT

_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


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


def _requirement_matches(req: Any, value: str | None) -> bool:
    op = kobj.text(req, "operator")
    values = [v for v in kobj.sequence(req, "values") if isinstance(v, str)]
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and len(values) == 1:
        try:
            have, bound = int(value), int(values[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def _term_matches(term: Any, node: kobj.Obj) -> bool:
    expressions = kobj.sequence(term, "matchExpressions")
    fields = kobj.sequence(term, "matchFields")
    if not expressions and not fields:
        return False  # an empty term matches no node (Kubernetes' rule)
    labels = kobj.labels(node)
    for req in expressions:
        if not _requirement_matches(req, labels.get(kobj.text(req, "key"))):
            return False
    for req in fields:
        name = kobj.name(node) if kobj.text(req, "key") == "metadata.name" else None
        if not _requirement_matches(req, name):
            return False
    return True


def pod_fits_node(pod: kobj.Obj, node: kobj.Obj) -> bool:
    """Could Kubernetes put ``pod`` on ``node``, as far as labels, taints and cordon go?"""
    return _PodPlacement.of(pod).fits(node)


class _PodPlacement:
    """The placement fields of one pod, read once and tested against many nodes."""

    __slots__ = ("node_selector", "required_terms", "tolerations")

    def __init__(
        self,
        tolerations: Sequence[Any],
        node_selector: Mapping[str, str],
        required_terms: Sequence[Any] | None,
    ) -> None:
        self.tolerations = tolerations
        self.node_selector = node_selector
        self.required_terms = required_terms

    @classmethod
    def of(cls, pod: kobj.Obj) -> _PodPlacement:
        required = kobj.get(
            pod,
            "spec",
            "affinity",
            "nodeAffinity",
            "requiredDuringSchedulingIgnoredDuringExecution",
        )
        return cls(
            kobj.sequence(pod, "spec", "tolerations"),
            kobj.string_map(pod, "spec", "nodeSelector"),
            kobj.sequence(required, "nodeSelectorTerms") if isinstance(required, Mapping) else None,
        )

    def fits(self, node: kobj.Obj) -> bool:
        if kobj.get(node, "spec", "unschedulable") is True:
            return False
        for taint in kobj.sequence(node, "spec", "taints"):
            if kobj.text(taint, "key") == MANAGED_NODE_TAINT:
                continue
            if kobj.text(taint, "effect") in _BLOCKING_EFFECTS and not tolerates(
                self.tolerations, taint
            ):
                return False
        if self.node_selector:
            labels = kobj.labels(node)
            for key, value in self.node_selector.items():
                if labels.get(key) != value:
                    return False
        return self.required_terms is None or any(
            _term_matches(term, node) for term in self.required_terms
        )


def _placement_key(pod: kobj.Obj) -> str:
    """What :func:`pod_fits_node` reads of a pod, as a comparable key."""
    spec = kobj.get(pod, "spec")
    if not isinstance(spec, Mapping):
        return ""
    fields = {k: spec.get(k) for k in ("tolerations", "nodeSelector", "affinity")}
    return json.dumps(fields, sort_keys=True, default=str)


def excluded_nodes(
    pods: Sequence[kobj.Obj], nodes: Iterable[kobj.Obj], *, obj: str
) -> tuple[str, ...]:
    """Slurm names of the nodes some pod of the group cannot use, sorted.

    Raises InvalidInput when nodes are known and every one of them is excluded: such a
    group could never run, and Slurm would only say so in a less helpful way.
    """
    known = excluded = 0
    out: set[str] = set()
    # Pods of one workload share their placement fields: test each distinct set once
    # (a 256-pod gang costs one pod's checks per node, not 256).
    distinct = [_PodPlacement.of(p) for p in {_placement_key(p): p for p in pods}.values()]
    for node in nodes:
        known += 1
        if not all(p.fits(node) for p in distinct):
            excluded += 1
            out.add(slurm_node_name(node))
    if known and excluded == known:
        raise InvalidInput(
            "spec.nodeSelector/affinity/tolerations",
            f"no node fits: all {known} nodes are cordoned, carry a taint the pods do not "
            "tolerate, or miss a required label",
            obj,
        )
    return tuple(sorted(out))
