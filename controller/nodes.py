"""Nodes reconciler (both ways): a pure plan per Kubernetes node, plus :func:`orphans`.

State sync (``controller.syncNodeState``):

* a cordoned Kubernetes node -> its Slurm node (label ``slinky.slurm.net/slurm-nodename``
  or the same name) DRAIN with reason ``slurm-bridge: cordoned in Kubernetes``;
* uncordon -> RESUME, but only that drain (an admin's own drain is never undone);
* a Slurm node DOWN/DRAIN/FAIL not set by us -> taint
  ``slinky.slurm.net/slurm-node-unavailable:NoSchedule`` (value: Slurm's reason, made a
  valid label value), removed when Slurm resumes the node;
* ``controller.cordonOnSlurmDrain``: such a node is also cordoned, marked with the
  annotation ``scheduler.slinky.slurm.net/cordoned-by-bridge``; only marked cordons are
  undone when Slurm resumes the node (an admin's cordon stays). A marked cordon never
  drains the Slurm node in turn.

Managed-node taint: ``slinky.slurm.net/managed-node=<schedulerName>:NoExecute`` goes on a
Kubernetes node exactly when its Slurm node is in a bridge partition (``partition``, the
partitions of the bridge's jobs, and those named by external nodes); it comes off (only
with our scheduler name as value) when the Slurm node is in none of them or gone.

External nodes: a node labelled ``scheduler.slinky.slurm.net/external-node`` is registered
as a dynamic ``State=EXTERNAL`` Slurm node with its allocatable CPUs (whole, rounded
down), memory (MiB, rounded down) and ``nvidia.com/gpu``; the annotation
``scheduler.slinky.slurm.net/external-node-partitions`` (CSV, default: ``partition``)
becomes the node's features (upstream's mapping: ``NodeSet=... Feature=<name>``
partitions pick the node up) AND the node is added to each named partition that exists
(Slurm cannot name partitions on a dynamic node line). The node's comment marks it as the
bridge's (``slurm-bridge:external-node:<mcsLabel>``): only marked nodes are ever drained and
deleted, when the label goes or the Kubernetes node is deleted -- drained first, deleted
once no job runs on it. Its place in the network (the annotation
``topology.slinky.slurm.net/spec``, else the labels of ``topology.nodeLabels``) becomes its
Slurm ``Topology=`` and is set again whenever the two differ (docs/topology.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bridge.devices.node_gres import (
    REASON_INCOMPATIBLE,
    REASON_UNVERIFIED,
    Agreement,
    GresTable,
    KubeInventory,
    Verdict,
    compare,
    gres_text,
    kube_inventory,
    registration_gres,
)
from bridge.devices.taints import split_tainted
from bridge.errors import InvalidInput
from bridge.slurm.models import SlurmNode
from bridge.translate import kobj
from bridge.translate.quantity import MIB, parse_non_negative, whole_count
from bridge.translate.topology import TopologyPolicy, node_topology
from bridge.wellknown import (
    ANNOTATION_CORDONED_BY_BRIDGE,
    ANNOTATION_EXTERNAL_NODE_PARTITIONS,
    CONDITION_SLURM_GRES_COMPATIBLE,
    EVENT_EXTERNAL_NODE_INVALID,
    EXTERNAL_NODE_COMMENT_PREFIX,
    LABEL_EXTERNAL_NODE,
    LABEL_SLURM_NODENAME,
    MANAGED_NODE_TAINT,
    SLURM_REASON_PREFIX,
    TAINT_SLURM_NODE_UNAVAILABLE,
)
from controller.model import (
    Action,
    CordonNode,
    DeleteSlurmNode,
    DrainSlurmNode,
    JoinPartition,
    KubeObject,
    MarkExternalNode,
    NodeWarning,
    RegisterExternalNode,
    RemoveNodeCondition,
    ResumeSlurmNode,
    SetNodeCondition,
    SetNodeTopology,
    TaintNode,
    UncordonNode,
    UntaintNode,
)

CORDON_REASON = SLURM_REASON_PREFIX + "cordoned in Kubernetes"
DEREGISTER_REASON = SLURM_REASON_PREFIX + "external-node label removed"
GPU_RESOURCE = "nvidia.com/gpu"
UNAVAILABLE_EFFECT = "NoSchedule"
MANAGED_EFFECT = "NoExecute"
# A job is (or may still be) on the node: never delete it yet.
BUSY_STATES = frozenset({"ALLOCATED", "MIXED", "COMPLETING"})
DYNAMIC_STATES = frozenset({"DYNAMIC_NORM", "DYNAMIC_FUTURE"})
_INVALID = re.compile(r"[^A-Za-z0-9._-]+")
_PARTITION_NAME = re.compile(r"[A-Za-z0-9._-]+")
PARTITIONS_FIELD = f"metadata.annotations[{ANNOTATION_EXTERNAL_NODE_PARTITIONS}]"


@dataclass(frozen=True)
class NodePolicy:
    """What the plan needs from the configuration and the controller's wider view."""

    scheduler_name: str
    mcs_label: str
    default_partition: str
    bridge_partitions: frozenset[str]
    sync_state: bool = True
    cordon_on_slurm_drain: bool = False
    topology: TopologyPolicy = field(default_factory=TopologyPolicy)
    # The node's GPUs: ResourceSlice driver -> Slurm GRES name (scheduler.deviceClassGres
    # but dra.cpu), and extended resource -> GRES (scheduler.gresMapping with defaults).
    gpu_drivers: Mapping[str, str] = field(default_factory=lambda: {"gpu.nvidia.com": "gpu"})
    gres_table: GresTable = field(default_factory=lambda: GresTable.of({"nvidia.com/gpu": "gpu"}))

    @property
    def marker(self) -> str:
        """The comment on Slurm nodes this bridge registered."""
        return EXTERNAL_NODE_COMMENT_PREFIX + self.mcs_label


