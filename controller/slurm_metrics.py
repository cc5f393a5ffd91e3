"""Slurm-side metrics, in the spirit of SchedMD's slurm-exporter, served by the controller.

They are computed once per sweep of the controller (``slurmResyncIntervalSeconds``, 30 s by
default). The node metrics come from the node table the sweep reads anyway (``GET /nodes/``).
The job metrics depend on ``controller.slurmJobMetrics``:

``polled`` (the default) costs no request of its own: each job's state comes from the
sweep's compact ``GET /jobs/state/`` (every job in Slurm's table), joined with what the
controller's own reads of that job by id said (:class:`JobFacts`, kept per job in a
:class:`JobFactsTable` until the job leaves Slurm's table): its partition, whether it is the
bridge's, and Slurm's reason *as of that read*. The sweep reads each active job once in its
life (the dangling sweep's ``GET /job/{id}``, :data:`controller.sweep.SWEEP_READS_MAX`
per sweep; in this mode also the bridge's followed jobs, at most
:data:`controller.sweep.METRIC_READS_MAX` of them per sweep), and the poller's read
of a bridge job that ended refreshes its record. So a pending job's reason is the one it
had when first seen active (or at its last such read), not today's: a job pending for
``Priority`` that now waits for ``Resources`` still counts under ``Priority``. A job the
controller never read (it ended before a sweep saw it active, or waits for its turn under
the per-sweep cap) counts with partition ``""`` (and, pending, reason ``""``); a job
followed for pods that was never read counts as the bridge's.

``table`` reads the job table for these metrics alone, each sweep, as a stream whose jobs
are counted as they arrive and never held (``GET /jobs/``, :class:`JobTally`): fresh
reasons, but slurmrestd builds the whole table for every such read (GBs and ~10 s at
30,000 jobs). ``off``: no job metrics.

:func:`summarize_jobs`, :func:`summarize_polled` and :func:`summarize_nodes` are pure;
:class:`SlurmCollector` is a Prometheus collector that exposes the last summaries (nothing
while this replica has read nothing, e.g. a standby: a leader-elected controller's standby
does not sweep).

=====================================================  =================  ====================
metric (gauge)                                         labels             from (``polled``)
=====================================================  =================  ====================
``slurm_bridge_slurm_jobs``                            partition, state   ``/jobs/state/`` +
                                                                          reads by id
``slurm_bridge_slurm_pending_jobs``                    partition, reason  the same
``slurm_bridge_placeholder_jobs``                      state              the same
``slurm_bridge_slurm_nodes``                           partition, state   ``/nodes/``
``slurm_bridge_slurm_partition_cpus``                  partition, status  ``/nodes/``
``slurm_bridge_slurm_partition_memory_bytes``          partition, status  ``/nodes/``
``slurm_bridge_slurm_partition_gpus``                  partition, status  ``/nodes/``
``slurm_bridge_slurm_last_read_timestamp_seconds``     what               the sweep
=====================================================  =================  ====================

With ``table`` the three job metrics come from ``/jobs/`` instead.

``status`` is ``allocated``, ``idle`` (free on nodes that can run jobs) or ``other`` (free
but on nodes that cannot: DOWN, DRAIN, FAIL, NOT_RESPONDING), so the three add up to the
partition's total (sinfo's ``CPUS(A/I/O/T)``) and ``sum by (partition)`` is the total. A
node in two partitions counts in both, as in sinfo.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Collection, Container, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from bridge.clock import Clock
from bridge.slurm.models import JobStateItem, SlurmJob, SlurmNode
from bridge.translate import parse_admin_comment
from bridge.translate.split import split_top_level

MIB = 1024 * 1024
RESOURCE_STATUSES = ("allocated", "idle", "other")


# --------------------------------------------------------------------------- pure part
@dataclass(frozen=True)
class JobsSummary:
    by_state: Mapping[tuple[str, str], int]  # (partition, state) -> jobs
    pending: Mapping[tuple[str, str], int]  # (partition, reason) -> pending jobs
    placeholders: Mapping[str, int]  # state -> the bridge's jobs


@dataclass(frozen=True)
class Resources:
    allocated: float = 0
    idle: float = 0
    other: float = 0

    def values(self) -> tuple[float, float, float]:
        return (self.allocated, self.idle, self.other)

    def plus(self, total: float, allocated: float, usable: bool) -> Resources:
        allocated = min(max(allocated, 0), total)
        free = total - allocated
        return Resources(
            self.allocated + allocated,
            self.idle + (free if usable else 0),
            self.other + (0 if usable else free),
        )


@dataclass(frozen=True)
class NodesSummary:
    by_state: Mapping[tuple[str, str], int]  # (partition, state) -> nodes
    cpus: Mapping[str, Resources] = field(default_factory=dict)
    memory_bytes: Mapping[str, Resources] = field(default_factory=dict)
    gpus: Mapping[str, Resources] = field(default_factory=dict)


def is_placeholder(job: SlurmJob, mcs_label: str) -> bool:
    """A job the bridge submitted (its admin_comment back-link), not another bridge's."""
    if parse_admin_comment(job.admin_comment) is None:
        return False
    return not (mcs_label and job.mcs_label and job.mcs_label != mcs_label)


