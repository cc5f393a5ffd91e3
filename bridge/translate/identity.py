"""The job <-> group back-link written into Slurm: ``admin_comment`` and ``comment``.

``admin_comment`` is compact JSON::

    {"group":{"kind":"PodGroup","namespace":"default","name":"pg-1","uid":"..."},
     "pods":["default/pg-1-a","default/pg-1-b"],"uids":["...","..."],"mcs":"kubernetes"}

``uids`` are the pods' own uids, in the order of ``pods``: Kubernetes assigns a pod's uid,
so a pod made later under a listed name (recreated, or forged) is not one the job names.

``pods`` is upstream's key (upstream writes only ``{"pods": [...]}``), so jobs written by
upstream are still recognised: :func:`parse_admin_comment` returns their pods with a
``None`` group. ``mcs`` is the cluster's ``mcsLabel`` (Slurm without an MCS plugin does
not keep the job's own ``mcs_label``, so the back-link carries it).

Only Slurm administrators (and SlurmUser, whose token the bridge holds) can set
``admin_comment``, so it is the proof that a job is the bridge's: a pod's job-id label is
only believed when the job's back-link names this cluster and that pod
(:func:`job_names_pod`). A label alone never is: anyone who can create a pod can write one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from bridge.models import GroupId
from bridge.translate import kobj
from bridge.wellknown import LABEL_JOB_ID
from bridge.workloads import kind_named, kind_names


def admin_comment(
    group: GroupId,
    pods: Sequence[str],
    mcs_label: str | None = None,
    uids: Sequence[str] | None = None,
) -> str:
    """The compact JSON back-link: group identity, the pods in group order (and their
    uids, in the same order), and the cluster's mcs label (when it has one)."""
    body: dict[str, Any] = {"group": group.model_dump(), "pods": list(pods)}
    if uids is not None:  # the caller's pods' uids: one per pod, in the same order
        body["uids"] = list(uids)
    if mcs_label:
        body["mcs"] = mcs_label
    return json.dumps(body, separators=(",", ":"))


@dataclass(frozen=True)
class BackLink:
    """What a job's admin_comment says: the group, its pods, the cluster's mcs label
    (None: not written, by upstream or an older bridge) and the pods' uids in the order
    of ``pods`` (None: not written, by upstream or an older bridge)."""

    group: GroupId | None
    pods: tuple[str, ...]
    mcs: str | None = None
    uids: tuple[str, ...] | None = None


def parse_admin_comment(text: Any) -> tuple[GroupId | None, tuple[str, ...]] | None:
    """``(group, pods)`` from an admin_comment, or None when it is not ours.

    Never raises: Slurm jobs not made by the bridge carry anything in this field.
    ``group`` is None for upstream's ``{"pods": [...]}`` form.
    """
    link = back_link(text)
    return None if link is None else (link.group, link.pods)


def back_link(text: Any) -> BackLink | None:
    """The :class:`BackLink` of an admin_comment, or None when it is not one (never raises)."""
    if not isinstance(text, str) or not text.startswith("{"):
        return None
    try:
        body = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(body, dict):
        return None
    pods = body.get("pods")
    if not isinstance(pods, list) or not all(isinstance(p, str) for p in pods):
        return None
    group: GroupId | None = None
    if "group" in body:
        try:
            group = GroupId.model_validate(body["group"])
        except ValidationError:
            return None
        if group.kind not in kind_names():
            return None
    mcs = body.get("mcs")
    if mcs is not None and not isinstance(mcs, str):
        return None
    uids = body.get("uids")
    if uids is not None and (
        not isinstance(uids, list)
        or len(uids) != len(pods)
        or not all(isinstance(u, str) for u in uids)
    ):
        return None
    return BackLink(group, tuple(pods), mcs, None if uids is None else tuple(uids))


def link_is_ours(link: BackLink, job_mcs_label: str, mcs_label: str | None) -> bool:
    """The back-link was written by a bridge of this cluster (``mcs_label``, from config).

    A link that names its mcs label must name ours; one that does not (upstream, older
    bridges) is ours unless the job's own ``mcs_label`` names another cluster.
    """
    ours = mcs_label or ""
    if link.mcs is not None:
        return link.mcs == ours
    return not (ours and job_mcs_label and job_mcs_label != ours)


