"""Which gang a pod belongs to, how big the gang must be, and the order of its pods: the
first kind of :data:`bridge.workloads.REGISTRY` that claims the pod (its module table
says how each kind recognises its pods), which then answers the group's size and order.

``workloads`` maps a built-in PodGroup's name -> the name of the Workload whose PodGroups
make one gang (:func:`gang_workload` decides it from the two objects, which the caller
reads), ``composites`` to the gang CompositePodGroup that is its parent
(:func:`bridge.workloads.builtin.gang_composite`); a pod of any other built-in PodGroup
is that PodGroup's gang.

``owners`` maps uid -> owner object (Job, JobSet, StatefulSet, LWS, leader pod ...) for
whatever the caller could read; the controller chain is walked through it to the root.

A group's uid is never taken from a pod's ownerReference text (Kubernetes checks only that
it is not empty: a pod may name any uid, another namespace's included). An owner counts
only when ``owners`` holds an object of that uid, kind and name **in the pod's own
namespace**; otherwise the uid is left unknown and is read from the group's object (found
by kind, namespace and name), and :func:`check_source` refuses a pod whose ownerReference
disagrees with that object.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bridge.errors import InvalidInput
from bridge.translate import kobj
from bridge.translate.settings import TranslateSettings
from bridge.workloads import REGISTRY, Claim, GroupRef, ObjectRef, Owners, kind_named, owner_chain
from bridge.workloads.builtin import (
    gang_workload,
    podgroup_name,
    workload_podgroups,
    workload_ref,
)

__all__ = [
    "GroupRef",
    "ObjectRef",
    "Owners",
    "check_source",
    "expected_size",
    "gang_workload",
    "group_of",
    "is_complete",
    "missing_source",
    "order_pods",
    "owner_chain",
    "podgroup_name",
    "workload_podgroups",
    "workload_ref",
]


def group_of(
    pod: Mapping[str, Any],
    owners: Owners,
    settings: TranslateSettings | None = None,
    workloads: Mapping[str, str] | None = None,
    composites: Mapping[str, str] | None = None,
) -> GroupRef:
    """The group a pod belongs to: the first kind of the registry that claims it."""
    c = Claim(
        pod=pod,
        namespace=kobj.namespace(pod),
        labels=kobj.labels(pod),
        chain=owner_chain(pod, owners),
        owners=owners,
        settings=settings or TranslateSettings(),
        workloads=workloads or {},
        composites=composites or {},
    )
    for kind in REGISTRY:
        if (ref := kind.claim(c)) is not None:
            return ref
    raise AssertionError("the registry's last kind claims every pod")


def check_source(
    ref: GroupRef, source_object: Mapping[str, Any] | None, pods: Sequence[Mapping[str, Any]]
) -> None:
    """Refuse pods whose ownerReference names the group's object (``ref.source``, by kind
    and name) when that object does not exist in their namespace, or has another uid: the
    reference is the pod's own text, and Kubernetes checks only that its uid is not empty.
    Raises InvalidInput naming the pod and the field."""
    src = ref.source
    if src is None:
        return
    real_uid = kobj.uid(source_object) if source_object is not None else ""
    for pod in pods:
        for i, oref in enumerate(kobj.sequence(pod, "metadata", "ownerReferences")):
            if kobj.text(oref, "kind") != src.kind or kobj.text(oref, "name") != src.name:
                continue
            where = f"{src.kind} {src.namespace}/{src.name}"
            if source_object is None:
                raise InvalidInput(
                    f"metadata.ownerReferences[{i}]",
                    f"names {where}, which does not exist in namespace {src.namespace}",
                    kobj.describe(pod, "Pod"),
                )
            if kobj.text(oref, "uid") != real_uid:
                raise InvalidInput(
                    f"metadata.ownerReferences[{i}].uid",
                    f"{kobj.text(oref, 'uid')[:64]!r} is not the uid of {where}",
                    kobj.describe(pod, "Pod"),
                )


def missing_source(
    ref: GroupRef, pods: Sequence[Mapping[str, Any]], parent: tuple[str, str, str] | None = None
) -> str:
    """Why a group whose object does not exist waits, naming the field that names it;
    ``parent``: the (kind, name, field naming it) of the Workload or CompositePodGroup a
    built-in PodGroup names, which does not exist (yet)."""
    src = ref.source
    if src is None:
        return ""
    if parent is not None:
        kind, name, field = parent
        return (
            f"waiting for {kind} {src.namespace}/{name} ({field} of PodGroup "
            f"{src.namespace}/{src.name}): it does not exist"
        )
    field = kind_named(ref.kind).source_field
    return (
        f"waiting for {src.kind} {src.namespace}/{src.name} ({field} of "
        f"{len(pods)} pod{'s' if len(pods) != 1 else ''}): it does not exist"
    )


def expected_size(
    ref: GroupRef,
    group_object: Mapping[str, Any] | None,
    pods: Sequence[Mapping[str, Any]],
    pod_groups: Sequence[Mapping[str, Any]] = (),
) -> int | None:
    """How many pods the group needs before it can be submitted; None = not known yet
    (the group object has not been read or does not exist). ``pod_groups``: the built-in
    PodGroups of the group's namespace, read for a Workload gang only."""
    return kind_named(ref.kind).size(ref, group_object, pods, pod_groups)


def is_complete(
    ref: GroupRef,
    group_object: Mapping[str, Any] | None,
    pods: Sequence[Mapping[str, Any]],
    pod_groups: Sequence[Mapping[str, Any]] = (),
) -> bool:
    size = expected_size(ref, group_object, pods, pod_groups)
    return size is not None and len(pods) >= size


def order_pods(
    ref: GroupRef,
    group_object: Mapping[str, Any] | None,
    pods: Sequence[Mapping[str, Any]],
    pod_groups: Sequence[Mapping[str, Any]] = (),
) -> list[Mapping[str, Any]]:
    """Pods in a deterministic order: LWS leader first then worker index; Job by
    completion index; JobSet by replicated job (spec order), job index, completion
    index; a Workload by its PodGroups (:func:`workload_podgroups`), then by name;
    otherwise by name. Ties break on the pod name."""
    return kind_named(ref.kind).order(ref, group_object, pods, pod_groups)
