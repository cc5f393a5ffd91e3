"""Nodes reconciler (both ways).

* a cordoned Kubernetes node -> its Slurm node (label ``slinky.slurm.net/slurm-nodename``
  or the same name) DRAIN with reason ``slurm-bridge: cordoned in Kubernetes``;
* uncordon -> RESUME, but only drains whose reason starts with ``slurm-bridge: `` (an
  admin's own drain is never undone);
* a Slurm node DOWN/DRAIN/FAIL not set by us -> taint
  ``slinky.slurm.net/slurm-node-unavailable:NoSchedule`` (value: Slurm's reason, made a
  valid label value), removed when Slurm resumes the node.
"""

from __future__ import annotations

import re

from bridge.slurm.models import SlurmNode
from bridge.wellknown import LABEL_SLURM_NODENAME, SLURM_REASON_PREFIX, TAINT_SLURM_NODE_UNAVAILABLE
from controller.model import (
    Action,
    DrainSlurmNode,
    KubeObject,
    ResumeSlurmNode,
    TaintNode,
    UntaintNode,
    meta,
)

CORDON_REASON = SLURM_REASON_PREFIX + "cordoned in Kubernetes"
_INVALID = re.compile(r"[^A-Za-z0-9._-]+")


def slurm_name(node: KubeObject) -> str:
    labels = meta(node).get("labels") or {}
    return str(labels.get(LABEL_SLURM_NODENAME) or meta(node).get("name") or "")


def taint_value(reason: str) -> str:
    """A label-valid value (<= 63 chars, alphanumeric at both ends) from Slurm's reason."""
    value = _INVALID.sub("_", reason)[:63].strip("._-")
    return value or "unavailable"


def current_taint(node: KubeObject) -> str | None:
    for t in (node.get("spec") or {}).get("taints") or []:
        if t.get("key") == TAINT_SLURM_NODE_UNAVAILABLE:
            return str(t.get("value") or "")
    return None


def plan(node: KubeObject, slurm: SlurmNode | None) -> list[Action]:
    if slurm is None:
        return []
    name = str(meta(node).get("name") or "")
    cordoned = bool((node.get("spec") or {}).get("unschedulable"))
    by_us = slurm.reason.startswith(SLURM_REASON_PREFIX)
    actions: list[Action] = []
    if cordoned and not slurm.drain:
        actions.append(DrainSlurmNode(slurm.name, CORDON_REASON))
    if not cordoned and slurm.drain and by_us:
        actions.append(ResumeSlurmNode(slurm.name))
    unavailable = (slurm.down or slurm.drain or slurm.fail) and not by_us
    taint = current_taint(node)
    if unavailable:
        want = taint_value(slurm.reason or slurm.base_state)
        if taint != want:
            actions.append(TaintNode(name, want))
    elif taint is not None:
        actions.append(UntaintNode(name))
    return actions
