"""The controller's Slurm-side metrics: pure summaries (tables), the collector's output, and
which jobs the sweep reads for the ``polled`` job metrics (Slurm a fake: pure logic;
tests/integration/test_controller_slurm_metrics.py runs them against real slurmrestd)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry

from bridge.config import parse_config
from bridge.kube.client import KubeClient
from bridge.models import GroupId
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import JobState, JobStateItem, SlurmJob, SlurmNode, SlurmPartition
from bridge.translate import admin_comment
from controller import sweep
from controller.app import ControllerMetrics
from controller.runtime import Controller
from controller.slurm_metrics import (
    MIB,
    JobFacts,
    JobFactsTable,
    JobsSummary,
    Resources,
    SlurmCollector,
    gpu_count,
    job_facts,
    node_state,
    summarize_jobs,
    summarize_nodes,
    summarize_polled,
)
from tests.fake_clock import FakeClock
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


def listed(*rows: tuple[int, str]) -> list[JobStateItem]:
    """``GET /jobs/state/``'s rows: (id, state)."""
    return [JobStateItem(job_id=i, state=JobState(primary=st)) for i, st in rows]


@pytest.mark.parametrize(
    ("states", "facts", "followed", "by_state", "pending", "placeholders"),
    [
        pytest.param(
            listed((1, "RUNNING"), (2, "PENDING"), (3, "PENDING")),
            {
                1: JobFacts("sb", "None", True),
                2: JobFacts("sb", "Resources", False),
                3: JobFacts("batch", "Priority", False),
            },
            set(),
            {("sb", "RUNNING"): 1, ("sb", "PENDING"): 1, ("batch", "PENDING"): 1},
            {("sb", "Resources"): 1, ("batch", "Priority"): 1},
            {"RUNNING": 1},
            id="every-job-read",
        ),
        pytest.param(
            # the state is today's, the partition and reason those of the last read
            listed((1, "PENDING"), (2, "COMPLETED")),
            {1: JobFacts("sb", "None", False), 2: JobFacts("sb", "Resources", True)},
            set(),
            {("sb", "PENDING"): 1, ("sb", "COMPLETED"): 1},
            {("sb", "None"): 1},
            {"COMPLETED": 1},
            id="state-now-reason-as-read",
        ),
        pytest.param(
            # never read: partition and reason "", the bridge's when pods name it
            listed((7, "COMPLETED"), (8, "PENDING"), (9, "RUNNING")),
            {},
            {9},
            {("", "COMPLETED"): 1, ("", "PENDING"): 1, ("", "RUNNING"): 1},
            {("", ""): 1},
            {"RUNNING": 1},
            id="never-read",
        ),
        pytest.param(
            # a read that says another bridge's (or nobody's) wins over being followed
            listed((4, "RUNNING")),
            {4: JobFacts("sb", "None", False)},
            {4},
            {("sb", "RUNNING"): 1},
            {},
            {},
            id="read-beats-followed",
        ),
        pytest.param(listed(), {5: JobFacts("sb", "None", True)}, {5}, {}, {}, {}, id="empty"),
    ],
)
def test_polled_job_metrics_join_todays_states_with_each_jobs_last_read(
    states: list[JobStateItem],
    facts: dict[int, JobFacts],
    followed: set[int],
    by_state: dict[tuple[str, str], int],
    pending: dict[tuple[str, str], int],
    placeholders: dict[str, int],
) -> None:
    s = summarize_polled(states, facts, followed)
    assert (s.by_state, s.pending, s.placeholders) == (by_state, pending, placeholders)


def test_polled_and_table_summaries_agree_when_every_job_was_just_read() -> None:
    jobs = [
        job(1, "RUNNING", comment=OURS, mcs="k8s"),
        job(2, "PENDING", reason="Resources", comment=OURS),
        job(3, "PENDING", reason="Priority", part="batch"),
        job(5, "COMPLETED", comment=OURS, mcs="another-bridge"),
        job(6, "PENDING", reason=""),
    ]
    facts = {j.job_id: job_facts(j, "k8s") for j in jobs}
    states = listed(*((j.job_id, j.state.primary) for j in jobs))
    assert summarize_polled(states, facts, set()) == summarize_jobs(jobs, "k8s")