@dataclass(frozen=True)
class ExternalNodeSpec:
    cpus: int
    memory_mib: int
    gres: str  # Gres= ("" for none)
    partitions: tuple[str, ...]


# --------------------------------------------------------------------------- node helpers
def node_name(node: KubeObject) -> str:
    return kobj.name(node)


def slurm_name(node: KubeObject) -> str:
    labels = kobj.labels(node)
    return str(labels.get(LABEL_SLURM_NODENAME) or node_name(node))


def is_external(node: KubeObject) -> bool:
    """Labelled for registration (any value but ``false``)."""
    labels = kobj.labels(node)
    return LABEL_EXTERNAL_NODE in labels and str(labels[LABEL_EXTERNAL_NODE]).lower() != "false"


def taint_value(reason: str) -> str:
    """A label-valid value (<= 63 chars, alphanumeric at both ends) from Slurm's reason."""
    value = _INVALID.sub("_", reason)[:63].strip("._-")
    return value or "unavailable"


def find_taint(node: KubeObject, key: str) -> Mapping[str, Any] | None:
    for t in kobj.sequence(node, "spec", "taints"):
        if kobj.get(t, "key") == key:
            return kobj.mapping(t)
    return None


def current_taint(node: KubeObject) -> str | None:
    t = find_taint(node, TAINT_SLURM_NODE_UNAVAILABLE)
    return None if t is None else kobj.text(t, "value")


def annotated_partitions(node: KubeObject, default: str) -> tuple[str, ...]:
    """The CSV annotation as partition names (deduplicated, in order); ``default`` if unset."""
    raw = kobj.annotations(node).get(ANNOTATION_EXTERNAL_NODE_PARTITIONS)
    if raw is None:
        return (default,)
    out: list[str] = []
    for item in str(raw).split(","):
        name = item.strip()
        if not name:
            continue
        if not _PARTITION_NAME.fullmatch(name):
            raise InvalidInput(PARTITIONS_FIELD, f"{name!r} is not a Slurm partition name")
        if name not in out:
            out.append(name)
    return tuple(out) or (default,)


def _resource(node: KubeObject, name: str) -> tuple[Any, str]:
    for where in ("allocatable", "capacity"):
        value = kobj.get(node, "status", where, name)
        if value is not None:
            return value, f"status.{where}[{name}]"
    return None, f"status.allocatable[{name}]"


