"""The plans' re-read (:meth:`scheduler.slurm_state.SlurmState.replanned`): ONE streamed
job-table read for every followed pending job, news only where the pods would be told
something new, and no read at all while only held jobs are followed. Slurm is a fake
here (pure logic); tests/integration/test_expected_start_e2e.py runs it for real."""

from __future__ import annotations

from collections.abc import Callable, Container
from datetime import timedelta
from typing import cast

from bridge.config import parse_config
from bridge.expected import BY_BRIDGE, BY_SLURM
from bridge.kube.client import KubeClient
from bridge.slurm.client import SlurmClient
from bridge.slurm.codec.v0_0_44 import CodecV0044
from bridge.slurm.models import AllocatedNode, JobState, SlurmJob, SlurmNode
from bridge.translate import GroupRef, TranslateSettings
from scheduler.poller import JobPoller
from scheduler.slurm_state import SlurmState
from scheduler.state import GroupState, KubeState
from tests.fake_clock import FakeClock

CFG = parse_config({"managedNamespaces": ["team"]}, env={})


class FakeSlurm:
    """Slurm's job table; counts the streamed reads."""

    def __init__(self) -> None:
        self.jobs: list[SlurmJob] = []
        self.scans = 0

    async def sharing_codec(self) -> CodecV0044:
        return CodecV0044()  # its records say which jobs ask whole nodes

    async def scan_jobs(
        self,
        keep: Callable[[SlurmJob], bool],
        *,
        job_ids: Container[int] | None = None,
        states: frozenset[str] = frozenset(),
        sharing: bool = False,
    ) -> tuple[SlurmJob, ...]:
        self.scans += 1
        return tuple(
            j
            for j in self.jobs
            if (job_ids is None or j.job_id in job_ids or j.state.primary in states) and keep(j)
        )


def pending(job_id: int, reason: str = "Resources", **kw: object) -> SlurmJob:
    return SlurmJob(
        job_id=job_id,
        name=f"j{job_id}",
        state=JobState(primary="PENDING"),
        state_reason=reason,
        partition="p",
        **kw,  # type: ignore[arg-type]
    )


def setup() -> tuple[SlurmState, FakeSlurm, FakeClock]:
    clock = FakeClock()
    slurm = FakeSlurm()
    state = KubeState(CFG, TranslateSettings.from_config(CFG), clock)
    poller = JobPoller(cast(SlurmClient, slurm), lambda _: None)
    return (
        SlurmState(cast(KubeClient, None), cast(SlurmClient, slurm), clock, state, poller),
        slurm,
        clock,
    )


def follow(s: SlurmState, job: SlurmJob) -> None:
    ref = GroupRef(kind="PodGroup", namespace="team", name=f"g{job.job_id}")
    g = s.state.groups[ref.key] = GroupState(ref, job=job)
    s.watch(g, job)


async def test_one_read_for_every_followed_job_news_only_where_the_plan_moved() -> None:
    s, slurm, clock = setup()
    at = clock.now() + timedelta(minutes=10)
    for i, start in ((1, at), (2, at), (3, None), (4, at)):
        follow(s, pending(i, start_time=start))
    clock.advance(30)
    slurm.jobs = [
        pending(1, start_time=at + timedelta(seconds=30)),  # moved by less than the step
        pending(2, start_time=at + timedelta(minutes=5)),  # moved: news
        pending(3, start_time=at),  # planned now: news
        pending(4, "Priority", start_time=at),  # its reason changed: news
        pending(9, start_time=at),  # not followed
    ]
    news = await s.replanned(step=60, since=0)
    assert sorted(j.job_id for j in news) == [2, 3, 4]
    assert slurm.scans == 1


