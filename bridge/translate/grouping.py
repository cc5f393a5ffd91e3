"""Which gang a pod belongs to, how big the gang must be, and the order of its pods: the
first kind of :data:`bridge.workloads.REGISTRY` that claims the pod (its module table
says how each kind recognises its pods), which then answers the group's size and order.

``related`` holds the objects the kinds read besides the pods
(:class:`~bridge.workloads.Related`: a built-in PodGroup and the Workload or
CompositePodGroup it names, a Workload's PodGroups), as the caller keeps them in memory:
nothing here reads the API.

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
from bridge.workloads import (
    Claim,
    GroupRef,
    ObjectRef,
    Owners,
    Related,
    kind_named,
    kinds,
    owner_chain,
    related_objects,
)

__all__ = [
    "GroupRef",
    "ObjectRef",
    "Owners",
    "check_source",
    "expected_size",
    "group_of",
    "is_complete",
    "missing_source",
    "order_pods",
    "owner_chain",
]


def group_of(
    pod: Mapping[str, Any],
    owners: Owners,
    settings: TranslateSettings | None = None,
    related: Related | None = None,
) -> GroupRef:
    """The group a pod belongs to: the first kind of the registry that claims it."""
    c = Claim(
        pod=pod,
        namespace=kobj.namespace(pod),
        labels=kobj.labels(pod),
        chain=owner_chain(pod, owners),
        owners=owners,
        settings=settings or TranslateSettings(),
        related=related if related is not None else related_objects(),
    )
    for kind in kinds():
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


def missing_source(ref: GroupRef, pods: Sequence[Mapping[str, Any]]) -> str:
    """Why a group whose object does not exist waits, naming the field that names it."""
    src = ref.source
    if src is None:
        return ""
    field = kind_named(ref.kind).source_field
    return (
        f"waiting for {src.kind} {src.namespace}/{src.name} ({field} of "
        f"{len(pods)} pod{'s' if len(pods) != 1 else ''}): it does not exist"
    )


def expected_size(
    ref: GroupRef,
    group_object: Mapping[str, Any] | None,
    pods: Sequence[Mapping[str, Any]],
    related: Related | None = None,
) -> int | None:
    """How many pods the group needs before it can be submitted; None = not known yet
    (the group object has not been read or does not exist). ``related``: the objects its
    kind reads besides (a Workload gang's PodGroups)."""
    held = related if related is not None else related_objects()
    return kind_named(ref.kind).size(ref, group_object, pods, held)


def is_complete(
    ref: GroupRef,
    group_object: Mapping[str, Any] | None,
    pods: Sequence[Mapping[str, Any]],
    related: Related | None = None,
) -> bool:
    size = expected_size(ref, group_object, pods, related)
    return size is not None and len(pods) >= size


def order_pods(
    ref: GroupRef,
    group_object: Mapping[str, Any] | None,
    pods: Sequence[Mapping[str, Any]],
    related: Related | None = None,
) -> list[Mapping[str, Any]]:
    """Pods in a deterministic order, as the group's kind orders them (a Job's by
    completion index, a Workload's by its PodGroups ...); ties break on the pod name."""
    held = related if related is not None else related_objects()
    return kind_named(ref.kind).order(ref, group_object, pods, held)
