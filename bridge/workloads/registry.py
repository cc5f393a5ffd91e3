"""The workload kinds, in the order they are asked to claim a pod (the first that claims
it wins; :mod:`~bridge.workloads.pod` claims every pod, so it is last). Adding a kind is
one module and one line here (and its API in the chart's RBAC and webhook rules:
docs/workload-kinds.md).

=================  ==================================================  =====================
kind               how a pod is recognised                             group name
=================  ==================================================  =====================
PodGroup           label ``scheduling.x-k8s.io/pod-group``             the PodGroup's name
CompositePodGroup  ``spec.schedulingGroup.podGroupName`` names a       the composite's name
                   built-in PodGroup whose parent is a gang
                   CompositePodGroup (``composites`` maps it; 1.37)
Workload           ``spec.schedulingGroup.podGroupName`` names a       the Workload's name
                   built-in PodGroup made from a Workload of several
                   podGroupTemplates (``workloads`` maps it)
WorkloadPodGroup   ``spec.schedulingGroup.podGroupName``               the PodGroup's name
LeaderWorkerSet    labels ``leaderworkerset.sigs.k8s.io/name`` +       ``<lws>-<groupIndex>``
                   ``group-index``
JobSet             label ``jobset.sigs.k8s.io/jobset-name``            ``<jobset>`` or
                                                                       ``<jobset>-<rjob>``
Job                controller owner is a batch/v1 Job with             the Job's name
                   parallelism > 1 (or Indexed, when the Job is
                   not known) and ``scheduler.gangBatchJobs``
Pod                anything else (one Slurm job per pod)               the pod's name
=================  ==================================================  =====================
"""

from __future__ import annotations

from collections.abc import Iterable

from bridge.workloads import (
    composite,
    coscheduling,
    job,
    jobset,
    lws,
    pod,
    podgroup,
    workload,
)
from bridge.workloads.base import (
    Api,
    Obj,
    Related,
    RelatedObjects,
    WithObject,
    WorkloadKind,
    api_group,
)

REGISTRY: tuple[WorkloadKind, ...] = (
    coscheduling.KIND,
    composite.KIND,
    workload.KIND,
    podgroup.KIND,
    lws.KIND,
    jobset.KIND,
    job.KIND,
    pod.KIND,
)

POD: WorkloadKind = pod.KIND


def kinds() -> tuple[WorkloadKind, ...]:
    """:data:`REGISTRY`, read when asked (every table of kinds is derived on use, so a
    kind added to the registry, e.g. by a test, is known everywhere at once)."""
    return REGISTRY


def kind_named(name: str) -> WorkloadKind:
    """The kind of a group (``GroupRef.kind``, ``GroupId.kind``); KeyError when none."""
    for k in REGISTRY:
        if k.name == name:
            return k
    raise KeyError(name)


def kind_names() -> frozenset[str]:
    """The names of the kinds (``GroupId.kind``)."""
    return frozenset(k.name for k in REGISTRY)


def kind_of_object(api_version: str, kind: str) -> WorkloadKind | None:
    """The kind whose object is of that apiVersion (its group) and kind: a group's
    source, an ownerReference, an AdmissionRequest's kind."""
    group = api_group(api_version)
    return next((k for k in REGISTRY if k.api.matches(group, kind)), None)


def object_apis() -> tuple[Api, ...]:
    """The APIs of the objects groups come from (every kind's but a plain pod's), and the
    related objects they read: what the bridge reads (the scheduler watches them), and
    admission validates."""
    found: list[Api] = []
    for k in REGISTRY:
        for api in (k.api, *k.related):
            if api is not POD.api and api not in found:
                found.append(api)
    return tuple(found)


def related_objects(objects: Iterable[Obj] = ()) -> RelatedObjects:
    """``objects`` as the kinds read them (:class:`~bridge.workloads.base.Related`), each
    under its kind's API: a fixed set, for tools and tests."""
    return RelatedObjects(objects, object_apis())


def related_apis() -> tuple[Api, ...]:
    """The APIs of the related objects the kinds read (a Workload's PodGroups, a
    PodGroup's parent)."""
    found: list[Api] = []
    for k in REGISTRY:
        found += [api for api in k.related if api not in found]
    return tuple(found)


def discovered_apis() -> tuple[Api, ...]:
    """The APIs whose version is the newest the server serves (discovery)."""
    return tuple(a for a in object_apis() if a.discovered)


def with_object(related: Related | None, obj: Obj | None) -> Related:
    """``related`` (None: nothing held) and the group's own object ``obj`` (None: none),
    which a kind may look for among them (a Workload its PodGroups name)."""
    held = related if related is not None else related_objects()
    return held if obj is None else WithObject(held, obj)