def external_spec(
    node: KubeObject,
    default_partition: str,
    inventory: KubeInventory | None = None,
) -> ExternalNodeSpec:
    """What to register for ``node``, or InvalidInput naming the bad field.

    CPUs and memory round DOWN: Slurm must never be promised more than the node has. The
    GRES are the devices of ``inventory`` (its ResourceSlices', typed MIG slices included:
    :func:`~bridge.devices.node_gres.registration_gres`) when it has any, else
    ``nvidia.com/gpu`` of the node's allocatable.
    """
    cpu, cpu_field = _resource(node, "cpu")
    if cpu is None:
        raise InvalidInput(cpu_field, "missing (neither allocatable nor capacity has cpu)")
    cpus = int(parse_non_negative(str(cpu), field=cpu_field))
    if cpus < 1:
        raise InvalidInput(cpu_field, f"{cpu!r} is less than one whole CPU")
    mem, mem_field = _resource(node, "memory")
    if mem is None:
        raise InvalidInput(mem_field, "missing (neither allocatable nor capacity has memory)")
    memory_mib = int(parse_non_negative(str(mem), field=mem_field) / MIB)
    if memory_mib < 1:
        raise InvalidInput(mem_field, f"{mem!r} is less than 1Mi")
    if inventory is not None and inventory.devices and inventory.source == "ResourceSlices":
        gres = gres_text(registration_gres(inventory))
    else:
        gpu, gpu_field = _resource(node, GPU_RESOURCE)
        gpus = 0 if gpu is None else whole_count(str(gpu), field=gpu_field)
        gres = f"gpu:{gpus}" if gpus else ""
    return ExternalNodeSpec(cpus, memory_mib, gres, annotated_partitions(node, default_partition))


def owned(slurm: SlurmNode, policy: NodePolicy) -> bool:
    """Registered by this bridge (its mark, for our mcsLabel)."""
    return slurm.comment == policy.marker


def adoptable(slurm: SlurmNode) -> bool:
    """A dynamic external node without a comment: ours, left unmarked by a crash between
    create and mark, or made by hand for this very Kubernetes node."""
    return slurm.external and bool(slurm.state & DYNAMIC_STATES) and not slurm.comment


def busy(slurm: SlurmNode) -> bool:
    return bool(slurm.state & BUSY_STATES) or slurm.alloc_cpus > 0


def deregister(slurm: SlurmNode) -> list[Action]:
    """Drain first; delete once drained and no job runs there."""
    if not slurm.drain:
        return [DrainSlurmNode(slurm.name, DEREGISTER_REASON)]
    if busy(slurm):
        return []
    return [DeleteSlurmNode(slurm.name)]


# --------------------------------------------------------------------------- plans
# The node's devices as the plans see them: read (or why not), or None while not known.
Devices = KubeInventory | InvalidInput


@dataclass(frozen=True)
class NodeDevices:
    """A node's devices: all of them (what an external node registers), those no
    NoSchedule/NoExecute device taint keeps from use (what the GRES condition counts),
    and the tainted ones (``name (key=value:Effect)``, named in the condition)."""

    all: Devices
    usable: Devices
    tainted: tuple[str, ...] = ()


def read_devices(node: KubeObject, slices: Sequence[KubeObject], policy: NodePolicy) -> NodeDevices:
    """:func:`node_devices` of all the slices' devices and of the untainted ones (the
    slices carry the DeviceTaintRules' taints: taints.with_rules)."""
    usable, tainted = split_tainted(list(slices))
    every = node_devices(node, slices, policy)
    return NodeDevices(
        every, node_devices(node, usable, policy) if tainted else every, tuple(tainted)
    )


def node_devices(node: KubeObject, slices: Sequence[KubeObject], policy: NodePolicy) -> Devices:
    """The node's GPU devices (its ResourceSlices', else its allocatable), or the
    InvalidInput that says why they cannot be read."""
    try:
        return kube_inventory(node, slices, policy.gpu_drivers, policy.gres_table)
    except InvalidInput as e:
        return e


