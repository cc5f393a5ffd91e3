"""A job started at once, read from ``GET /resources`` for its binding
(:func:`scheduler.start.held_job`), against the REAL slurmrestd 26.05 sandbox: the view
the binding decides on is the one its whole record gives (``GET /job/{id}``), for a
shared group over several nodes, an exclusive one, and a lone pod."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bridge.models import JobSpec
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import Allocated, JobState, SlurmJob
from scheduler.decide import PodView, _bind
from scheduler.snapshot import job_view
from scheduler.start import held_job, with_hash_in_comment
from tests.integration.conftest import SlurmSandbox

pytestmark = pytest.mark.slurm
Track = Callable[[int], int]


async def started(slurm: SlurmClient, spec: JobSpec, track: Track) -> SlurmJob:
    """``spec`` allocated at once, as the scheduler knows it before any read."""
    stamped = with_hash_in_comment(spec, "abc", started_now=True)
    got = await slurm.allocate(stamped)
    assert isinstance(got, Allocated), got
    return SlurmJob(
        job_id=track(got.job_id),
        name=spec.name,
        state=JobState(primary="PENDING"),
        partition=spec.partition or "",
        comment=stamped.comment,
        admin_comment=spec.admin_comment,
    )


@pytest.mark.parametrize(
    ("shape", "pods"),
    [
        # more pods than one node holds: packed by Slurm over several, CPUs per node
        ({"min_nodes": 1, "max_nodes": 3, "exclusive": False, "extra": 2}, None),
        # whole nodes, one pod each
        ({"min_nodes": 2, "max_nodes": 2, "exclusive": True, "extra": 0}, 2),
        # one pod
        ({"min_nodes": 1, "max_nodes": 1, "exclusive": False, "extra": 0}, 1),
    ],
    ids=["shared-over-nodes", "exclusive", "one-pod"],
)
async def test_a_job_started_at_once_binds_the_same_from_its_resources_as_from_its_record(
    slurm: SlurmClient,
    sandbox: SlurmSandbox,
    track_jobs: Track,
    shape: dict[str, object],
    pods: int | None,
) -> None:
    count = pods if pods is not None else sandbox.node_cpus + int(str(shape["extra"]))
    spec = JobSpec(
        name="it-held",
        partition=sandbox.partition,
        min_nodes=int(str(shape["min_nodes"])),
        max_nodes=int(str(shape["max_nodes"])),
        tasks=count,
        cpus_per_task=1,
        memory_per_node_mib=100,
        exclusive=bool(shape["exclusive"]),
        time_limit_minutes=10,
        admin_comment='{"test":"it-held"}',
    )
    known = await started(slurm, spec, track_jobs)
    node_cpus = {n.name: n.cpus for n in await slurm.list_nodes()}
    fast = held_job(known, spec, await slurm.get_job_resources(known.job_id), node_cpus, pods=count)
    record = await slurm.get_job(known.job_id)
    assert fast is not None, "the sandbox's nodes run one thread per core"
    mine, theirs = job_view(fast), job_view(record)
    assert mine.nodes == theirs.nodes  # Slurm's order, both
    if count > 1:
        assert len(mine.nodes) > 1
        assert mine.cpus == theirs.cpus
        assert mine.cpus_per_task == theirs.cpus_per_task
        assert mine.shared == theirs.shared
    assert mine.spec_hash == theirs.spec_hash == "abc"
    assert mine.state == theirs.state == "RUNNING"
    views = tuple(PodView(f"ns/p{i}", f"u{i}") for i in range(count))
    ours, recorded = _bind(mine, views), _bind(theirs, views)
    assert (ours.pods, ours.tasks_per_node) == (recorded.pods, recorded.tasks_per_node)