class JobTally:
    """Counts jobs one at a time, so a streamed job table is summarized without being
    held: ``add`` is a ``keep`` callback for :meth:`SlurmClient.scan_jobs` that keeps
    nothing."""

    def __init__(self, mcs_label: str) -> None:
        self._mcs = mcs_label
        self._by_state: Counter[tuple[str, str]] = Counter()
        self._pending: Counter[tuple[str, str]] = Counter()
        self._placeholders: Counter[str] = Counter()

    def add(self, job: SlurmJob) -> bool:
        state = job.state.primary
        self._by_state[(job.partition, state)] += 1
        if state == "PENDING":
            self._pending[(job.partition, job.state_reason or "None")] += 1
        if is_placeholder(job, self._mcs):
            self._placeholders[state] += 1
        return False

    def summary(self) -> JobsSummary:
        return JobsSummary(dict(self._by_state), dict(self._pending), dict(self._placeholders))


def summarize_jobs(jobs: Iterable[SlurmJob], mcs_label: str) -> JobsSummary:
    tally = JobTally(mcs_label)
    for job in jobs:
        tally.add(job)
    return tally.summary()


class JobFacts(NamedTuple):
    """What a read of one job by id says that its state alone does not (``polled``)."""

    partition: str
    reason: str  # Slurm's state_reason as of that read ("None": none)
    ours: bool  # the bridge's (:func:`is_placeholder`)


def job_facts(job: SlurmJob, mcs_label: str) -> JobFacts:
    return JobFacts(
        sys.intern(job.partition),
        sys.intern(job.state_reason or "None"),
        is_placeholder(job, mcs_label),
    )


def summarize_polled(
    states: Iterable[JobStateItem], facts: Mapping[int, JobFacts], followed: Container[int]
) -> JobsSummary:
    """The job metrics from every job's state (``GET /jobs/state/``) joined with what was
    last read of it; a job never read counts with partition (and reason) ``""``, and as
    the bridge's when the controller follows it for pods (``followed``)."""
    by_state: Counter[tuple[str, str]] = Counter()
    pending: Counter[tuple[str, str]] = Counter()
    placeholders: Counter[str] = Counter()
    for item in states:
        state = item.state.primary
        known = facts.get(item.job_id)
        part = known.partition if known is not None else ""
        by_state[(part, state)] += 1
        if state == "PENDING":
            pending[(part, known.reason if known is not None else "")] += 1
        if known.ours if known is not None else item.job_id in followed:
            placeholders[state] += 1
    return JobsSummary(dict(by_state), dict(pending), dict(placeholders))


class JobFactsTable:
    """job id -> :class:`JobFacts` for the jobs in Slurm's table, kept compact: equal facts
    are one shared tuple of interned strings, so a job costs its dict slot and its id
    (~70 bytes, measured: 4.8 MB at 68,000 jobs). The shared tuples are as many as the
    partition x reason x ours combinations seen (Slurm's reasons are a fixed set)."""

    def __init__(self, mcs_label: str) -> None:
        self._mcs = mcs_label
        self._by_id: dict[int, JobFacts] = {}
        self._shared: dict[JobFacts, JobFacts] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    @property
    def facts(self) -> Mapping[int, JobFacts]:
        return self._by_id

    def learn(self, job: SlurmJob) -> None:
        """Remember what this read of ``job`` says (replacing an older read)."""
        facts = job_facts(job, self._mcs)
        self._by_id[job.job_id] = self._shared.setdefault(facts, facts)

    def keep_only(self, listed: Collection[int]) -> None:
        """Forget the jobs that left Slurm's table (not the ended ones it still lists)."""
        for job_id in self._by_id.keys() - listed:
            del self._by_id[job_id]

    def summary(self, states: Iterable[JobStateItem], followed: Container[int]) -> JobsSummary:
        return summarize_polled(states, self._by_id, followed)


def node_state(node: SlurmNode) -> str:
    """One state per node, in sinfo's words: the base state, except that a drained node
    is ``DRAINED`` (idle) or ``DRAINING`` (jobs still on it)."""
    base = node.base_state
    if node.drain:
        return "DRAINING" if base in ("ALLOCATED", "MIXED") else "DRAINED"
    return base


def gpu_count(gres: str) -> int:
    """GPUs in a node's ``gres`` or ``gres_used`` (``gpu:2``, ``gpu:a100:2(S:0-1)``,
    ``gpu:a100:1(IDX:0)``, ``gpu:0(IDX:N/A)``); anything unreadable counts 0."""
    total = 0
    for item in (i.strip() for i in split_top_level(gres)):
        parts = item.split("(", 1)[0].split(":")
        if parts[0] == "gpu" and len(parts) > 1 and parts[-1].isdigit():
            total += int(parts[-1])
    return total


