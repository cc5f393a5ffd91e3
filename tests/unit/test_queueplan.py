"""The bridge's own plan of Slurm's queue (bridge.queueplan), on hand-built queues: per
CPU, memory and GRES where Slurm's backfill reserves whole nodes; whole nodes where the
job asks them; no plan behind a job without a time limit; a hetjob's components together;
and when the bridge's plan is shown instead of Slurm's (bridge.expected.choose)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bridge.expected import BY_BRIDGE, BY_SLURM, Plan, choose, note
from bridge.queueplan import (
    AHEAD_NOT_MODELLED,
    NOT_PLANNABLE,
    TOO_DEEP,
    UNKNOWABLE,
    QueueStart,
    plan_queue,
)
from bridge.slurm.models import AllocatedNode, JobState, SlurmJob, SlurmNode

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
T1 = NOW + timedelta(minutes=10)
T2 = NOW + timedelta(minutes=20)


def node(name: str, cpus: int = 64, gres: str = "", partition: str = "p") -> SlurmNode:
    return SlurmNode(
        name=name,
        state=frozenset({"MIXED"}),
        cpus=cpus,
        real_memory_mib=256_000,
        gres=gres,
        partitions=(partition,),
    )


def running(
    job_id: int,
    on: dict[str, int],
    ends: datetime | None,
    *,
    limit: int | None = 60,
    gres: str = "",
) -> SlurmJob:
    """A running job holding ``on`` (node -> CPUs) until ``ends``."""
    return SlurmJob(
        job_id=job_id,
        name=f"r{job_id}",
        state=JobState(primary="RUNNING"),
        partition="p",
        start_time=NOW - timedelta(minutes=1),
        end_time=ends,
        time_limit_minutes=limit,
        cpus=sum(on.values()),
        nodes=tuple(on),
        tres_per_node=gres,
        allocation=tuple(AllocatedNode(name=n, cpus=c, memory_mib=1000) for n, c in on.items()),
    )


def pending(
    job_id: int,
    cpus: int,
    *,
    tasks: int = 1,
    nodes: int = 1,
    max_nodes: int | None = None,
    limit: int | None = 10,
    priority: int = 100,
    submitted: int = 0,
    exclusive: bool = False,
    gres: str = "",
    reason: str = "Resources",
    **kw: object,
) -> SlurmJob:
    """A pending job of ``tasks`` tasks of ``cpus`` CPUs each, on ``nodes`` nodes."""
    return SlurmJob(  # type: ignore[misc]
        job_id=job_id,
        name=f"p{job_id}",
        state=JobState(primary="PENDING"),
        state_reason=reason,
        partition="p",
        priority=priority,
        submit_time=NOW - timedelta(seconds=100 - submitted),
        time_limit_minutes=limit,
        cpus=cpus * tasks,
        cpus_per_task=cpus,
        tasks=tasks,
        node_count=nodes,
        max_nodes=max_nodes or nodes,
        memory_per_cpu_mib=100,
        shared=("none",) if exclusive else (),
        tres_per_node=gres,
        **kw,
    )


def test_shared_node_a_16_cpu_gang_starts_when_the_first_32_cpu_job_ends_not_the_second() -> None:
    # one 64-CPU node: two running jobs of 32 CPUs end at T1 and T2
    jobs = [
        running(1, {"n0": 32}, T1),
        running(2, {"n0": 32}, T2),
        pending(10, 16),
    ]
    plans = plan_queue(jobs, [node("n0")], NOW, {10})
    assert plans[10].start == T1


def test_planned_jobs_share_a_node_per_cpu_where_backfill_reserves_it_whole() -> None:
    # the node is full until T1; then two 16-CPU jobs fit at once per CPU, while backfill
    # (whole-node reservations) plans the second only after the first one's window
    jobs = [
        running(1, {"n0": 64}, T1),
        pending(10, 16, limit=10),
        pending(11, 16, limit=10, submitted=1),
    ]
    plans = plan_queue(jobs, [node("n0")], NOW, {10, 11})
    assert plans[10] == QueueStart(T1, T1)
    assert plans[11].start == T1
    assert plans[11].whole == T1 + timedelta(minutes=10)
    # shown: the bridge's plan for the second (Slurm's backfill plans it at the later one)
    shown = choose(Plan(T2), plans[11].start, plans[11].whole)
    assert shown == Plan(T1, by=BY_BRIDGE, slurm_start=T2)
    assert "planned by slurm-bridge from Slurm's queue" in note(shown, NOW)
    # the first: both walks agree, Slurm's plan stands
    assert choose(Plan(T1), plans[10].start, plans[10].whole).by == BY_SLURM


def test_a_job_asking_whole_nodes_waits_for_an_idle_node_though_cpus_are_free() -> None:
    jobs = [running(1, {"n0": 8}, T1), running(2, {"n1": 8}, T2), pending(10, 4, exclusive=True)]
    plans = plan_queue(jobs, [node("n0"), node("n1")], NOW, {10})
    assert plans[10].start == T1
    # and once planned it holds its node whole: a small job behind it takes the other one
    jobs.append(pending(11, 60, priority=50))
    plans = plan_queue(jobs, [node("n0"), node("n1")], NOW, {10, 11})
    assert plans[11].start == T2


def test_short_of_gres_it_waits_for_the_gpus_though_cpus_are_free() -> None:
    jobs = [
        running(1, {"n0": 2}, T1, gres="gres/gpu:2"),
        pending(10, 1, gres="gres/gpu:1"),
    ]
    plans = plan_queue(jobs, [node("n0", gres="gpu:2")], NOW, {10})
    assert plans[10].start == T1
    # a job asking no GPU (and none ahead of it) starts at once
    plans = plan_queue([jobs[0], pending(11, 1)], [node("n0", gres="gpu:2")], NOW, {11})
    assert plans[11].start == NOW


def test_behind_a_job_without_a_time_limit_the_start_is_unknowable() -> None:
    jobs = [running(1, {"n0": 64}, None, limit=None), pending(10, 16)]
    plans = plan_queue(jobs, [node("n0")], NOW, {10})
    assert plans[10] == QueueStart(unknowable=True, why=UNKNOWABLE)
    # Slurm's "no plan" (a year ahead) stands whatever the bridge says
    assert choose(Plan(None, unknowable=True), None, None) == Plan(None, unknowable=True)


def test_a_hetjobs_components_start_together() -> None:
    # component 0 fits on n0 (8 CPUs) now, component 1 (64 CPUs) only on n1 from T1
    leader = pending(10, 8, het_job_id=10, het_job_offset=0)
    other = pending(11, 64, het_job_id=10, het_job_offset=1)
    jobs = [running(1, {"n1": 8}, T1), leader, other]
    plans = plan_queue(jobs, [node("n0", cpus=8), node("n1")], NOW, {10})
    assert plans[10].start == T1
    # alone, component 0 would start now
    assert (
        plan_queue([jobs[0], pending(12, 8)], [node("n0", cpus=8), node("n1")], NOW, {12})[12].start
        == NOW
    )


def test_slurms_order_priority_first_then_submit_time() -> None:
    # the node frees 32 CPUs at T1 and the rest at T2: the higher priority job submitted
    # later takes T1
    jobs = [
        running(1, {"n0": 32}, T1),
        running(2, {"n0": 32}, T2),
        pending(10, 32, limit=30, priority=10, submitted=0),
        pending(11, 32, limit=30, priority=20, submitted=5),
    ]
    plans = plan_queue(jobs, [node("n0")], NOW, {10, 11})
    assert plans[11].start == T1
    assert plans[10].start == T2


def test_jobs_start_in_slurms_order_and_slurms_sooner_backfill_plan_is_shown() -> None:
    # on shared nodes Slurm's backfill reserves whole nodes for each job it plans, which
    # leaves a job behind no room to start first: the bridge plans in order
    jobs = [
        running(1, {"n0": 32}, T1),
        pending(10, 64, limit=30, priority=100),  # needs the whole node: from T1
        pending(11, 32, limit=5, priority=10),  # would fit before T1: not planned there
    ]
    plans = plan_queue(jobs, [node("n0")], NOW, {10, 11})
    assert plans[10].start == T1
    assert plans[11].start == T1 + timedelta(minutes=30)
    # where Slurm does plan it sooner (a backfill), its own plan is the earlier: shown
    assert choose(Plan(NOW), plans[11].start, plans[11].whole) == Plan(NOW)


def test_a_gang_spreads_its_tasks_over_nodes_when_no_node_takes_them_all() -> None:
    jobs = [running(1, {"n0": 60}, T2), running(2, {"n1": 60}, T2), pending(10, 4, tasks=2)]
    jobs[-1] = pending(10, 4, tasks=2, nodes=1, max_nodes=2)
    plans = plan_queue(jobs, [node("n0"), node("n1")], NOW, {10})
    assert plans[10].start == NOW  # 4 CPUs free on each node: one task each


def test_held_and_dependent_jobs_ahead_hold_nothing_and_get_no_plan_of_the_bridges() -> None:
    jobs = [
        running(1, {"n0": 32}, T1),
        pending(10, 32, priority=1000, reason="Dependency"),
        pending(11, 32, priority=500),
    ]
    plans = plan_queue(jobs, [node("n0")], NOW, {10, 11})
    assert plans[10] == QueueStart(why=NOT_PLANNABLE)
    assert plans[11].start == NOW


def test_behind_a_job_the_bridge_does_not_model_there_is_no_bridge_plan() -> None:
    jobs = [
        running(1, {"n0": 64}, T1),
        pending(10, 32, priority=1000, features="fast"),
        pending(11, 32, priority=500),
    ]
    plans = plan_queue(jobs, [node("n0")], NOW, {11})
    assert plans[11] == QueueStart(why=AHEAD_NOT_MODELLED)
    assert choose(Plan(T2), None, None) == Plan(T2)  # Slurm's plan stands


def test_nodes_of_other_partitions_and_down_nodes_are_not_used() -> None:
    down = node("n1").model_copy(update={"state": frozenset({"DOWN"})})
    jobs = [running(1, {"n0": 64}, T1), pending(10, 8)]
    plans = plan_queue(jobs, [node("n0"), down, node("n2", partition="other")], NOW, {10})
    assert plans[10].start == T1


def test_the_bridges_plan_is_shown_only_where_whole_node_reservations_explain_the_gap() -> None:
    # Slurm later than the bridge, and the bridge's whole-node walk too: the bridge's
    assert choose(Plan(T2), T1, T2).by == BY_BRIDGE
    # Slurm later, but the bridge's walks agree: something the bridge does not see
    # (a limit, a reservation) makes Slurm's later: Slurm's
    assert choose(Plan(T2), T1, T1) == Plan(T2)
    # the bridge later than Slurm: Slurm's
    assert choose(Plan(T1), T2, T2 + timedelta(minutes=5)) == Plan(T1)
    # Slurm later by at most its time slot (bf_resolution, 60 s): the bridge's, to the
    # second, whatever the walks say
    late = T1 + timedelta(seconds=20)
    assert choose(Plan(late), T1, T1) == Plan(T1, by=BY_BRIDGE, slurm_start=late)
    # Slurm's the same or earlier: Slurm's
    assert choose(Plan(T1), T1, T2) == Plan(T1)
    # Slurm has none yet: none, whatever the bridge has
    assert choose(Plan(), T1, T2) == Plan()


def test_a_pending_jobs_node_count_is_slurms_guess_its_minimum_comes_from_the_caller() -> None:
    # Slurm's record of a pending job says node_count 2 (its guess, node_cnt_wag) for a
    # gang of 2 tasks that may share one node: one node with room is enough
    jobs = [running(1, {"n1": 64}, T1), pending(10, 2, tasks=2, nodes=2, max_nodes=2)]
    nodes = [node("n0"), node("n1")]
    assert plan_queue(jobs, nodes, NOW, {10})[10].start == NOW
    # the bridge knows its own job's minimum (its spec): 2 nodes, so n1 from T1
    assert plan_queue(jobs, nodes, NOW, {10}, min_nodes={10: 2})[10].start == T1


def test_the_plan_is_bounded_jobs_past_the_bound_get_none_of_the_bridges() -> None:
    jobs = [running(1, {"n0": 64}, T1)] + [pending(10 + i, 8, submitted=i) for i in range(20)]
    plans = plan_queue(jobs, [node("n0")], NOW, {10, 29}, max_jobs=5)
    assert plans[10].start == T1
    assert plans[29] == QueueStart(why=TOO_DEEP)
    # a small work bound stops the walk: the jobs after it get no plan, never a wrong one
    plans = plan_queue(jobs, [node("n0")], NOW, {10, 29}, max_work=10)
    assert plans[29] == QueueStart(why=TOO_DEEP)


def test_a_job_the_caller_knows_asks_whole_nodes_is_planned_on_whole_nodes() -> None:
    # v0.0.45's record reads shared [] even for a job that asked whole nodes: the bridge
    # tells its own from their spec
    jobs = [running(1, {"n0": 8}, T1), running(2, {"n1": 8}, T2), pending(10, 4)]
    nodes = [node("n0"), node("n1")]
    assert plan_queue(jobs, nodes, NOW, {10})[10].start == NOW
    assert plan_queue(jobs, nodes, NOW, {10}, whole={10})[10].start == T1


def test_when_the_records_do_not_say_who_asks_whole_nodes_no_plan_behind_an_unknown_job() -> None:
    # slurmrestd serving v0.0.45 only: a native job's whole-node ask cannot be read, so
    # the bridge plans nothing behind it (Slurm's plan stands); its own jobs it knows
    jobs = [running(1, {"n0": 64}, T1), pending(10, 8, priority=9), pending(11, 8, priority=5)]
    plans = plan_queue(jobs, [node("n0")], NOW, {11}, min_nodes={11: 1}, sharing_known=False)
    assert plans[11] == QueueStart(why=AHEAD_NOT_MODELLED)
    plans = plan_queue(jobs, [node("n0")], NOW, {10}, min_nodes={10: 1}, sharing_known=False)
    assert plans[10].start == T1