async def test_a_plan_that_came_due_since_the_last_look_is_news() -> None:
    s, slurm, clock = setup()
    at = clock.now() + timedelta(seconds=20)
    follow(s, pending(1, start_time=at))
    slurm.jobs = [pending(1, start_time=at)]
    clock.advance(10)
    assert await s.replanned(step=60, since=clock.monotonic()) == []
    before = clock.monotonic()
    clock.advance(30)
    assert [j.job_id for j in await s.replanned(step=60, since=before)] == [1]


async def test_only_held_jobs_followed_costs_no_read() -> None:
    s, slurm, _ = setup()
    follow(s, pending(1, "JobHeldUser"))
    follow(s, pending(2, "JobHeldAdmin"))
    assert await s.replanned(step=60, since=0) == []
    assert slurm.scans == 0
    follow(s, pending(3))
    await s.replanned(step=60, since=0)
    assert slurm.scans == 1


async def test_a_hetjob_is_read_whole_and_its_plan_is_its_last_components() -> None:
    s, slurm, clock = setup()
    at = clock.now() + timedelta(minutes=10)

    def het(start0: object, start1: object, reason1: str = "Resources") -> SlurmJob:
        leader = pending(40, het_job_id=40, het_job_offset=0, start_time=start0)
        other = pending(41, reason1, het_job_id=40, het_job_offset=1, start_time=start1)
        return leader.model_copy(update={"het_components": (other,)})

    follow(s, het(at, at))
    rows = lambda h: [h.model_copy(update={"het_components": ()}), *h.het_components]  # noqa: E731
    slurm.jobs = rows(het(at, at + timedelta(seconds=30)))
    assert await s.replanned(step=60, since=0) == []  # moved by less than the step
    slurm.jobs = rows(het(at, at + timedelta(minutes=5)))
    news = await s.replanned(step=60, since=0)
    assert [j.job_id for j in news] == [40]
    assert [c.job_id for c in news[0].het_components] == [41]  # whole, for the group
    slurm.jobs = rows(het(at, at, "Priority"))
    assert [j.job_id for j in await s.replanned(step=60, since=0)] == [40]


async def test_the_bridges_plan_rides_on_the_same_read_and_replaces_a_whole_node_plan() -> None:
    # one 8-CPU node full until T1; two pending 4-CPU jobs fit together at T1 per CPU,
    # while Slurm's backfill (whole nodes) plans the second one a window later
    s, slurm, clock = setup()
    s.nodes = (SlurmNode(name="n0", state=frozenset({"ALLOCATED"}), cpus=8, partitions=("p",)),)
    now = clock.now()
    t1, later = now + timedelta(minutes=2), now + timedelta(minutes=12)
    blocker = SlurmJob(
        job_id=1,
        name="native",
        state=JobState(primary="RUNNING"),
        partition="p",
        start_time=now,
        end_time=t1,
        time_limit_minutes=2,
        allocation=(AllocatedNode(name="n0", cpus=8),),
    )
    shape = {"cpus": 4, "cpus_per_task": 4, "tasks": 1, "time_limit_minutes": 10, "priority": 9}
    first = pending(2, start_time=t1, **shape)
    second = pending(3, "Priority", start_time=later, **shape)
    follow(s, first)
    follow(s, second)
    assert s.awaits_plan()  # new jobs: the next refresh is brought forward
    assert s.queue_plan(second) is None  # and their pods show no plan until it
    slurm.jobs = [blocker, first, second]
    news = await s.replanned(step=60, since=0)
    assert slurm.scans == 1  # the running job came with the same read
    assert {j.job_id for j in news} == {2, 3}  # their first plans
    assert not s.awaits_plan()
    plan3 = s.queue_plan(second)
    assert plan3 is not None
    assert plan3.start == t1
    assert plan3.whole == now + timedelta(minutes=12)
    assert s._shown(second, s.queue_plans, now).by == BY_BRIDGE
    assert s._shown(first, s.queue_plans, now).by == BY_SLURM  # the walks agree: Slurm's
    # read again with nothing moved: no news
    assert await s.replanned(step=60, since=0) == []
