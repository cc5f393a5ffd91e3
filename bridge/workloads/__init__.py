"""The workload kinds: one module per kind of workload group (a plain pod, a
scheduler-plugins PodGroup, the built-in PodGroup and Workload, a LeaderWorkerSet, a
JobSet, a batch Job), each a :class:`~bridge.workloads.base.WorkloadKind`: which pods it
claims, its size, its pod order, its parts (a hetjob's components), its Slurm job name's
field, its API, the pod templates admission checks and the related objects it reads.

:data:`REGISTRY` holds them in claim order (the first that claims a pod wins); every
table of kinds elsewhere (translation, the scheduler's owner reads, admission's rules and
metrics, the chart's RBAC and webhook rules, checked by a test) derives from it. The kind
modules are independent of each other (an import-linter contract); what several share is
in :mod:`~bridge.workloads.base` and :mod:`~bridge.workloads.builtin`. Pure: no I/O.
"""

from bridge.workloads.base import (
    POD_KIND,
    Api,
    Claim,
    Deadline,
    GroupRef,
    ObjectRef,
    Owners,
    Related,
    RelatedObjects,
    WorkloadKind,
    owner_chain,
    owner_of,
)
from bridge.workloads.registry import (
    POD,
    REGISTRY,
    discovered_apis,
    kind_named,
    kind_names,
    kind_of_object,
    kinds,
    object_apis,
    related_apis,
    related_objects,
    with_object,
)

__all__ = [
    "POD",
    "POD_KIND",
    "REGISTRY",
    "Api",
    "Claim",
    "Deadline",
    "GroupRef",
    "ObjectRef",
    "Owners",
    "Related",
    "RelatedObjects",
    "WorkloadKind",
    "discovered_apis",
    "kind_named",
    "kind_names",
    "kind_of_object",
    "kinds",
    "object_apis",
    "owner_chain",
    "owner_of",
    "related_apis",
    "related_objects",
    "with_object",
]
