"""Pure node plan tables: cordon x Slurm state x bridge marks x external label x partitions."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.errors import InvalidInput
from bridge.slurm.models import SlurmNode
from bridge.wellknown import (
    ANNOTATION_CORDONED_BY_BRIDGE,
    ANNOTATION_EXTERNAL_NODE_PARTITIONS,
    EVENT_EXTERNAL_NODE_INVALID,
    LABEL_EXTERNAL_NODE,
    LABEL_SLURM_NODENAME,
    MANAGED_NODE_TAINT,
    TAINT_SLURM_NODE_UNAVAILABLE,
)
from controller import nodes
from controller.model import (
    CordonNode,
    DeleteSlurmNode,
    DrainSlurmNode,
    JoinPartition,
    MarkExternalNode,
    NodeWarning,
    RegisterExternalNode,
    ResumeSlurmNode,
    TaintNode,
    UncordonNode,
    UntaintNode,
)

SCHED = "slurm-bridge-scheduler"
MARK = "slurm-bridge:external-node:kubernetes"
CORDON = "slurm-bridge: cordoned in Kubernetes"
DEREG = "slurm-bridge: external-node label removed"
UNAVAIL = TAINT_SLURM_NODE_UNAVAILABLE


def policy(cordon: bool = False, sync: bool = True, extra: tuple[str, ...] = ()) -> Any:
    return nodes.NodePolicy(
        scheduler_name=SCHED,
        mcs_label="kubernetes",
        default_partition="sb",
        bridge_partitions=frozenset({"sb", *extra}),
        sync_state=sync,
        cordon_on_slurm_drain=cordon,
    )


def knode(
    name: str = "n1",
    *,
    cordoned: bool = False,
    ours: bool = False,
    taints: list[dict[str, str]] | None = None,
    external: bool = False,
    parts: str | None = None,
    alloc: dict[str, str] | None = None,
    slurm_name: str | None = None,
) -> dict[str, Any]:
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    if external:
        labels[LABEL_EXTERNAL_NODE] = "true"
    if slurm_name:
        labels[LABEL_SLURM_NODENAME] = slurm_name
    if parts is not None:
        annotations[ANNOTATION_EXTERNAL_NODE_PARTITIONS] = parts
    if ours:
        annotations[ANNOTATION_CORDONED_BY_BRIDGE] = "true"
    spec: dict[str, Any] = {}
    if cordoned:
        spec["unschedulable"] = True
    if taints:
        spec["taints"] = taints
    status = {"allocatable": alloc if alloc is not None else {"cpu": "4", "memory": "8Gi"}}
    return {
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": spec,
        "status": status,
    }


def snode(
    state: set[str],
    reason: str = "",
    *,
    name: str = "n1",
    parts: tuple[str, ...] = (),
    comment: str = "",
    alloc_cpus: int = 0,
) -> SlurmNode:
    return SlurmNode(
        name=name,
        state=frozenset(state),
        reason=reason,
        partitions=parts,
        comment=comment,
        alloc_cpus=alloc_cpus,
    )


def taint(key: str, value: str, effect: str) -> dict[str, str]:
    return {"key": key, "value": value, "effect": effect}


UNAVAIL_TAINT = taint(UNAVAIL, "x", "NoSchedule")
MANAGED = taint(MANAGED_NODE_TAINT, SCHED, "NoExecute")


@pytest.mark.parametrize(
    ("k", "s", "expected"),
    [
        pytest.param(knode(), snode({"IDLE"}), [], id="in-sync"),
        pytest.param(
            knode(cordoned=True),
            snode({"IDLE"}),
            [DrainSlurmNode("n1", CORDON)],
            id="cordon-drains",
        ),
        pytest.param(
            knode(cordoned=True, slurm_name="s9"),
            snode({"IDLE"}, name="s9"),
            [DrainSlurmNode("s9", CORDON)],
            id="cordon-drains-the-labelled-slurm-name",
        ),
        pytest.param(
            knode(cordoned=True), snode({"IDLE", "DRAIN"}, CORDON), [], id="cordon-already-drained"
        ),
        pytest.param(
            knode(cordoned=True),
            snode({"IDLE", "DRAIN"}, "maint"),
            [TaintNode("n1", UNAVAIL, "maint", "NoSchedule")],
            id="cordon-over-admin-drain-keeps-admin-reason",
        ),
        pytest.param(
            knode(),
            snode({"IDLE", "DRAIN"}, CORDON),
            [ResumeSlurmNode("n1")],
            id="uncordon-resumes",
        ),
        pytest.param(
            knode(),
            snode({"IDLE", "DRAIN"}, "disk replacement"),
            [TaintNode("n1", UNAVAIL, "disk_replacement", "NoSchedule")],
            id="admin-drain-taints-never-resumed",
        ),
        pytest.param(
            knode(),
            snode({"IDLE", "DRAIN"}, DEREG),
            [],
            id="deregister-drain-is-not-an-uncordon-resume",
        ),
        pytest.param(
            knode(),
            snode({"DOWN"}, ""),
            [TaintNode("n1", UNAVAIL, "DOWN", "NoSchedule")],
            id="down-without-reason-taints-with-state",
        ),
        pytest.param(
            knode(taints=[taint(UNAVAIL, "maint", "NoSchedule")]),
            snode({"IDLE", "DRAIN"}, "maint"),
            [],
            id="taint-already-there",
        ),
        pytest.param(
            knode(taints=[UNAVAIL_TAINT]),
            snode({"IDLE"}),
            [UntaintNode("n1", UNAVAIL)],
            id="resumed",
        ),
        pytest.param(
            knode(taints=[UNAVAIL_TAINT]),
            None,
            [UntaintNode("n1", UNAVAIL)],
            id="slurm-node-gone-untaints",
        ),
        pytest.param(knode(cordoned=True), None, [], id="no-slurm-node-nothing-to-drain"),
    ],
)
def test_state_sync_plan(k: dict[str, Any], s: SlurmNode | None, expected: Any) -> None:
    assert nodes.plan(k, s, policy()) == expected


@pytest.mark.parametrize(
    ("k", "s", "expected"),
    [
        pytest.param(
            knode(),
            snode({"IDLE", "DRAIN"}, "maint"),
            [TaintNode("n1", UNAVAIL, "maint", "NoSchedule"), CordonNode("n1")],
            id="slurm-drain-cordons-and-marks",
        ),
        pytest.param(
            knode(cordoned=True, ours=True, taints=[taint(UNAVAIL, "maint", "NoSchedule")]),
            snode({"IDLE", "DRAIN"}, "maint"),
            [],
            id="our-cordon-never-drains-back",
        ),
        pytest.param(
            knode(cordoned=True, ours=True, taints=[taint(UNAVAIL, "maint", "NoSchedule")]),
            snode({"IDLE"}),
            [UntaintNode("n1", UNAVAIL), UncordonNode("n1")],
            id="slurm-resume-uncordons-our-cordon",
        ),
        pytest.param(
            knode(cordoned=True, taints=[taint(UNAVAIL, "maint", "NoSchedule")]),
            snode({"IDLE", "DRAIN"}, "maint"),
            [],
            id="admin-cordon-over-slurm-drain-left-alone",
        ),
        pytest.param(
            knode(cordoned=True),
            snode({"IDLE", "DRAIN"}, CORDON),
            [],
            id="admin-cordon-our-drain-no-cordon-loop",
        ),
        pytest.param(
            knode(cordoned=True),
            snode({"IDLE"}),
            [DrainSlurmNode("n1", CORDON)],
            id="admin-cordon-never-undone-after-slurm-resume",
        ),
        pytest.param(
            knode(ours=True),
            snode({"IDLE"}),
            [UncordonNode("n1")],
            id="stale-mark-dropped",
        ),
        pytest.param(
            knode(cordoned=True, ours=True),
            None,
            [UncordonNode("n1")],
            id="slurm-node-gone-uncordons-ours",
        ),
    ],
)
def test_cordon_on_slurm_drain_plan(k: dict[str, Any], s: SlurmNode | None, expected: Any) -> None:
    assert nodes.plan(k, s, policy(cordon=True)) == expected


def test_cordon_on_slurm_drain_off_never_cordons() -> None:
    actions = nodes.plan(knode(), snode({"IDLE", "DRAIN"}, "maint"), policy(cordon=False))
    assert not any(isinstance(a, CordonNode) for a in actions)


def test_sync_off_leaves_cordon_and_taints_alone() -> None:
    assert nodes.plan(knode(cordoned=True), snode({"DOWN"}), policy(sync=False)) == []


def test_unknown_slurm_changes_nothing() -> None:
    k = knode(external=True, taints=[UNAVAIL_TAINT, MANAGED], cordoned=True, ours=True)
    assert nodes.plan(k, None, policy(cordon=True), slurm_known=False) == []


@pytest.mark.parametrize(
    ("k", "s", "pol", "expected"),
    [
        pytest.param(
            knode(),
            snode({"IDLE"}, parts=("sb",)),
            policy(),
            [TaintNode("n1", MANAGED_NODE_TAINT, SCHED, "NoExecute")],
            id="in-bridge-partition-tainted",
        ),
        pytest.param(
            knode(taints=[MANAGED]), snode({"IDLE"}, parts=("sb",)), policy(), [], id="already"
        ),
        pytest.param(
            knode(), snode({"IDLE"}, parts=("batch",)), policy(), [], id="other-partition"
        ),
        pytest.param(
            knode(),
            snode({"IDLE"}, parts=("batch", "gpu")),
            policy(extra=("gpu",)),
            [TaintNode("n1", MANAGED_NODE_TAINT, SCHED, "NoExecute")],
            id="partition-of-a-bridge-job-counts",
        ),
        pytest.param(
            knode(taints=[MANAGED]),
            snode({"IDLE"}, parts=("batch",)),
            policy(),
            [UntaintNode("n1", MANAGED_NODE_TAINT)],
            id="left-bridge-partitions-untainted",
        ),
        pytest.param(
            knode(taints=[taint(MANAGED_NODE_TAINT, "other-scheduler", "NoExecute")]),
            snode({"IDLE"}, parts=("batch",)),
            policy(),
            [],
            id="another-schedulers-taint-kept",
        ),
        pytest.param(
            knode(taints=[taint(MANAGED_NODE_TAINT, "old", "NoExecute")]),
            snode({"IDLE"}, parts=("sb",)),
            policy(),
            [TaintNode("n1", MANAGED_NODE_TAINT, SCHED, "NoExecute")],
            id="wrong-value-fixed",
        ),
        pytest.param(
            knode(taints=[MANAGED]),
            None,
            policy(),
            [UntaintNode("n1", MANAGED_NODE_TAINT)],
            id="no-slurm-node-untainted",
        ),
    ],
)
def test_managed_node_taint_plan(
    k: dict[str, Any], s: SlurmNode | None, pol: Any, expected: Any
) -> None:
    assert nodes.plan(k, s, pol) == expected


def register(
    cpus: int = 4,
    mem: int = 8192,
    gpus: int = 0,
    parts: tuple[str, ...] = ("sb",),
    name: str = "n1",
) -> RegisterExternalNode:
    gres = f"gpu:{gpus}" if gpus else ""
    return RegisterExternalNode("n1", name, cpus, mem, gres, parts, parts, MARK)


EXT = {"EXTERNAL", "IDLE", "DYNAMIC_NORM"}


@pytest.mark.parametrize(
    ("k", "s", "expected"),
    [
        pytest.param(knode(external=True), None, [register()], id="labelled-registers"),
        pytest.param(
            knode(
                external=True,
                alloc={"cpu": "7500m", "memory": "1500Mi", "nvidia.com/gpu": "2"},
                parts="gpu, sb,gpu,",
            ),
            None,
            [register(cpus=7, mem=1500, gpus=2, parts=("gpu", "sb"))],
            id="rounds-down-reads-gpus-dedups-partitions",
        ),
        pytest.param(
            knode(external=True, slurm_name="k9"),
            None,
            [register(name="k9")],
            id="registers-under-the-slurm-nodename",
        ),
        pytest.param(
            knode(external=True, parts=""), None, [register()], id="empty-annotation-default"
        ),
        pytest.param(
            knode(external=True),
            snode(EXT, parts=("sb",), comment=MARK),
            [TaintNode("n1", MANAGED_NODE_TAINT, SCHED, "NoExecute")],
            id="registered-idempotent",
        ),
        pytest.param(
            knode(external=True, parts="sb,gpu", taints=[MANAGED]),
            snode(EXT, parts=("sb",), comment=MARK),
            [JoinPartition("n1", "n1", "gpu")],
            id="missing-partition-joined",
        ),
        pytest.param(
            knode(external=True, taints=[MANAGED]),
            snode(EXT, parts=("sb",)),
            [MarkExternalNode("n1", MARK)],
            id="unmarked-dynamic-node-adopted",
        ),
        pytest.param(
            knode(external=True),
            snode({"EXTERNAL", "IDLE"}, parts=("batch",)),
            [],
            id="static-node-never-touched",
        ),
        pytest.param(
            knode(external=True),
            snode(EXT, parts=("batch",), comment="slurm-bridge:external-node:other"),
            [],
            id="another-bridges-node-never-touched",
        ),
        pytest.param(
            knode(external=True, taints=[MANAGED]),
            snode(EXT | {"DRAIN"}, DEREG, parts=("sb",), comment=MARK),
            [ResumeSlurmNode("n1")],
            id="label-back-before-delete-resumes",
        ),
        pytest.param(
            knode(taints=[MANAGED]),
            snode(EXT, parts=("sb",), comment=MARK),
            [DrainSlurmNode("n1", DEREG)],
            id="label-removed-drains-first",
        ),
        pytest.param(
            knode(taints=[MANAGED]),
            snode({"EXTERNAL", "ALLOCATED", "DRAIN", "DYNAMIC_NORM"}, DEREG, comment=MARK),
            [UntaintNode("n1", MANAGED_NODE_TAINT)],
            id="label-removed-job-running-waits",
        ),
        pytest.param(
            knode(),
            snode(EXT | {"DRAIN"}, DEREG, comment=MARK),
            [DeleteSlurmNode("n1")],
            id="label-removed-idle-drained-deleted",
        ),
        pytest.param(
            knode(),
            snode(EXT | {"DRAIN"}, "maint", comment=MARK),
            [DeleteSlurmNode("n1"), TaintNode("n1", UNAVAIL, "maint", "NoSchedule")],
            id="label-removed-admin-drained-idle-deleted",
        ),
        pytest.param(
            knode(), snode(EXT, parts=("batch",)), [], id="unlabelled-unmarked-never-deleted"
        ),
    ],
)
def test_external_node_plan(k: dict[str, Any], s: SlurmNode | None, expected: Any) -> None:
    assert nodes.plan(k, s, policy()) == expected


@pytest.mark.parametrize(
    ("alloc", "parts", "field"),
    [
        pytest.param({"cpu": "lots", "memory": "1Gi"}, None, "status.allocatable[cpu]", id="cpu"),
        pytest.param({"cpu": "500m", "memory": "1Gi"}, None, "status.allocatable[cpu]", id="cpu<1"),
        pytest.param({"memory": "1Gi"}, None, "status.allocatable[cpu]", id="cpu-missing"),
        pytest.param({"cpu": "2", "memory": "-1"}, None, "status.allocatable[memory]", id="mem"),
        pytest.param(
            {"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "1.5"},
            None,
            "status.allocatable[nvidia.com/gpu]",
            id="gpu-fraction",
        ),
        pytest.param(
            {"cpu": "2", "memory": "1Gi"},
            "ok,bad name",
            f"metadata.annotations[{ANNOTATION_EXTERNAL_NODE_PARTITIONS}]",
            id="partition-name",
        ),
    ],
)
def test_bad_external_node_values_warn_naming_the_field(
    alloc: dict[str, str], parts: str | None, field: str
) -> None:
    actions = nodes.plan(knode(external=True, alloc=alloc, parts=parts), None, policy())
    assert len(actions) == 1
    warning = actions[0]
    assert isinstance(warning, NodeWarning)
    assert warning.reason == EVENT_EXTERNAL_NODE_INVALID
    assert warning.message.startswith(field)


def test_capacity_used_when_allocatable_lacks_a_resource() -> None:
    k = knode(external=True, alloc={})
    k["status"]["capacity"] = {"cpu": "2", "memory": "1Gi"}
    assert nodes.plan(k, None, policy()) == [register(cpus=2, mem=1024)]


def test_orphans_deregister_only_our_unclaimed_nodes() -> None:
    slurm = [
        snode(EXT, name="gone", comment=MARK),
        snode(EXT | {"DRAIN"}, DEREG, name="gone-drained", comment=MARK),
        snode(EXT, name="claimed", comment=MARK),
        snode(EXT, name="foreign", comment="slurm-bridge:external-node:other"),
        snode({"EXTERNAL", "IDLE"}, name="static"),
    ]
    claimed = knode("claimed", external=True)
    unlabelled = knode("gone")  # exists in Kubernetes, but no longer labelled
    assert nodes.orphans(slurm, [claimed, unlabelled], policy()) == [
        DrainSlurmNode("gone", DEREG),
        DeleteSlurmNode("gone-drained"),
    ]


def test_bridge_partitions_collects_config_jobs_and_external_nodes() -> None:
    kube = [
        knode("a", external=True, parts="gpu,sb"),
        knode("b", external=True, parts="bad name"),
        knode("c", parts="ignored"),
    ]
    assert nodes.bridge_partitions("sb", {"batch"}, kube) == {"sb", "batch", "gpu"}


@given(st.text(max_size=40))
def test_partition_annotation_parser_returns_names_or_names_the_field(raw: str) -> None:
    k = knode(external=True, parts=raw)
    error: InvalidInput | None = None
    parts: tuple[str, ...] = ()
    try:
        parts = nodes.annotated_partitions(k, "sb")
    except InvalidInput as e:
        error = e
    if error is not None:
        assert error.field == f"metadata.annotations[{ANNOTATION_EXTERNAL_NODE_PARTITIONS}]"
        return
    assert parts
    assert all(p and "," not in p and p == p.strip() for p in parts)
    assert len(set(parts)) == len(parts)
