"""The rule for starting a new job at once (job/allocate) or queueing it (job/submit)."""

from __future__ import annotations

import pytest

from bridge.models import JobSpec
from scheduler.decide import ALLOCATE, SUBMIT, PartitionView, Shape, shape_of, start_how

ONE = Shape(nodes=1, cpus_per_node=1, memory_per_node_mib=100)
BIG = Shape(nodes=2, cpus_per_node=8, memory_per_node_mib=1000)
SIZED = PartitionView(nodes=3, max_node_cpus=8, max_node_memory_mib=16000)


@pytest.mark.parametrize(
    ("mode", "shape", "part", "how"),
    [
        pytest.param("auto", ONE, PartitionView(), ALLOCATE, id="nothing-known-tries"),
        pytest.param("auto", ONE, SIZED, ALLOCATE, id="fits-the-partition"),
        pytest.param("never", ONE, SIZED, SUBMIT, id="never"),
        pytest.param("auto", Shape(1, 1, held=True), SIZED, SUBMIT, id="held-priority-0"),
        pytest.param("auto", ONE, PartitionView(pending=1), SUBMIT, id="pending-job-goes-first"),
        pytest.param("auto", Shape(4, 1), SIZED, SUBMIT, id="more-nodes-than-partition"),
        pytest.param("auto", Shape(1, 9), SIZED, SUBMIT, id="more-cpus-than-largest-node"),
        pytest.param("auto", Shape(1, 9, exclusive=True), SIZED, ALLOCATE, id="whole-node"),
        pytest.param("auto", Shape(1, 1, 20000), SIZED, SUBMIT, id="more-memory-than-any-node"),
        pytest.param("auto", BIG, PartitionView(refused=(ONE,)), SUBMIT, id="bigger-than-refused"),
        pytest.param("auto", ONE, PartitionView(refused=(ONE,)), SUBMIT, id="same-as-refused"),
        pytest.param("auto", ONE, PartitionView(refused=(BIG,)), ALLOCATE, id="smaller-tries"),
        pytest.param(
            "auto",
            Shape(1, 1, 100),
            PartitionView(refused=(Shape(1, 1, 100, exclusive=True),)),
            ALLOCATE,
            id="shared-after-an-exclusive-refusal",
        ),
    ],
)
def test_start_how_table(mode: str, shape: Shape, part: PartitionView, how: str) -> None:
    got, why = start_how(mode, shape, part)
    assert got == how
    assert why


@pytest.mark.parametrize(
    ("spec", "shape"),
    [
        pytest.param(
            JobSpec(name="a", min_nodes=1, tasks=1, memory_per_node_mib=100),
            Shape(1, 1, 100, exclusive=True),
            id="one-task",
        ),
        pytest.param(
            JobSpec(name="a", min_nodes=2, tasks=5, cpus_per_task=2, exclusive=False),
            Shape(2, 6, 0),
            id="tasks-spread-rounded-up",
        ),
        pytest.param(
            JobSpec(name="a", min_nodes=2, tasks=4, tasks_per_node=2, memory_per_cpu_mib=10),
            Shape(2, 2, 20, exclusive=True),
            id="tasks-per-node-and-memory-per-cpu",
        ),
        pytest.param(
            JobSpec(name="a", min_nodes=1, max_nodes=256, tasks=256, exclusive=False),
            Shape(1, 1, 0),
            id="a-node-range-spreads-its-tasks-at-best",
        ),
        pytest.param(
            JobSpec(name="a", min_nodes=1, max_nodes=4, tasks=10, cpus_per_task=2),
            Shape(1, 6, 0, exclusive=True),
            id="a-node-range-rounded-up",
        ),
        pytest.param(
            JobSpec(name="a", min_nodes=1, tasks=1, priority=0),
            Shape(1, 1, 0, exclusive=True, held=True),
            id="priority-0-is-held",
        ),
    ],
)
def test_shape_of_a_spec(spec: JobSpec, shape: Shape) -> None:
    assert shape_of(spec) == shape
