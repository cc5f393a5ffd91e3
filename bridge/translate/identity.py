"""The job <-> group back-link written into Slurm: ``admin_comment`` and ``comment``.

``admin_comment`` is compact JSON::

    {"group":{"kind":"PodGroup","namespace":"default","name":"pg-1","uid":"..."},
     "pods":["default/pg-1-a","default/pg-1-b"]}

``pods`` is upstream's key (upstream writes only ``{"pods": [...]}``), so jobs written by
upstream are still recognised: :func:`parse_admin_comment` returns their pods with a
``None`` group. Only users with admin rights can change ``admin_comment`` in Slurm.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from bridge.models import GroupId
from bridge.translate import kobj
from bridge.wellknown import LABEL_JOB_ID


def admin_comment(group: GroupId, pods: Sequence[str]) -> str:
    """The compact JSON back-link: group identity and the pods in group order."""
    body = {"group": group.model_dump(), "pods": list(pods)}
    return json.dumps(body, separators=(",", ":"))


def parse_admin_comment(text: Any) -> tuple[GroupId | None, tuple[str, ...]] | None:
    """``(group, pods)`` from an admin_comment, or None when it is not ours.

    Never raises: Slurm jobs not made by the bridge carry anything in this field.
    ``group`` is None for upstream's ``{"pods": [...]}`` form.
    """
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
    return group, tuple(pods)


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
