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
    if kobj.get(node, "spec", "unschedulable") is True:
        return False
    tolerations = kobj.sequence(pod, "spec", "tolerations")
    for taint in kobj.sequence(node, "spec", "taints"):
        if kobj.text(taint, "key") == MANAGED_NODE_TAINT:
            continue
        if kobj.text(taint, "effect") in _BLOCKING_EFFECTS and not tolerates(tolerations, taint):
            return False
    labels = kobj.labels(node)
    for key, value in kobj.string_map(pod, "spec", "nodeSelector").items():
        if labels.get(key) != value:
            return False
    required = kobj.get(
        pod, "spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if isinstance(required, Mapping):
        terms = kobj.sequence(required, "nodeSelectorTerms")
        if not any(_term_matches(term, node) for term in terms):
            return False
    return True


def excluded_nodes(
    pods: Sequence[kobj.Obj], nodes: Iterable[kobj.Obj], *, obj: str
) -> tuple[str, ...]:
    """Slurm names of the nodes some pod of the group cannot use, sorted.

    Raises InvalidInput when nodes are known and every one of them is excluded: such a
    group could never run, and Slurm would only say so in a less helpful way.
    """
    known = excluded = 0
    out: set[str] = set()
    for node in nodes:
        known += 1
        if not all(pod_fits_node(pod, node) for pod in pods):
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