def summarize_nodes(nodes: Iterable[SlurmNode]) -> NodesSummary:
    by_state: Counter[tuple[str, str]] = Counter()
    cpus: dict[str, Resources] = {}
    memory: dict[str, Resources] = {}
    gpus: dict[str, Resources] = {}
    for node in nodes:
        state = node_state(node)
        usable = not node.unusable
        for part in node.partitions or ("",):
            by_state[(part, state)] += 1
            cpus[part] = cpus.get(part, Resources()).plus(node.cpus, node.alloc_cpus, usable)
            memory[part] = memory.get(part, Resources()).plus(
                node.real_memory_mib * MIB, node.alloc_memory_mib * MIB, usable
            )
            gpus[part] = gpus.get(part, Resources()).plus(
                gpu_count(node.gres), gpu_count(node.gres_used), usable
            )
    return NodesSummary(dict(by_state), cpus, memory, gpus)


# --------------------------------------------------------------------------- collector
def _gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=labels)


class SlurmCollector(Collector):
    """Exposes the last summaries the sweep produced (register it in a registry)."""

    def __init__(self, clock: Clock, mcs_label: str) -> None:
        self._clock = clock
        self._mcs = mcs_label
        self._jobs: JobsSummary | None = None
        self._nodes: NodesSummary | None = None
        self._read: dict[str, float] = {}

    # the controller's sweep calls these with what it read
    def jobs_summarized(self, summary: JobsSummary) -> None:
        self._jobs = summary
        self._read["jobs"] = self._clock.now().timestamp()

    def jobs_listed(self, jobs: Iterable[SlurmJob]) -> None:
        self.jobs_summarized(summarize_jobs(jobs, self._mcs))

    def nodes_listed(self, nodes: Iterable[SlurmNode]) -> None:
        self._nodes = summarize_nodes(nodes)
        self._read["nodes"] = self._clock.now().timestamp()

    def clear(self) -> None:
        """Forget everything (leadership lost: a standby exports no stale numbers)."""
        self._jobs = self._nodes = None
        self._read.clear()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        jobs = _gauge(
            "slurm_bridge_slurm_jobs",
            "Slurm jobs by partition and state (every job slurmctld lists, ended ones "
            "until MinJobAge)",
            ["partition", "state"],
        )
        pending = _gauge(
            "slurm_bridge_slurm_pending_jobs",
            "Pending Slurm jobs by partition and Slurm's reason",
            ["partition", "reason"],
        )
        placeholders = _gauge(
            "slurm_bridge_placeholder_jobs",
            "The bridge's own Slurm jobs (admin_comment back-link, this mcsLabel) by state",
            ["state"],
        )
        nodes = _gauge(
            "slurm_bridge_slurm_nodes",
            "Slurm nodes by partition and state (sinfo's: IDLE, MIXED, ALLOCATED, DOWN, "
            "DRAINED, DRAINING, ...)",
            ["partition", "state"],
        )
        resources = {
            "cpus": _gauge(
                "slurm_bridge_slurm_partition_cpus",
                "CPUs of a partition's nodes: allocated, idle, other (unusable nodes)",
                ["partition", "status"],
            ),
            "memory": _gauge(
                "slurm_bridge_slurm_partition_memory_bytes",
                "Memory of a partition's nodes (RealMemory): allocated, idle, other",
                ["partition", "status"],
            ),
            "gpus": _gauge(
                "slurm_bridge_slurm_partition_gpus",
                "GPUs (gres gpu) of a partition's nodes: allocated, idle, other",
                ["partition", "status"],
            ),
        }
        read = _gauge(
            "slurm_bridge_slurm_last_read_timestamp_seconds",
            "When the controller last summarized Slurm's jobs (what=jobs) or read its node "
            "table (what=nodes), Unix time",
            ["what"],
        )
        if self._jobs is not None:
            for (part, state), n in sorted(self._jobs.by_state.items()):
                jobs.add_metric([part, state], n)
            for (part, reason), n in sorted(self._jobs.pending.items()):
                pending.add_metric([part, reason], n)
            for state, n in sorted(self._jobs.placeholders.items()):
                placeholders.add_metric([state], n)
        if self._nodes is not None:
            for (part, state), n in sorted(self._nodes.by_state.items()):
                nodes.add_metric([part, state], n)
            tables = {
                "cpus": self._nodes.cpus,
                "memory": self._nodes.memory_bytes,
                "gpus": self._nodes.gpus,
            }
            for what, table in tables.items():
                for part, res in sorted(table.items()):
                    for status, value in zip(RESOURCE_STATUSES, res.values(), strict=True):
                        resources[what].add_metric([part, status], value)
        for what, when in sorted(self._read.items()):
            read.add_metric([what], when)
        yield from (jobs, pending, placeholders, nodes, *resources.values(), read)
