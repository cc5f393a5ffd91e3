"""The bridge's own plan of Slurm's queue, per CPU: when each pending job would start if
Slurm's backfill reserved CPUs, memory and GRES instead of whole nodes. Pure: the caller
passes Slurm's active jobs, its nodes and the time (docs/why-pending.md).

Why: backfill (``src/plugins/sched/backfill/backfill.c``) counts running jobs per CPU
when it tests a pending job, but records each job it plans with ``_add_reservation``,
which takes the job's nodes out of its map *whole* for the job's window. On nodes shared
by small jobs, every job planned behind others is then planned far too late (the sandbox's
3 nodes and a queue of 36 small jobs: p50 7 minutes late), while Slurm really starts them
packed by CPU. This module simulates the same queue the way backfill walks it, with
per-CPU reservations:

* the pending jobs in Slurm's order (``sort_job_queue2`` in ``job_scheduler.c``): the
  partition's priority tier, then the job's priority (higher first), then the submit
  time, then the job id; only jobs backfill would plan (reason ``Priority``,
  ``Resources`` or ``None``; not held, not waiting for a dependency, a limit or a begin
  time);
* each running job holds its per-node allocation until its end (start + time limit;
  ``INFINITE``: forever);
* each pending job starts, not before the jobs ahead of it on the nodes it may use, at
  the earliest time at which enough of its partitions' usable nodes have its CPUs (tasks
  x CPUs per task, between its minimum and maximum node count, tasks per node), memory
  (per CPU or per node) and GRES (per node or per task) free for its whole time limit;
  whole free nodes for a job that asks exclusive nodes; then it holds what it took there
  for its window (the next jobs plan around it). No job starts before one ahead of it:
  on shared nodes Slurm's backfill, reserving whole nodes, leaves it no room to (the
  sandbox's recorded queues: with backfill jumps allowed per CPU, p90 122 s; in order,
  61 s); where Slurm does plan a job sooner, its own plan is the earlier one and is shown;
* a heterogeneous job's components start together.

The same walk is made a second time with backfill's own rule, whole nodes reserved for
every planned job that cannot start now: ``whole``. Where the two differ, the job's
start depends on how backfill reserves nodes, and Slurm's plan is the whole-node one; the
caller then shows the per-CPU plan, labelled as the bridge's (:func:`bridge.expected.choose`).

What it does not model, and then gives no plan for (Slurm's own stands): a job ahead that
asks features, licenses or a reservation, or names nodes it must use (its place is not
known); a queue longer than ``max_jobs`` or a walk over ``max_work`` node tests (both
bounded: a plan each refresh, whatever the queue); future advance reservations (a node
RESERVED now is not used). A job behind a job without a time limit that holds what it
needs has no plan: ``unknowable``.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from bridge.devices.node_gres import GresKind, parse_slurm_gres, tres_gres
from bridge.errors import InvalidInput
from bridge.slurm.models import SlurmJob, SlurmNode, fold_hetjobs

INF = math.inf

# The pending reasons of a job backfill plans (anything else: held, a dependency, a QOS or
# association limit, a begin time, a reservation: backfill plans it no start).
PLANNABLE_REASONS = frozenset({"", "None", "Priority", "Resources"})
# Node states (base or flag) in which a node takes no new job.
UNUSABLE_NODE_STATES = frozenset(
    {"DOWN", "DRAIN", "FAIL", "FUTURE", "INVALID", "UNKNOWN", "NOT_RESPONDING", "RESERVED"}
)
# Bounds of one plan (Slurm's own backfill stops at bf_max_job_test, 500 by default).
MAX_JOBS = 500
# the work of one plan: uses looked at in its node tests (about a second of CPU at most)
MAX_WORK = 400_000

# why a wanted job has no plan of the bridge's
NOT_PLANNABLE = "not waiting for resources or priority"
NOT_MODELLED = (
    "asks what the bridge's plan does not model (features, licenses, a reservation, named nodes)"
)
AHEAD_NOT_MODELLED = "a job ahead asks what the bridge's plan does not model"
TOO_DEEP = "too deep in the queue for the bridge's plan"
NEVER_FITS = "fits no usable nodes of its partition"
UNKNOWABLE = "behind a job without a time limit (INFINITE)"


@dataclass(frozen=True)
class QueueStart:
    """The bridge's plan for one pending job: ``start`` with per-CPU reservations,
    ``whole`` with backfill's whole-node ones (None: no plan; ``why`` says why,
    ``unknowable``: behind a job without a time limit)."""

    start: datetime | None = None
    whole: datetime | None = None
    unknowable: bool = False
    why: str = ""


# No plan of the bridge's (the planner is off, or gave none): Slurm's plan is shown.
NO_QUEUE_PLAN = QueueStart()


@dataclass(frozen=True)
class _Node:
    name: str
    cpus: int
    memory: int
    gres: Mapping[GresKind, int]
    partitions: frozenset[str]
    usable: bool


@dataclass(frozen=True)
class _Use:
    """What one job holds of one node from ``start`` to ``end`` (epoch seconds)."""

    start: float
    end: float
    cpus: int
    memory: int
    gres: Mapping[GresKind, int] = field(default_factory=dict)


@dataclass(frozen=True)
class _Ask:
    """What one job (component) asks."""

    partitions: frozenset[str]
    tasks: int
    cpus_per_task: int
    min_nodes: int
    max_nodes: int
    tasks_per_node: int  # 0: any
    memory_per_cpu: int
    memory_per_node: int
    gres_per_node: Mapping[GresKind, int]
    gres_per_task: Mapping[GresKind, int]
    exclusive: bool
    seconds: float  # its time limit (INF: none)
    excluded: frozenset[str]


def _node(n: SlurmNode) -> _Node:
    try:
        gres = parse_slurm_gres(n.gres)
    except InvalidInput:
        gres = {}
    return _Node(
        n.name,
        n.cpus,
        n.real_memory_mib,
        gres,
        frozenset(n.partitions),
        not (UNUSABLE_NODE_STATES & n.state),
    )


def _limit_seconds(job: SlurmJob) -> float:
    m = job.time_limit_minutes
    return INF if m is None or m >= 525600 else m * 60.0


def _ask(job: SlurmJob, min_nodes: int | None = None, whole: bool = False) -> _Ask:
    """What ``job`` asks. Its minimum node count is not in Slurm's record (a pending job's
    ``node_count`` is Slurm's guess from its last test, ``node_cnt_wag``): ``min_nodes``
    when the caller knows it (the bridge's own jobs), else tasks over tasks per node, or
    the guess for a job on whole nodes, else 1."""
    cpt = max(job.cpus_per_task or 1, 1)
    tasks = max(job.tasks or -(-(job.cpus or cpt) // cpt), 1)
    exclusive = whole or "none" in job.shared
    if min_nodes is None:
        if job.tasks_per_node:
            min_nodes = -(-tasks // job.tasks_per_node)
        elif exclusive:
            min_nodes = job.node_count or 1
        else:
            min_nodes = 1
    min_nodes = max(min_nodes, 1)
    max_nodes = max(job.max_nodes or job.node_count or min_nodes, min_nodes)
    return _Ask(
        partitions=frozenset(p for p in job.partition.split(",") if p),
        tasks=max(tasks, min_nodes),
        cpus_per_task=cpt,
        min_nodes=min_nodes,
        max_nodes=max_nodes,
        tasks_per_node=job.tasks_per_node or 0,
        memory_per_cpu=job.memory_per_cpu_mib or 0,
        memory_per_node=job.memory_per_node_mib or 0,
        gres_per_node=tres_gres(job.tres_per_node),
        gres_per_task=tres_gres(job.tres_per_task),
        exclusive=exclusive,
        seconds=_limit_seconds(job),
        excluded=frozenset(job.excluded_nodes),
    )


def _modelled(job: SlurmJob) -> bool:
    return not (job.features or job.licenses or job.reservation or job.required_nodes)


def _ts(t: datetime | None) -> float | None:
    return None if t is None else t.timestamp()


def _at(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


class _Profile:
    """What one node holds over time: a step function, level ``i`` holding from
    ``times[i]`` until ``times[i + 1]`` (the first from the beginning of time)."""

    def __init__(self) -> None:
        self.times: list[float] = [-INF]
        self.cpus: list[int] = [0]
        self.memory: list[int] = [0]
        self.gres: list[dict[GresKind, int]] = [{}]
        self.holders: list[int] = [0]  # how many uses hold the node then

    def copy(self) -> _Profile:
        p = _Profile()
        p.times, p.cpus, p.memory = list(self.times), list(self.cpus), list(self.memory)
        p.gres, p.holders = list(self.gres), list(self.holders)
        return p

    def _split(self, t: float) -> int:
        """The index of the level starting at ``t`` (made by splitting the one holding
        then)."""
        i = bisect_right(self.times, t) - 1
        if self.times[i] == t:
            return i
        i += 1
        self.times.insert(i, t)
        self.cpus.insert(i, self.cpus[i - 1])
        self.memory.insert(i, self.memory[i - 1])
        self.gres.insert(i, self.gres[i - 1])
        self.holders.insert(i, self.holders[i - 1])
        return i

    def add(self, use: _Use) -> None:
        i, j = self._split(use.start), len(self.times)
        if use.end < INF:
            j = self._split(use.end)
        for k in range(i, j):
            self.cpus[k] += use.cpus
            self.memory[k] += use.memory
            self.holders[k] += 1
            if use.gres:
                g = dict(self.gres[k])
                for kind, n in use.gres.items():
                    g[kind] = g.get(kind, 0) + n
                self.gres[k] = g

    def most(
        self, t0: float, t1: float, over: float = INF
    ) -> tuple[int, int, dict[GresKind, int], int, int]:
        """The most CPUs, memory, GRES and holders in use at once during [t0, t1), and
        the levels looked at; it stops at a level of more than ``over`` CPUs (then
        nothing more fits)."""
        times, cpus_at, mem_at, gres_at, holders_at = (
            self.times,
            self.cpus,
            self.memory,
            self.gres,
            self.holders,
        )
        i = k = bisect_right(times, t0) - 1
        cpus = mem = holders = 0
        gres: dict[GresKind, int] = {}
        end = len(times)
        while k < end and times[k] < t1:
            c = cpus_at[k]
            if c > cpus:
                cpus = c
            if mem_at[k] > mem:
                mem = mem_at[k]
            if holders_at[k] > holders:
                holders = holders_at[k]
            for kind, n in gres_at[k].items():
                if n > gres.get(kind, 0):
                    gres[kind] = n
            k += 1
            if cpus > over:
                break
        return cpus, mem, gres, holders, k - i


class _Map:
    """Every node's uses over time, and the tests of a window on them."""

    def __init__(self, nodes: Sequence[_Node]) -> None:
        self.nodes = {n.name: n for n in nodes}
        self.order = [n.name for n in nodes]
        self.profiles: dict[str, _Profile] = {n.name: _Profile() for n in nodes}
        self.ends_on: dict[float, set[str]] = {}  # every finite end of a use: its nodes
        self.starts: set[float] = set()  # the starts of the jobs planned
        self.forever = False  # a use without an end (a job without a time limit)
        # the jobs planned so far in the walk: (start, end, nodes)
        self.planned: list[tuple[float, float, frozenset[str]]] = []
        self.work = 0

    def copy(self) -> _Map:
        m = _Map(list(self.nodes.values()))
        m.profiles = {k: p.copy() for k, p in self.profiles.items()}
        m.ends_on = {t: set(ns) for t, ns in self.ends_on.items()}
        m.starts, m.forever = set(self.starts), self.forever
        m.planned = list(self.planned)
        return m

    def hold(self, node: str, use: _Use) -> None:
        profile = self.profiles.get(node)
        if profile is None:
            return
        profile.add(use)
        if use.end < INF:
            self.ends_on.setdefault(use.end, set()).add(node)
        else:
            self.forever = True

    def ends(self, after: float) -> list[float]:
        """Every finite end of a use after ``after``: the times at which room appears."""
        return sorted(t for t in self.ends_on if t > after)

    def free(
        self, node: str, t0: float, t1: float, need: int = 0
    ) -> tuple[int, int, dict[GresKind, int], bool]:
        """What ``node`` has free throughout [t0, t1): CPUs, memory, GRES, and whether
        nothing at all holds it then (once fewer than ``need`` CPUs are free, the rest is
        not looked at: nothing fits)."""
        n = self.nodes[node]
        cpus, mem, gres, holders, looked = self.profiles[node].most(t0, t1, n.cpus - need)
        self.work += 1 + looked
        free_gres = {k: total - _used(gres, k) for k, total in n.gres.items()}
        return n.cpus - cpus, n.memory - mem, free_gres, holders == 0


def _used(used: Mapping[GresKind, int], kind: GresKind) -> int:
    """GRES of ``kind`` in use: an untyped use may sit on any type of its name."""
    return used.get(kind, 0) + (used.get(GresKind(kind.name), 0) if kind.type else 0)


def _have(free: Mapping[GresKind, int], kind: GresKind) -> int:
    """Free GRES for an ask of ``kind``: untyped takes any type of its name."""
    if kind.type:
        return free.get(kind, 0)
    return sum(n for k, n in free.items() if k.name == kind.name)


def _slots(ask: _Ask, node: _Node, free: tuple[int, int, dict[GresKind, int], bool]) -> int:
    """How many of ``ask``'s tasks ``node`` can take with ``free`` (0: none)."""
    cpus, mem, gres, idle = free
    if ask.exclusive and not idle:
        return 0
    if ask.memory_per_node and mem < ask.memory_per_node:
        return 0
    if any(_have(gres, k) < n for k, n in ask.gres_per_node.items()):
        return 0
    slots = cpus // ask.cpus_per_task
    if ask.memory_per_cpu:
        slots = min(slots, mem // (ask.memory_per_cpu * ask.cpus_per_task))
    for k, n in ask.gres_per_task.items():
        if n:
            slots = min(slots, _have(gres, k) // n)
    if ask.tasks_per_node:
        return ask.tasks_per_node if slots >= ask.tasks_per_node else 0
    return max(slots, 0)


def _place(ask: _Ask, m: _Map, t0: float, only: set[str] | None = None) -> dict[str, int] | None:
    """Tasks per node for ``ask`` starting at ``t0`` on ``m``, or None when it does not
    fit then. One node when one takes it all (the one with the least room left: the
    others keep theirs), else the nodes with the most room first; ``only``: only these
    nodes are tried."""
    t1 = t0 + ask.seconds
    room: list[tuple[int, int, str]] = []  # (slots, free cpus, node)
    for name in m.order if only is None else sorted(only, key=m.order.index):
        n = m.nodes[name]
        if not n.usable or name in ask.excluded or not (n.partitions & ask.partitions):
            continue
        free = m.free(name, t0, t1, n.cpus if ask.exclusive else ask.cpus_per_task)
        s = _slots(ask, n, free)
        if s > 0:
            room.append((s, free[0], name))
    if ask.min_nodes <= 1:
        whole = [r for r in room if r[0] >= ask.tasks]
        if whole:
            best = min(whole, key=lambda r: (r[1], m.order.index(r[2])))
            return {best[2]: ask.tasks}
    room.sort(key=lambda r: -r[0])
    out: dict[str, int] = {}
    left = ask.tasks
    for s, _, name in room:
        if left <= 0 and len(out) >= ask.min_nodes:
            break
        if len(out) >= ask.max_nodes:
            break
        # leave one task for each node still needed to reach min_nodes
        still = max(ask.min_nodes - len(out) - 1, 0)
        take = min(s, max(left - still, 1)) if ask.tasks_per_node == 0 else s
        out[name] = take
        left -= take
    if left > 0 or len(out) < ask.min_nodes:
        return None
    return out


def _hold(ask: _Ask, m: _Map, placed: Mapping[str, int], t0: float, *, whole: bool) -> None:
    """``ask`` holds what it took on ``placed`` from ``t0`` for its time limit; ``whole``:
    the nodes whole (backfill's reservation of a planned job)."""
    t1 = t0 + ask.seconds
    for name, tasks in placed.items():
        n = m.nodes[name]
        if whole or ask.exclusive:
            m.hold(name, _Use(t0, t1, n.cpus, n.memory, dict(n.gres)))
            continue
        cpus = tasks * ask.cpus_per_task
        mem = ask.memory_per_node or ask.memory_per_cpu * cpus
        gres = dict(ask.gres_per_node)
        for k, per in ask.gres_per_task.items():
            gres[k] = gres.get(k, 0) + per * tasks
        m.hold(name, _Use(t0, t1, cpus, mem, gres))


def _running_uses(job: SlurmJob, now: float) -> list[tuple[str, _Use]]:
    """What a running job holds, per node, until its end."""
    end = _ts(job.end_time)
    if job.state.primary != "RUNNING" or "COMPLETING" in job.state.flags:
        end = now
    elif _limit_seconds(job) == INF or end is None:
        end = INF
    end = max(end, now)
    start = min(_ts(job.start_time) or now, now)
    cpt = max(job.cpus_per_task or 1, 1)
    per_node = tres_gres(job.tres_per_node)
    per_task = tres_gres(job.tres_per_task)
    out: list[tuple[str, _Use]] = []
    if job.allocation:
        for a in job.allocation:
            cpus = a.cpus or 0
            gres = dict(per_node)
            for k, per in per_task.items():
                gres[k] = gres.get(k, 0) + per * max(cpus // cpt, 1)
            out.append((a.name, _Use(start, end, cpus, a.memory_mib or 0, gres)))
        return out
    nodes = job.nodes
    for name in nodes:
        cpus = -(-(job.cpus or 0) // max(len(nodes), 1))
        out.append((name, _Use(start, end, cpus, job.memory_per_node_mib or 0, dict(per_node))))
    return out


@dataclass
class _Pending:
    """A pending job (a hetjob: its components) in the walk."""

    job_id: int
    asks: list[_Ask]
    key: tuple[int, int, float, int]  # Slurm's order (ascending)
    plannable: bool
    modelled: bool


def _pending(
    job: SlurmJob,
    tiers: Mapping[str, int],
    min_nodes: Mapping[int, int],
    whole: Collection[int],
    sharing_known: bool = True,
) -> _Pending:
    comps = job.components
    parts = {p for c in comps for p in c.partition.split(",") if p}
    tier = max((tiers.get(p, 1) for p in parts), default=1)
    prio = min((c.priority or 0) for c in comps)
    submit = min((_ts(c.submit_time) or 0.0) for c in comps)
    plannable = (
        all(c.state.primary == "PENDING" and c.state_reason in PLANNABLE_REASONS for c in comps)
        and prio > 0
    )
    return _Pending(
        job.job_id,
        [_ask(c, min_nodes.get(c.job_id), c.job_id in whole) for c in comps],
        (-tier, -prio, submit, job.job_id),
        plannable,
        sharing_known and all(_modelled(c) for c in comps),
    )


def _fit(
    p: _Pending,
    m: _Map,
    now: float,
    whole: bool,
) -> float | None:
    """The earliest start of ``p`` on ``m`` (held there), None when none in finite time.

    In Slurm's order: not before the last start planned ahead of it on the nodes it may
    use (on shared nodes Slurm's backfill, reserving whole nodes for each job it plans,
    leaves a job behind no room to start first: measured, docs/benchmarks.md; where it
    does plan one sooner, Slurm's own plan is the earlier and is shown). The times tried
    are then each end of a use; past the first, only those at which a use ends on a node
    the job may use, or a job ahead starts: between two ends nothing frees, so a job that
    did not fit at the last one does not fit at a time that frees nothing of its nodes."""
    eligible = {
        name
        for name in m.order
        if m.nodes[name].usable
        and any(name not in a.excluded and m.nodes[name].partitions & a.partitions for a in p.asks)
    }
    # in order: not before a job planned ahead on these nodes starts
    floor = max((s for s, _, ns in m.planned if ns & eligible), default=now)
    for t in [now, *m.ends(now)]:
        if t < floor:
            continue
        changed = m.ends_on.get(t, set()) & eligible
        if t > now and not changed and t not in m.starts:
            continue
        # a job on one node fits now only on a node where room appeared (a hetjob's
        # other components may fit where nothing changed)
        only = changed if t > now and t not in m.starts and len(p.asks) == 1 else None
        held: list[tuple[_Ask, dict[str, int]]] = []
        trial = m.copy() if len(p.asks) > 1 else m
        for ask in p.asks:
            one = ask.max_nodes == 1 or ask.tasks == 1
            placed = _place(ask, trial, t, only if one else None)
            if placed is None:
                break
            held.append((ask, placed))
            if len(p.asks) > 1:
                _hold(ask, trial, placed, t, whole=whole and t > now)
        else:
            for ask, placed in held:
                _hold(ask, m, placed, t, whole=whole and t > now)
                m.planned.append((t, t + ask.seconds, frozenset(placed)))
                m.starts.add(t)
            m.work += trial.work if trial is not m else 0
            return t
        if trial is not m:
            m.work += trial.work
    return None


def _walk(
    queue: Sequence[_Pending], base: _Map, now: float, *, whole: bool, max_work: int
) -> dict[int, float | None]:
    """Plan ``queue`` in order on a copy of ``base``: each job's start (None: never in
    finite time); the jobs after the work bound are left out. Per CPU (``whole``
    false), a job that starts before a job planned ahead of it keeps off its nodes."""
    m = base.copy()
    out: dict[int, float | None] = {}
    for p in queue:
        if m.work > max_work:
            break
        out[p.job_id] = _fit(p, m, now, whole)
    return out


def plan_queue(
    jobs: Iterable[SlurmJob],
    nodes: Iterable[SlurmNode],
    now: datetime,
    want: Collection[int],
    *,
    tiers: Mapping[str, int] | None = None,
    min_nodes: Mapping[int, int] | None = None,
    whole: Collection[int] = (),
    sharing_known: bool = True,
    max_jobs: int = MAX_JOBS,
    max_work: int = MAX_WORK,
) -> dict[int, QueueStart]:
    """The bridge's plan of each ``want``-ed pending job (by job id; a hetjob by its
    leader's id) from Slurm's active ``jobs`` (a flat ``GET /jobs/`` list, or folded),
    ``nodes`` and partitions' PriorityTier ``tiers`` (absent: 1), at ``now``.
    ``min_nodes``: the minimum node count of the jobs whose the caller knows, ``whole``
    the jobs it knows ask whole nodes (the bridge's own, from their specs: Slurm's record
    does not have the one, nor in v0.0.45 the other). ``sharing_known`` false: the
    records do not say which jobs ask whole nodes, so a pending job the caller does not
    know (in ``min_nodes``) is not modelled (no plan behind it)."""
    t_now = now.timestamp()
    listed = fold_hetjobs(jobs)
    base = _Map([_node(n) for n in nodes])
    for job in listed:
        for c in job.components:
            if c.state.primary != "PENDING" and c.state.active:
                for name, use in _running_uses(c, t_now):
                    base.hold(name, use)
    known = min_nodes or {}
    queue = sorted(
        (
            _pending(j, tiers or {}, known, whole, sharing_known or j.job_id in known)
            for j in listed
            if j.state.primary == "PENDING"
        ),
        key=lambda p: p.key,
    )
    out: dict[int, QueueStart] = {}
    walked: list[_Pending] = []
    blocked = ""  # why the jobs from here on get no plan
    for p in queue:
        if not p.plannable:
            if p.job_id in want:
                out[p.job_id] = QueueStart(why=NOT_PLANNABLE)
            continue
        if blocked or not p.modelled or len(walked) >= max_jobs:
            if p.job_id in want:
                why = blocked or (TOO_DEEP if p.modelled else NOT_MODELLED)
                out[p.job_id] = QueueStart(why=why)
            if not p.modelled and not blocked:
                blocked = AHEAD_NOT_MODELLED
            elif len(walked) >= max_jobs:
                blocked = blocked or TOO_DEEP
            continue
        walked.append(p)
    wanted = [p for p in walked if p.job_id in want]
    if not wanted:
        return out
    walked = walked[: walked.index(wanted[-1]) + 1]  # later jobs never move earlier ones
    cpu = _walk(walked, base, t_now, whole=False, max_work=max_work)
    node = _walk(walked, base, t_now, whole=True, max_work=max_work)
    behind_infinite = _holds_forever(base)
    for p in wanted:
        if p.job_id not in cpu or p.job_id not in node:
            out[p.job_id] = QueueStart(why=TOO_DEEP)
            continue
        a, b = cpu[p.job_id], node[p.job_id]
        if a is None:
            unknowable = behind_infinite or any(
                math.isinf(q.asks[0].seconds) for q in walked[: walked.index(p)]
            )
            out[p.job_id] = QueueStart(
                unknowable=unknowable, why=UNKNOWABLE if unknowable else NEVER_FITS
            )
            continue
        out[p.job_id] = QueueStart(_at(a), None if b is None else _at(b))
    return out


def _holds_forever(m: _Map) -> bool:
    return m.forever