def _external(
    node: KubeObject,
    slurm: SlurmNode | None,
    policy: NodePolicy,
    devices: Devices | None,
) -> list[Action]:
    name, sname = node_name(node), slurm_name(node)
    if not is_external(node):
        return deregister(slurm) if slurm is not None and owned(slurm, policy) else []
    try:
        if isinstance(devices, InvalidInput):
            raise devices
        spec = external_spec(node, policy.default_partition, devices)
        topology = node_topology(node, policy.topology)
    except InvalidInput as e:
        return [NodeWarning(name, EVENT_EXTERNAL_NODE_INVALID, str(e))]
    if slurm is None:
        return [
            RegisterExternalNode(
                name,
                sname,
                spec.cpus,
                spec.memory_mib,
                spec.gres,
                features=spec.partitions,
                partitions=spec.partitions,
                comment=policy.marker,
            )
        ]
    actions: list[Action] = []
    if not owned(slurm, policy):
        if not adoptable(slurm):
            return []  # a static node or another bridge's: never ours to change
        actions.append(MarkExternalNode(sname, policy.marker))
    actions += [JoinPartition(name, sname, p) for p in spec.partitions if p not in slurm.partitions]
    if topology is not None and topology != slurm.topology:
        actions.append(SetNodeTopology(name, sname, topology))
    if slurm.drain and slurm.reason == DEREGISTER_REASON:
        actions.append(ResumeSlurmNode(sname))  # the label came back before the delete
    return actions


def _state(node: KubeObject, slurm: SlurmNode | None, policy: NodePolicy) -> list[Action]:
    name = node_name(node)
    cordoned = bool(kobj.get(node, "spec", "unschedulable"))
    cordon_is_ours = ANNOTATION_CORDONED_BY_BRIDGE in kobj.annotations(node)
    actions: list[Action] = []
    unavailable = False
    if slurm is not None:
        if cordoned and not cordon_is_ours and not slurm.drain:
            actions.append(DrainSlurmNode(slurm.name, CORDON_REASON))
        if not cordoned and slurm.drain and slurm.reason == CORDON_REASON:
            actions.append(ResumeSlurmNode(slurm.name))
        by_us = slurm.reason.startswith(SLURM_REASON_PREFIX)
        unavailable = (slurm.down or slurm.drain or slurm.fail) and not by_us
    taint = current_taint(node)
    if unavailable and slurm is not None:
        want = taint_value(slurm.reason or slurm.base_state)
        if taint != want:
            actions.append(TaintNode(name, TAINT_SLURM_NODE_UNAVAILABLE, want, UNAVAILABLE_EFFECT))
    elif taint is not None:
        actions.append(UntaintNode(name, TAINT_SLURM_NODE_UNAVAILABLE))
    if unavailable and policy.cordon_on_slurm_drain and not cordoned:
        actions.append(CordonNode(name))
    elif cordon_is_ours and not unavailable:
        actions.append(UncordonNode(name))
    return actions


def _managed_taint(node: KubeObject, slurm: SlurmNode | None, policy: NodePolicy) -> list[Action]:
    name = node_name(node)
    in_bridge = slurm is not None and any(p in policy.bridge_partitions for p in slurm.partitions)
    have = find_taint(node, MANAGED_NODE_TAINT)
    if in_bridge:
        if (
            have is None
            or have.get("value") != policy.scheduler_name
            or have.get("effect") != MANAGED_EFFECT
        ):
            return [TaintNode(name, MANAGED_NODE_TAINT, policy.scheduler_name, MANAGED_EFFECT)]
    elif have is not None and have.get("value") == policy.scheduler_name:
        return [UntaintNode(name, MANAGED_NODE_TAINT)]
    return []


def managed(slurm: SlurmNode | None, policy: NodePolicy) -> bool:
    """The bridge schedules on this node: its Slurm node is in a bridge partition, or
    is an external node the bridge registered."""
    if slurm is None:
        return False
    return owned(slurm, policy) or any(p in policy.bridge_partitions for p in slurm.partitions)