def test_facts_table_shares_equal_records_and_forgets_jobs_slurm_no_longer_lists() -> None:
    table = JobFactsTable("k8s")
    for i in (1, 2, 3):
        table.learn(job(i, "PENDING", reason="Resources"))
    table.learn(job(4, "RUNNING", comment=OURS))
    assert table.facts[1] is table.facts[2] is table.facts[3]
    assert table.facts[4] == JobFacts("sb", "None", True)
    table.learn(job(1, "PENDING", reason="Priority"))  # a later read replaces the first
    assert table.facts[1].reason == "Priority"
    table.keep_only({1, 4, 99})  # 2 and 3 left the table; ended ones it lists stay
    assert sorted(table.facts) == [1, 4]
    assert len(table) == 2
    got = table.summary(listed((1, "PENDING"), (4, "COMPLETED")), set())
    assert got.pending == {("sb", "Priority"): 1}
    assert got.placeholders == {"COMPLETED": 1}


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


# --------------------------------------------------------------------------- the sweep
class FakeSlurm:
    """A job table; records the reads by id; the whole table must never be asked for."""

    def __init__(self, jobs: Iterable[SlurmJob]) -> None:
        self.jobs = {j.job_id: j for j in jobs}
        self.reads: list[list[int]] = []
        self.scans = 0  # streamed reads of every job's state

    async def list_job_states(
        self, job_ids: Sequence[int] | None = None
    ) -> tuple[JobStateItem, ...]:
        ids = job_ids or list(self.jobs)
        return tuple(JobStateItem(job_id=j, state=self.jobs[j].state) for j in ids)

    async def scan_job_states(
        self,
        keep: Callable[[JobStateItem], bool] | None = None,
        *,
        state: Callable[[JobState], bool] | None = None,
    ) -> tuple[JobStateItem, ...]:
        self.scans += 1
        return tuple(
            s
            for s in await self.list_job_states()
            if (keep is None or keep(s)) and (state is None or state(s.state))
        )

    async def get_jobs(self, job_ids: Iterable[int], *, concurrency: int = 16) -> list[SlurmJob]:
        ids = list(job_ids)
        self.reads.append(ids)
        return [self.jobs[j] for j in ids if j in self.jobs]

    async def list_nodes(self) -> tuple[SlurmNode, ...]:
        return ()

    async def list_partitions(self) -> tuple[SlurmPartition, ...]:
        return ()

    async def scan_jobs(self, keep: Any) -> tuple[SlurmJob, ...]:
        raise AssertionError("the job table was read")


class Seen:
    def __init__(self) -> None:
        self.jobs: list[JobsSummary] = []

    def jobs_summarized(self, summary: JobsSummary) -> None:
        self.jobs.append(summary)

    def nodes_listed(self, nodes: Iterable[SlurmNode]) -> None:
        pass


def controller(slurm: FakeSlurm, seen: Seen, mode: str = "polled") -> Controller:
    cfg = parse_config({"controller": {"slurmJobMetrics": mode}}, env={})
    return Controller(cfg, cast(SlurmClient, slurm), cast(KubeClient, None), slurm_observer=seen)


async def test_polled_sweeps_read_few_of_the_bridges_jobs_a_sweep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sweep, "METRIC_READS_MAX", 1)
    slurm = FakeSlurm([job(4, "RUNNING", comment=OURS), job(5, "PENDING", comment=OURS)])
    ctl = controller(slurm, Seen())
    ctl.caches.by_job = {4: {"ns/p"}, 5: {"ns/q"}}
    await ctl.sweep_once()
    await ctl.sweep_once()
    await ctl.sweep_once()
    assert slurm.reads == [[4], [5], []]  # one a sweep, each once in its life


