"""A gang's shapes and its components (docs/hetjob.md). Pure.

A pod's *shape* is what Slurm must reserve for it: whole CPUs, MiB of memory, GRES by
Slurm name (typed or not: ``gpu``, ``gpu:a100``, after DRA translation), and where it may
run (its nodeSelector, affinity and tolerations, which become the component's
``excluded_nodes``). The topology request is the gang's (every pod carries the same
slurmjob annotations), so it is not part of a shape.

A gang of one shape is one plain Slurm job. A gang of several becomes one heterogeneous
job, one component per group of members, in this order of precedence:

1. the workload's own parts (:meth:`bridge.workloads.WorkloadKind.part`): a JobSet's
   replicatedJobs, an LWS group's leader and its workers, a built-in Workload's PodGroups;
2. otherwise the members grouped by identical shape (PodGroup, Job, built-in PodGroup).

Components come in rank order (the order of their first member) and keep their members
in rank order. A component whose members differ (edited pods of one template) is sized
by its largest member, as a plain gang is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bridge.translate.placement import placement_key
from bridge.translate.resources import PodResources
from bridge.workloads import GroupRef, kind_named


@dataclass(frozen=True)
class Shape:
    """What Slurm reserves for one pod (comparable: equal shapes share a component)."""

    cpus: int
    memory_mib: int
    gres: tuple[tuple[str, int], ...]  # sorted (name, count), counts > 0
    placement: str  # the pod's node-selection fields, as a comparable key

    @classmethod
    def of(cls, pod: Mapping[str, Any], need: PodResources) -> Shape:
        gres = tuple(sorted((k, n) for k, n in need.gres.items() if n > 0))
        return cls(need.cpus, need.memory_mib, gres, placement_key(pod))


def _by_key(keys: Sequence[object]) -> list[list[int]]:
    """Indices grouped by key, groups in the order of their first index."""
    groups: dict[object, list[int]] = {}
    for i, k in enumerate(keys):
        groups.setdefault(k, []).append(i)
    return list(groups.values())


def components(
    ref: GroupRef, pods: Sequence[Mapping[str, Any]], shapes: Sequence[Shape]
) -> list[list[int]]:
    """The gang's components as lists of indices into ``pods`` (in rank order, as
    :func:`bridge.translate.grouping.order_pods` gives them); one component when every
    member has the same shape."""
    if len(set(shapes)) <= 1:
        return [list(range(len(pods)))]
    kind = kind_named(ref.kind)
    parts = [kind.part(ref, p) for p in pods]
    if all(p is not None for p in parts):
        by_part = _by_key(parts)
        if len(by_part) > 1:
            return by_part
    return _by_key(shapes)