def gres_verdict(
    slurm: SlurmNode, policy: NodePolicy, devices: Devices, tainted: Sequence[str] = ()
) -> Verdict:
    """Do the Slurm node's GRES and the node's devices agree (the condition's content)?
    ``devices``: the usable ones; ``tainted``: the devices a NoSchedule/NoExecute taint
    keeps from use, not counted (named in the message)."""
    if isinstance(devices, InvalidInput):
        message = f"Could not read the node's devices: {devices}"
        return Verdict(Agreement.UNKNOWN, REASON_UNVERIFIED, message)
    v = compare(slurm.gres, devices, slurm_node=slurm.name, table=policy.gres_table)
    if not tainted:
        return v
    note = f" (tainted devices not counted: {', '.join(tainted)})"
    return Verdict(v.status, v.reason, v.message + note)


def _gres_condition(
    node: KubeObject,
    slurm: SlurmNode | None,
    policy: NodePolicy,
    devices: NodeDevices | None,
) -> list[Action]:
    """``SlinkySlurmGRESCompatible`` on every managed node (a Warning Event
    ``IncompatibleSlurmGRES`` when it turns False or its message changes); taken off a node
    that is no longer managed. Nothing while the node's slices are not known yet."""
    if devices is None:
        return []
    name = node_name(node)
    have = next(
        (
            c
            for c in kobj.sequence(node, "status", "conditions")
            if kobj.get(c, "type") == CONDITION_SLURM_GRES_COMPATIBLE
        ),
        None,
    )
    if slurm is None or not managed(slurm, policy):
        return [] if have is None else [RemoveNodeCondition(name, CONDITION_SLURM_GRES_COMPATIBLE)]
    v = gres_verdict(slurm, policy, devices.usable, devices.tainted)
    said = (kobj.text(have, "status"), kobj.text(have, "reason"), kobj.text(have, "message"))
    if have is not None and said == (v.status.value, v.reason, v.message):
        return []
    actions: list[Action] = [
        SetNodeCondition(name, CONDITION_SLURM_GRES_COMPATIBLE, v.status.value, v.reason, v.message)
    ]
    if v.status is Agreement.INCOMPATIBLE:
        actions.append(NodeWarning(name, REASON_INCOMPATIBLE, v.message))
    return actions


def plan(
    node: KubeObject,
    slurm: SlurmNode | None,
    policy: NodePolicy,
    slurm_known: bool = True,
    devices: Devices | NodeDevices | None = None,
) -> list[Action]:
    """Actions for one Kubernetes node. ``slurm``: its Slurm node (None: Slurm has none);
    ``slurm_known``: False while Slurm's node list could not be read (then nothing is
    done: unknown is not gone); ``devices``: the node's (:func:`read_devices`, or
    :func:`node_devices` when none is tainted; None while its slices are not known yet:
    no GRES condition, and registration takes GPUs from
    allocatable)."""
    if not slurm_known:
        return []
    if devices is not None and not isinstance(devices, NodeDevices):
        devices = NodeDevices(devices, devices)
    actions = _external(node, slurm, policy, None if devices is None else devices.all)
    if policy.sync_state:
        actions += _state(node, slurm, policy)
    actions += _managed_taint(node, slurm, policy)
    actions += _gres_condition(node, slurm, policy, devices)
    return actions


def orphans(
    slurm_nodes: Iterable[SlurmNode], kube_nodes: Iterable[KubeObject], policy: NodePolicy
) -> list[Action]:
    """Deregister the bridge's external Slurm nodes that no labelled Kubernetes node claims
    (the Kubernetes node was deleted, or relabelled while the controller was down)."""
    claimed = {slurm_name(n) for n in kube_nodes if is_external(n)}
    actions: list[Action] = []
    for sn in sorted(slurm_nodes, key=lambda n: n.name):
        if owned(sn, policy) and sn.name not in claimed:
            actions += deregister(sn)
    return actions


def bridge_partitions(
    default: str, job_partitions: Iterable[str], kube_nodes: Iterable[KubeObject]
) -> frozenset[str]:
    """``partition`` + the partitions of the bridge's jobs + those external nodes name."""
    out = {default, *job_partitions}
    for n in kube_nodes:
        if is_external(n):
            try:
                out.update(annotated_partitions(n, default))
            except InvalidInput:
                continue  # reported on the node itself
    return frozenset(out)
