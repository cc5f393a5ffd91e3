"""``slurm-bridge why``'s pure explanation (bridge.status.why): one case per kind of
reason, and the tenant rule (other jobs counted and sized, named only when allowed)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bridge.models import GroupId
from bridge.slurm.models import AllocatedNode, JobState, SlurmJob, SlurmNode
from bridge.status.why import explain, find_job, render
from bridge.translate import admin_comment
from bridge.wellknown import LABEL_JOB_ID

NOW = datetime(2026, 11, 29, 13, 53, tzinfo=UTC)
NS = "team-a"


def pod(name: str = "pg-0", *, job: int | None = None, message: str = "") -> dict[str, Any]:
    conditions = [{"type": "PodScheduled", "status": "False", "message": message}]
    labels = {LABEL_JOB_ID: str(job)} if job is not None else {}
    return {
        "metadata": {"name": name, "namespace": NS, "uid": f"u-{name}", "labels": labels},
        "spec": {},
        "status": {"conditions": conditions if message else []},
    }


def job(
    job_id: int,
    state: str = "PENDING",
    reason: str = "Resources",
    *,
    ns: str | None = NS,
    name: str = "pg",
    nodes: int = 2,
    cpus: int = 6,
    **kw: Any,
) -> SlurmJob:
    comment = ""
    if ns is not None:
        gid = GroupId(kind="PodGroup", namespace=ns, name=name, uid="u")
        comment = admin_comment(gid, [f"{ns}/{name}-0"])
    fields: dict[str, Any] = {
        "job_id": job_id,
        "name": name,
        "state": JobState(primary=state),
        "state_reason": reason,
        "partition": "p",
        "node_count": nodes,
        "cpus": cpus,
        "admin_comment": comment,
        "user": "slurm",
        "time_limit_minutes": 2,
    }
    return SlurmJob(**(fields | kw))


def node(name: str, alloc_cpus: int = 8, **kw: Any) -> SlurmNode:
    fields: dict[str, Any] = {
        "name": name,
        "state": frozenset({"ALLOCATED" if alloc_cpus else "IDLE"}),
        "cpus": 8,
        "alloc_cpus": alloc_cpus,
        "real_memory_mib": 16000,
        "partitions": ("p",),
    }
    return SlurmNode(**(fields | kw))


NODES = [node("n0"), node("n1"), node("n2")]
BLOCKER = job(
    5, "RUNNING", "None", ns=None, name="native-train", nodes=3, cpus=24, user="alice",
    end_time=NOW + timedelta(minutes=2),
)  # fmt: skip


def test_resources_names_the_short_resource_and_the_running_jobs_size_and_the_plan() -> None:
    mine = job(48, start_time=NOW + timedelta(minutes=2), memory_per_node_mib=500,
               last_sched_evaluation=NOW - timedelta(seconds=1))  # fmt: skip
    e = explain(pod(job=48), mine, [mine, BLOCKER], NODES, now=NOW)
    text = render(e)
    assert "it asks 2 nodes with 3 CPUs, 500 MiB each" in text
    assert "of the 3 nodes of partition p, 0 can take that now" in text
    assert "3 nodes short of CPUs" in text
    assert "1 job (3 nodes, 24 CPUs) running in partition p" in text
    assert "the first ends by 2026-11-29T13:55:00Z" in text
    assert "Slurm expects it to start at 2026-11-29T13:55:00Z (in 2 min)" in text
    assert e.short == {"CPUs": 3}
    assert e.expected_start == "2026-11-29T13:55:00Z"
    # another tenant's job: counted and sized, never named
    assert "native-train" not in text
    assert "alice" not in text
    assert "job 5" not in text
    assert any("timelimit" in c for c in e.changes)


def test_the_admin_may_let_why_name_other_tenants_jobs() -> None:
    mine = job(48)
    text = render(explain(pod(job=48), mine, [mine, BLOCKER], NODES, now=NOW, names_others=True))
    assert "job 5 (native-train, user alice): 3 nodes, 24 CPUs" in text


def test_priority_counts_the_jobs_ahead_in_the_partition_and_their_size() -> None:
    mine = job(50, reason="Priority", priority=10)
    ahead = [
        job(40, priority=20, ns="team-b", nodes=2, cpus=16),  # higher: ahead
        job(41, priority=10, ns=NS, name="older", nodes=1, cpus=8),  # same, older: ahead
        job(60, priority=10, ns="team-b"),  # same, newer: behind
        job(42, priority=5, ns="team-b"),  # lower: behind
        job(43, priority=99, partition="other"),  # another partition
    ]
    e = explain(pod(job=50), mine, [mine, *ahead, BLOCKER], NODES, now=NOW)
    assert e.ahead is not None
    assert (e.ahead.jobs, e.ahead.nodes, e.ahead.cpus) == (2, 3, 24)
    text = render(e)
    assert "2 jobs (3 nodes, 24 CPUs) ahead of it in partition p" in text
    assert "job 41 (older, user slurm)" in text  # the tenant's own job is named
    assert "job 40" not in text  # another tenant's is not
    assert "no start time planned yet" in text


def test_no_plan_behind_a_job_without_a_time_limit_says_which_jobs_make_it_unknowable() -> None:
    # running without a limit, as Slurm shows it: a year (525600 min), ending a year on
    forever = BLOCKER.model_copy(
        update={"time_limit_minutes": 525600, "end_time": NOW + timedelta(days=365)}
    )
    mine = job(48, start_time=NOW + timedelta(days=365))
    e = explain(pod(job=48), mine, [mine, forever], NODES, now=NOW)
    assert e.expected_start == ""
    assert e.sureness.startswith(
        "no start time planned yet: a job ahead has no time limit (INFINITE); Slurm cannot "
        "plan past 1 job (3 nodes, 24 CPUs) running or ahead of it in partition p"
    )
    text = render(e)
    assert "ends by" not in text
    assert "1 job (3 nodes, 24 CPUs) running in partition p; 1 of them without a time limit" in text


def test_a_short_gres_is_named_by_type() -> None:
    mine = job(48, nodes=1, cpus=1, tres_per_node="gres/gpu:a100:2")
    gpus = [node(f"n{i}", alloc_cpus=1, gres="gpu:a100:2", gres_used="gpu:a100:1(IDX:0)")
            for i in range(2)]  # fmt: skip
    e = explain(pod(job=48), mine, [mine], gpus, now=NOW)
    assert e.short == {"GRES gpu:a100": 2}
    assert "2 nodes short of GRES gpu:a100" in render(e)


def test_a_drained_node_is_short_of_a_usable_state() -> None:
    mine = job(48, nodes=1, cpus=1)
    drained = [node("n0", alloc_cpus=0, state=frozenset({"IDLE", "DRAIN"}))]
    assert explain(pod(job=48), mine, [mine], drained, now=NOW).short == {
        "usable state (down, drained or reserved)": 1
    }


def blocks(busy: dict[str, int]) -> list[SlurmNode]:
    """Two blocks (or leaf switches) of 4 nodes, ``busy`` CPUs per node (default 0)."""
    return [
        node(f"n{i}", alloc_cpus=busy.get(f"n{i}", 0), topology=f"net:block-{i // 4}")
        for i in range(8)
    ]


def test_a_segment_names_each_block_and_how_many_free_nodes_it_has_against_the_need() -> None:
    mine = job(48, nodes=4, cpus=16, segment_size=4)
    busy = blocks({"n0": 8, "n1": 6, "n5": 6, "n6": 8})
    e = explain(pod(job=48), mine, [mine], busy, now=NOW)
    text = render(e)
    assert "topology: it asks segments of 4 nodes, each inside one block; " in text
    assert "block-0: 2 of 4 nodes free, block-1: 2 of 4 nodes free" in text
    assert "2 nodes short of a block with 4 free nodes" in text
    assert e.short["a block with 4 free nodes"] == 2
    # 4 nodes are free in all, yet no block has 4: the short resource is the block
    assert "of the 8 nodes of partition p, 4 can take that now" in text


def test_segments_of_a_larger_job_count_the_segments_the_blocks_have_room_for() -> None:
    mine = job(48, nodes=8, cpus=8, segment_size=4)
    e = explain(pod(job=48), mine, [mine], blocks({"n7": 8}), now=NOW)
    assert e.short["a block with 4 free nodes"] == 4  # one segment of 4 has no block


def test_a_switch_request_counts_the_free_nodes_under_that_many_leaf_switches() -> None:
    mine = job(48, nodes=4, cpus=4, required_switches=1)
    e = explain(pod(job=48), mine, [mine], blocks({"n0": 8, "n4": 8, "n5": 8}), now=NOW)
    text = render(e)
    assert "topology: it asks at most 1 leaf switch; block-0: 3 of 4 nodes free" in text
    assert "1 node short of 4 free nodes under 1 leaf switch" in text


def test_a_topology_request_on_nodes_without_topology_says_the_units_are_not_known() -> None:
    mine = job(48, nodes=4, cpus=4, segment_size=4)
    text = render(explain(pod(job=48), mine, [mine], NODES, now=NOW))
    assert "carry no Topology= in Slurm" in text
    # a job without a request says nothing of topology
    plain = job(48, nodes=4, cpus=4)
    assert "topology" not in render(explain(pod(job=48), plain, [plain], blocks({}), now=NOW))


def test_a_qos_limit_is_named_with_its_qos() -> None:
    mine = job(48, reason="QOSMaxGRESPerUser", qos="normal")
    text = render(explain(pod(job=48), mine, [mine], NODES, now=NOW))
    assert "a limit of QOS normal is reached: max GRES per user (QOSMaxGRESPerUser)" in text
    assert "slurmjob.slinky.slurm.net/qos" in text


def test_a_hetjob_names_the_component_that_waits() -> None:
    leader = job(32, "RUNNING", "None", het_job_id=32, het_job_offset=0)
    waiting = job(33, reason="Resources", het_job_id=32, het_job_offset=1)
    het = leader.model_copy(update={"het_components": (waiting,)})
    e = explain(pod(job=32), het, [het], NODES, now=NOW)
    assert e.component == "32+1"
    assert (e.state, e.reason) == ("PENDING", "Resources")
    assert "component 32+1 of 2 waits" in render(e)


def test_a_pod_without_a_job_says_what_the_bridge_says() -> None:
    p = pod(message="waiting for group PodGroup/team-a/pg: 1 of 2 pods exist")
    e = explain(p, find_job(p, []), [], NODES, now=NOW)
    assert e.job_id is None
    assert e.why == ("no Slurm job yet: waiting for group PodGroup/team-a/pg: 1 of 2 pods exist",)


def test_a_pending_pod_not_labelled_yet_is_found_by_the_jobs_back_link() -> None:
    mine = job(48)
    assert find_job(pod(), [mine, BLOCKER]) == mine
    assert find_job(pod(job=48), [mine, BLOCKER]) == mine


def test_a_forged_job_id_label_never_explains_another_tenants_or_a_native_job() -> None:
    theirs = job(60, ns="team-b", name="secret-train", user="bob", qos="gold")
    mine = job(48)
    # a label naming a native job or another tenant's: not believed
    assert find_job(pod(job=5), [BLOCKER]) is None
    assert find_job(pod(job=60), [theirs]) is None
    assert find_job(pod(job=60), [theirs, mine]) == mine  # its own job, by the back-link
    p = pod(job=60, message="waiting for group PodGroup/team-a/pg: 1 of 2 pods exist")
    text = render(explain(p, find_job(p, [theirs]), [theirs], NODES, now=NOW))
    assert "60" not in text
    assert "secret-train" not in text
    assert "bob" not in text
    # another cluster's bridge (its mcs label) does not name the pod either
    other = job(48).model_copy(update={"mcs_label": "other-cluster"})
    assert find_job(pod(job=48), [other], "kubernetes") is None


def test_json_has_the_facts_in_camel_case() -> None:
    mine = job(48, start_time=NOW + timedelta(minutes=2))
    d = json.loads(render(explain(pod(job=48), mine, [mine, BLOCKER], NODES, now=NOW), "json"))
    assert d["expectedStart"] == "2026-11-29T13:55:00Z"
    assert d["holding"] == {"jobs": 1, "nodes": 3, "cpus": 24}
    assert d["short"] == {"CPUs": 3}


@pytest.mark.parametrize(
    ("fields", "why", "sure", "change"),
    [
        pytest.param(
            {"reason": "JobHeldUser", "priority": 0},
            "it is held (priority 0): it starts only once released",
            "Slurm plans no start for a job that is held or waits for other jobs",
            "scontrol release",
            id="held",
        ),
        pytest.param(
            {"reason": "Reservation", "reservation": "maint"},
            "it waits for reservation maint (Reservation)",
            "Slurm plans none before its reservation maint starts (`scontrol show res maint`)",
            "slurmjob.slinky.slurm.net/reservation",
            id="reservation",
        ),
    ],
)
def test_a_job_slurm_plans_no_start_for_says_why_there_is_no_plan(
    fields: dict[str, Any], why: str, sure: str, change: str
) -> None:
    mine = job(48, **fields)
    e = explain(pod(job=48), mine, [mine], NODES, now=NOW)
    assert e.why == (why,)
    assert e.sureness == f"no start time planned yet: {sure}"
    assert any(change in c for c in e.changes)


def test_where_slurms_backfill_reserves_whole_nodes_why_shows_the_bridges_plan_and_says_so() -> (
    None
):
    # the node is full until 13:55; job 47 (one task of 2 CPUs, ahead) and job 48 fit
    # together then per CPU, while Slurm's backfill planned 48 a window later
    blocker = BLOCKER.model_copy(
        update={"nodes": ("n0",), "allocation": (AllocatedNode(name="n0", cpus=8),)}
    )
    shape: dict[str, Any] = {"nodes": 1, "cpus": 2, "cpus_per_task": 2, "tasks": 1}
    ahead = job(47, priority=10, start_time=NOW + timedelta(minutes=2), **shape)
    later = NOW + timedelta(minutes=4)
    mine = job(48, "PENDING", "Priority", priority=9, start_time=later, **shape)
    e = explain(pod(job=48), mine, [ahead, mine, blocker], NODES[:1], now=NOW)
    assert e.planned_by == "slurm-bridge"
    assert e.expected_start == "2026-11-29T13:55:00Z"
    assert (
        "slurm-bridge expects it to start at 2026-11-29T13:55:00Z (in 2 min): planned by "
        "slurm-bridge from Slurm's queue, per CPU" in render(e)
    )
    assert "Slurm's backfill plans 2026-11-29T13:57:00Z (it reserves whole nodes" in render(e)
    # the job ahead: both walks agree, Slurm's plan
    first = explain(pod(job=47), ahead, [ahead, mine, blocker], NODES[:1], now=NOW)
    assert first.planned_by == "slurm"
    assert "planned by Slurm's backfill" in render(first)
