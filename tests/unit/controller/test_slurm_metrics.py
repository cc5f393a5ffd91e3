"""The controller's Slurm-side metrics: pure summaries (tables) and the collector's output."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from bridge.clock import FakeClock
from bridge.models import GroupId
from bridge.slurm.models import JobState, SlurmJob, SlurmNode
from bridge.translate import admin_comment
from controller.app import ControllerMetrics
from controller.slurm_metrics import (
    MIB,
    Resources,
    SlurmCollector,
    gpu_count,
    node_state,
    summarize_jobs,
    summarize_nodes,
)
from tests.prom import scrape

OURS = admin_comment(GroupId(kind="Pod", namespace="ns", name="p", uid="u"), ["ns/p"])


def job(
    i: int, state: str, part: str = "sb", reason: str = "", comment: str = "", mcs: str = ""
) -> SlurmJob:
    return SlurmJob(
        job_id=i,
        name=f"j{i}",
        state=JobState(primary=state),
        state_reason=reason,
        partition=part,
        admin_comment=comment,
        mcs_label=mcs,
    )


def node(
    name: str,
    *state: str,
    parts: tuple[str, ...] = ("sb",),
    cpus: int = 8,
    alloc: int = 0,
    mem: int = 1000,
    alloc_mem: int = 0,
    gres: str = "",
    used: str = "",
) -> SlurmNode:
    return SlurmNode(
        name=name,
        state=frozenset(state),
        partitions=parts,
        cpus=cpus,
        alloc_cpus=alloc,
        real_memory_mib=mem,
        alloc_memory_mib=alloc_mem,
        gres=gres,
        gres_used=used,
    )


def test_jobs_are_counted_by_partition_and_state_pending_by_reason_and_ours_apart() -> None:
    s = summarize_jobs(
        [
            job(1, "RUNNING", comment=OURS, mcs="k8s"),
            job(2, "PENDING", reason="Resources", comment=OURS),
            job(3, "PENDING", reason="Priority", part="batch"),
            job(4, "PENDING", reason="Resources"),
            job(5, "COMPLETED", comment=OURS, mcs="another-bridge"),
            job(6, "PENDING", reason=""),
        ],
        "k8s",
    )
    assert s.by_state == {
        ("sb", "RUNNING"): 1,
        ("sb", "PENDING"): 3,
        ("batch", "PENDING"): 1,
        ("sb", "COMPLETED"): 1,
    }
    assert s.pending == {("sb", "Resources"): 2, ("batch", "Priority"): 1, ("sb", "None"): 1}
    assert s.placeholders == {"RUNNING": 1, "PENDING": 1}


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (("IDLE",), "IDLE"),
        (("IDLE", "EXTERNAL"), "IDLE"),
        (("MIXED",), "MIXED"),
        (("IDLE", "DRAIN"), "DRAINED"),
        (("ALLOCATED", "DRAIN"), "DRAINING"),
        (("MIXED", "DRAIN"), "DRAINING"),
        (("DOWN", "NOT_RESPONDING"), "DOWN"),
        ((), "UNKNOWN"),
    ],
)
def test_node_state_speaks_sinfo(state: tuple[str, ...], expected: str) -> None:
    assert node_state(node("n", *state)) == expected


@pytest.mark.parametrize(
    ("gres", "count"),
    [
        ("", 0),
        ("gpu:2", 2),
        ("gpu:a100:2(S:0-1)", 2),
        ("gpu:a100:1(IDX:0),gpu:h100:3(IDX:1-3)", 4),
        ("gpu:2(IDX:0,1),shard:8", 2),
        ("gpu:0(IDX:N/A)", 0),
        ("shard:4", 0),
        ("gpu:a100", 0),
    ],
)
def test_gpu_count_reads_gres_and_gres_used(gres: str, count: int) -> None:
    assert gpu_count(gres) == count


def test_partition_resources_split_into_allocated_idle_and_other() -> None:
    s = summarize_nodes(
        [
            node(
                "a",
                "MIXED",
                cpus=8,
                alloc=3,
                mem=100,
                alloc_mem=40,
                gres="gpu:2",
                used="gpu:1(IDX:0)",
            ),
            node("b", "IDLE", "DRAIN", cpus=8, mem=100, gres="gpu:2"),
            node("c", "IDLE", parts=("sb", "batch"), cpus=4, mem=50),
        ]
    )
    assert s.by_state == {
        ("sb", "MIXED"): 1,
        ("sb", "DRAINED"): 1,
        ("sb", "IDLE"): 1,
        ("batch", "IDLE"): 1,
    }
    assert s.cpus["sb"] == Resources(allocated=3, idle=5 + 4, other=8)
    assert s.cpus["batch"] == Resources(allocated=0, idle=4, other=0)
    assert s.memory_bytes["sb"] == Resources(40 * MIB, (60 + 50) * MIB, 100 * MIB)
    assert s.gpus["sb"] == Resources(1, 1, 2)


def test_collector_exports_nothing_until_read_and_again_after_clear() -> None:
    clock = FakeClock()
    metrics = ControllerMetrics(clock=clock, mcs_label="k8s")
    assert not [k for k in scrape(metrics.registry) if k[0].startswith("slurm_bridge_slurm_")]
    metrics.slurm.jobs_listed([job(1, "PENDING", reason="Resources", comment=OURS)])
    metrics.slurm.nodes_listed([node("a", "IDLE", cpus=8, gres="gpu:2")])
    got = scrape(metrics.registry)
    assert got[("slurm_bridge_slurm_jobs", (("partition", "sb"), ("state", "PENDING")))] == 1
    assert (
        got[("slurm_bridge_slurm_pending_jobs", (("partition", "sb"), ("reason", "Resources")))]
        == 1
    )
    assert got[("slurm_bridge_placeholder_jobs", (("state", "PENDING"),))] == 1
    assert got[("slurm_bridge_slurm_nodes", (("partition", "sb"), ("state", "IDLE")))] == 1
    assert (
        got[("slurm_bridge_slurm_partition_cpus", (("partition", "sb"), ("status", "idle")))] == 8
    )
    assert (
        got[("slurm_bridge_slurm_partition_gpus", (("partition", "sb"), ("status", "idle")))] == 2
    )
    read = ("slurm_bridge_slurm_last_read_timestamp_seconds", (("what", "nodes"),))
    assert got[read] == clock.now().timestamp()
    metrics.slurm.clear()
    assert not [k for k in scrape(metrics.registry) if k[0].startswith("slurm_bridge_slurm_")]


def test_collector_alone_in_a_registry_describes_every_family() -> None:
    registry = CollectorRegistry()
    registry.register(SlurmCollector(FakeClock(), ""))
    names = {fam.name for fam in registry.collect()}
    assert {"slurm_bridge_slurm_jobs", "slurm_bridge_slurm_partition_memory_bytes"} <= names