def group_of_link(text: Any, mcs_label: str | None) -> GroupId | None:
    """The group a job's admin_comment says it is for, when the job may be ADOPTED by a
    group without a pod naming it (the start-up sweep, a lost submit answer): the back-link
    names this bridge's mcs label (exactly: an upstream or older link without one is never
    adopted) and a group with a uid. None otherwise (never a group whose uid is empty)."""
    link = back_link(text)
    if link is None or link.group is None or not link.group.uid:
        return None
    return link.group if link.mcs == (mcs_label or None) else None


def link_names_group(text: Any, group: GroupId, mcs_label: str | None) -> bool:
    """The job's admin_comment proves it is ``group``'s: this mcs label, and the same kind,
    namespace, name and (non-empty) uid."""
    return bool(group.uid) and group_of_link(text, mcs_label) == group


def job_names_pod(link: BackLink, pod: Mapping[str, Any]) -> bool:
    """The job's back-link names this very pod: its ``namespace/name`` is listed, it is in
    the group's namespace, and its uid is the one listed with that name. A pod made later
    under a listed name (it has another uid), or in another namespace, is not named.

    A link without pod uids (written by an older bridge) proves less, as the group's kind
    says (:data:`bridge.workloads.base.Identity`): a plain pod must be the group's object
    (its uid), a Job's pod must be controlled by the Job the link records (an
    ownerReference of that uid; none is not enough); the pod of another kind of group
    (PodGroup, LeaderWorkerSet, JobSet) is named by namespace and name. An
    upstream link (no group) names pods by ``namespace/name`` only."""
    key = kobj.pod_key(pod)
    if key not in link.pods:
        return False
    group = link.group
    if group is None:
        return True
    if group.namespace != kobj.namespace(pod):
        return False
    if link.uids is not None:
        uid = kobj.uid(pod)
        return any(k == key and u == uid for k, u in zip(link.pods, link.uids, strict=True))
    kind = kind_named(group.kind)
    if not group.uid:
        return kind.identity == "object"
    if kind.identity == "pod":
        return kobj.uid(pod) == group.uid
    if kind.identity == "controller":
        refs = kobj.get(pod, "metadata", "ownerReferences")
        return any(
            isinstance(ref, Mapping)
            and ref.get("controller") is True
            and ref.get("kind") == kind.api.kind
            and ref.get("uid") == group.uid
            for ref in (refs if isinstance(refs, list) else ())
        )
    return True


def human_comment(group: GroupId, pod_count: int) -> str:
    """Slurm's ``comment``: ``slurm-bridge: PodGroup default/pg-1, 2 pods``."""
    noun = "pod" if pod_count == 1 else "pods"
    return f"slurm-bridge: {group.kind} {group.namespace}/{group.name}, {pod_count} {noun}"


def pod_job_id(pod: kobj.Obj) -> int | None:
    """The Slurm job id a pod's job-id label names; None when absent or not a job id."""
    raw = kobj.get(pod, "metadata", "labels", LABEL_JOB_ID)
    return int(raw) if isinstance(raw, str) and raw.isdigit() and len(raw) < 19 else None


def pod_belongs(job_id: int, pod: kobj.Obj | None) -> bool:
    """The pod exists and is not labelled for ANOTHER job (unlabelled: not bound yet)."""
    if pod is None:
        return False
    labelled = pod_job_id(pod)
    return labelled is None or labelled == job_id


def names_any_pod(
    admin_comment_text: Any,
    job_mcs_label: str,
    pods: Sequence[Mapping[str, Any]],
    mcs_label: str | None,
) -> bool:
    """A job (its admin_comment and mcs_label) is this cluster's and names one of ``pods``."""
    link = back_link(admin_comment_text)
    return (
        link is not None
        and link_is_ours(link, job_mcs_label, mcs_label)
        and any(job_names_pod(link, p) for p in pods)
    )


def foreign_label_message(job_id: int) -> str:
    """The Warning said on a pod whose job-id label names a job that is not its own."""
    return (
        f"label {LABEL_JOB_ID}={job_id} ignored: Slurm job {job_id} is not this pod's "
        "(its admin_comment does not name this cluster and pod)"
    )
