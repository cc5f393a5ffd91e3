"""Deterministic pod-to-node assignment once Slurm has allocated a job.

Pods come in group order (LWS leader first, completion index 0 first, ...: the order the
translation layer defines). Slurm's node list comes in Slurm's order (the expanded
hostlist). Exclusive groups get one pod per node; shared groups fill each node up to the
number of tasks Slurm placed there, in order. :func:`network_order` first brings the
nodes of one topology unit (block, leaf switch) together, so consecutive ranks (completion
indexes, LWS workers) share a block where Slurm placed several of them in one. A pod that
already carries the ``slinky.slurm.net/slurm-node`` annotation keeps it, so a restarted
scheduler finishes an interrupted assignment exactly as it began.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Assignment:
    pod: str  # "namespace/name"
    node: str  # Kubernetes node name


class AssignmentError(ValueError):
    """The allocation cannot host the pods (a bug or a changed job): never bind then."""


def assign(
    pods: Sequence[str],
    slurm_nodes: Sequence[str],
    *,
    to_kube: Mapping[str, str],
    tasks_per_node: Mapping[str, int] | None = None,
    already: Mapping[str, str] | None = None,
) -> list[Assignment]:
    """Assign ``pods`` (in group order) to the Kubernetes nodes behind ``slurm_nodes``.

    ``to_kube`` maps Slurm node names to Kubernetes node names (identity if missing).
    ``tasks_per_node`` is how many pods each Slurm node takes (1 each when None, i.e.
    exclusive). ``already`` maps pods to nodes chosen earlier; those are kept.
    """
    capacity: dict[str, int] = {}
    order: list[str] = []
    for s in slurm_nodes:
        k = to_kube.get(s, s)
        if k not in capacity:
            order.append(k)
            capacity[k] = 0
        capacity[k] += (tasks_per_node or {}).get(s, 1)
    kept = dict(already or {})
    for pod, node in kept.items():
        if pod in pods:
            if capacity.get(node, 0) <= 0:
                raise AssignmentError(f"pod {pod} was assigned {node}, not in the allocation")
            capacity[node] -= 1
    result: list[Assignment] = []
    slots = iter([n for n in order for _ in range(capacity[n])])
    for pod in pods:
        if pod in kept:
            result.append(Assignment(pod, kept[pod]))
            continue
        free = next(slots, None)
        if free is None:
            raise AssignmentError(
                f"allocation of {len(slurm_nodes)} node(s) has no room for pod {pod}"
            )
        result.append(Assignment(pod, free))
    return result


def tasks_per_node_even(slurm_nodes: Sequence[str], tasks: int) -> dict[str, int]:
    """Spread ``tasks`` over ``slurm_nodes`` as Slurm's default block distribution does
    when it reports no per-node task counts: as evenly as possible, first nodes first."""
    if not slurm_nodes:
        return {}
    base, extra = divmod(tasks, len(slurm_nodes))
    return {n: base + (1 if i < extra else 0) for i, n in enumerate(slurm_nodes)}


def network_order(slurm_nodes: Sequence[str], unit_of: Mapping[str, str]) -> list[str]:
    """Slurm's node order with the nodes of each topology unit (``unit_of``: Slurm node ->
    its Topology=, e.g. ``net:block-0``) brought together, units in the order of their
    first node; nodes without a unit keep their place. Slurm lists an allocation by node
    table index, which follows node names or registration order, not the network
    (dynamic external nodes join in any order); ``TopologyParam=BlockAsNodeRank`` does the
    same for Slurm's own ranks."""
    first: dict[str, int] = {}
    for i, n in enumerate(slurm_nodes):
        first.setdefault(unit_of.get(n) or f"\0{n}", i)
    return sorted(slurm_nodes, key=lambda n: first[unit_of.get(n) or f"\0{n}"])