async def test_polled_sweeps_read_each_job_once_the_bridges_last_and_never_the_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sweep, "SWEEP_READS_MAX", 3)
    slurm = FakeSlurm(
        [
            job(1, "PENDING", reason="Resources"),
            job(2, "PENDING", part="batch", reason="Priority"),
            job(3, "RUNNING"),
            job(4, "RUNNING", comment=OURS),  # followed: its pod is labelled
            job(5, "PENDING", reason="JobHeldUser", comment=OURS),  # followed
            job(9, "COMPLETED"),  # ended before any sweep: never read
        ]
    )
    seen = Seen()
    ctl = controller(slurm, seen)
    ctl.caches.by_job = {4: {"ns/p"}, 5: {"ns/q"}}

    await ctl.sweep_once()  # the cap: the jobs no pod names first
    assert slurm.reads == [[1, 2, 3]]
    first = seen.jobs[-1]
    assert first.by_state == {
        ("sb", "PENDING"): 1,
        ("batch", "PENDING"): 1,
        ("sb", "RUNNING"): 1,
        ("", "RUNNING"): 1,
        ("", "PENDING"): 1,
        ("", "COMPLETED"): 1,
    }
    assert first.placeholders == {"RUNNING": 1, "PENDING": 1}  # followed, not read yet

    await ctl.sweep_once()  # then the bridge's
    assert slurm.reads[1:] == [[4, 5]]
    second = seen.jobs[-1]
    assert second.pending == {
        ("sb", "Resources"): 1,
        ("batch", "Priority"): 1,
        ("sb", "JobHeldUser"): 1,
    }
    assert second.placeholders == {"RUNNING": 1, "PENDING": 1}

    # a job that ends keeps its record while Slurm lists it; gone from the table: dropped
    slurm.jobs[1] = job(1, "COMPLETED")
    del slurm.jobs[2]
    await ctl.sweep_once()
    assert slurm.reads[2:] == [[]]
    assert sorted(ctl.job_facts.facts) == [1, 3, 4, 5]
    third = seen.jobs[-1]
    assert third.by_state[("sb", "COMPLETED")] == 1  # job 1, reason as last read
    assert ("batch", "PENDING") not in third.by_state


@pytest.mark.parametrize("mode", ["table", "off"])
async def test_other_modes_keep_no_records_and_read_no_followed_job(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    slurm = FakeSlurm([job(1, "PENDING"), job(4, "RUNNING", comment=OURS)])
    seen = Seen()
    ctl = controller(slurm, seen, mode)
    ctl.caches.by_job = {4: {"ns/p"}}
    scanned: list[bool] = []

    async def scan(keep: Any) -> tuple[SlurmJob, ...]:
        scanned.append(True)
        return ()

    monkeypatch.setattr(slurm, "scan_jobs", scan)
    await ctl.sweep_once()
    assert slurm.reads == [[1]]  # the dangling sweep's read only
    assert len(ctl.job_facts) == 0
    assert scanned == ([True] if mode == "table" else [])
    assert len(seen.jobs) == (1 if mode == "table" else 0)


async def test_the_first_sweep_uses_the_states_asked_while_the_watches_listed() -> None:
    slurm = FakeSlurm([job(4, "RUNNING", comment=OURS), job(5, "PENDING", comment=OURS)])
    ctl = controller(slurm, Seen())
    ctl.caches.by_job = {4: {"ns/p"}, 5: {"ns/q"}}
    ctl.sweeper.first_states = asyncio.ensure_future(
        ctl.sweeper.scan_states()
    )  # as run() starts it
    await ctl.sweep_once()
    assert slurm.scans == 1
    assert ctl.sweeper.first_states is None
    await ctl.sweep_once()  # later sweeps ask again
    assert slurm.scans == 2
