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
* each pending job starts at the earliest time at which enough of its partitions' usable
  nodes have its CPUs (tasks x CPUs per task, between its minimum and maximum node
  count, tasks per node), memory (per CPU or per node) and GRES (per node or per task)
  free for its whole time limit; whole free nodes for a job that asks exclusive nodes;
  then it holds what it took there for its window (the next jobs plan around it);
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
MAX_WORK = 200_000  # node-window tests (about a second of CPU at most)

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


def _ask(job: SlurmJob, min_nodes: int | None = None) -> _Ask:
    """What ``job`` asks. Its minimum node count is not in Slurm's record (a pending job's
    ``node_count`` is Slurm's guess from its last test, ``node_cnt_wag``): ``min_nodes``
    when the caller knows it (the bridge's own jobs), else tasks over tasks per node, or
    the guess for a job on whole nodes, else 1."""
    cpt = max(job.cpus_per_task or 1, 1)
    tasks = max(job.tasks or -(-(job.cpus or cpt) // cpt), 1)
    exclusive = "none" in job.shared
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


class _Map:
    """Every node's uses over time, and the tests of a window on them."""

    def __init__(self, nodes: Sequence[_Node]) -> None:
        self.nodes = {n.name: n for n in nodes}
        self.order = [n.name for n in nodes]
        self.uses: dict[str, list[_Use]] = {n.name: [] for n in nodes}
        # the jobs planned so far in the walk: (start, end, nodes)
        self.planned: list[tuple[float, float, frozenset[str]]] = []
        self.work = 0

    def copy(self) -> _Map:
        m = _Map(list(self.nodes.values()))
        m.uses = {k: list(v) for k, v in self.uses.items()}
        m.planned = list(self.planned)
        return m

    def reserved(self, t0: float, t1: float) -> set[str]:
        """The nodes of jobs planned ahead that start after ``t0`` and before ``t1``: a
        job starting at ``t0`` jumps them, which backfill allows only off their nodes
        (it reserves them whole for the jobs it plans)."""
        return {n for s, _, ns in self.planned if t0 < s < t1 for n in ns}

    def hold(self, node: str, use: _Use) -> None:
        if node in self.uses:
            self.uses[node].append(use)

    def ends(self, after: float) -> list[float]:
        """Every finite end of a use after ``after``: the times at which room appears."""
        return sorted({u.end for us in self.uses.values() for u in us if after < u.end < INF})

    def free(self, node: str, t0: float, t1: float) -> tuple[int, int, dict[GresKind, int], bool]:
        """What ``node`` has free throughout [t0, t1): CPUs, memory, GRES, and whether
        nothing at all holds it then."""
        self.work += 1
        n = self.nodes[node]
        inside = [u for u in self.uses[node] if u.start < t1 and u.end > t0]
        if not inside:
            return n.cpus, n.memory, dict(n.gres), True
        cpus = mem = 0
        gres: dict[GresKind, int] = {}
        for c in {t0, *(u.start for u in inside if u.start > t0)}:
            at = [u for u in inside if u.start <= c < u.end]
            cpus = max(cpus, sum(u.cpus for u in at))
            mem = max(mem, sum(u.memory for u in at))
            for k in {k for u in at for k in u.gres}:
                gres[k] = max(gres.get(k, 0), sum(u.gres.get(k, 0) for u in at))
        free_gres = {k: total - _used(gres, k) for k, total in n.gres.items()}
        return n.cpus - cpus, n.memory - mem, free_gres, False


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


def _place(ask: _Ask, m: _Map, t0: float, jumps: bool = False) -> dict[str, int] | None:
    """Tasks per node for ``ask`` starting at ``t0`` on ``m``, or None when it does not
    fit then. One node when one takes it all (the one with the least room left: the
    others keep theirs), else the nodes with the most room first. ``jumps``: not on the
    nodes of a job planned ahead that starts later (backfill's rule)."""
    t1 = t0 + ask.seconds
    off = m.reserved(t0, t1) if jumps else set()
    room: list[tuple[int, int, str]] = []  # (slots, free cpus, node)
    for name in m.order:
        n = m.nodes[name]
        if (
            not n.usable
            or name in ask.excluded
            or name in off
            or not (n.partitions & ask.partitions)
        ):
            continue
        free = m.free(name, t0, t1)
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


def _pending(job: SlurmJob, tiers: Mapping[str, int], min_nodes: Mapping[int, int]) -> _Pending:
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
        [_ask(c, min_nodes.get(c.job_id)) for c in comps],
        (-tier, -prio, submit, job.job_id),
        plannable,
        all(_modelled(c) for c in comps),
    )


def _fit(p: _Pending, m: _Map, now: float, whole: bool, jumps: bool = False) -> float | None:
    """The earliest start of ``p`` on ``m`` (held there), None when none in finite time."""
    for t in [now, *m.ends(now)]:
        held: list[tuple[_Ask, dict[str, int]]] = []
        trial = m.copy() if len(p.asks) > 1 else m
        for ask in p.asks:
            placed = _place(ask, trial, t, jumps)
            if placed is None:
                break
            held.append((ask, placed))
            if len(p.asks) > 1:
                _hold(ask, trial, placed, t, whole=whole and t > now)
        else:
            for ask, placed in held:
                _hold(ask, m, placed, t, whole=whole and t > now)
                m.planned.append((t, t + ask.seconds, frozenset(placed)))
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
        out[p.job_id] = _fit(p, m, now, whole, jumps=not whole)
    return out


def plan_queue(
    jobs: Iterable[SlurmJob],
    nodes: Iterable[SlurmNode],
    now: datetime,
    want: Collection[int],
    *,
    tiers: Mapping[str, int] | None = None,
    min_nodes: Mapping[int, int] | None = None,
    max_jobs: int = MAX_JOBS,
    max_work: int = MAX_WORK,
) -> dict[int, QueueStart]:
    """The bridge's plan of each ``want``-ed pending job (by job id; a hetjob by its
    leader's id) from Slurm's active ``jobs`` (a flat ``GET /jobs/`` list, or folded),
    ``nodes`` and partitions' PriorityTier ``tiers`` (absent: 1), at ``now``.
    ``min_nodes``: the minimum node count of the jobs whose the caller knows (the
    bridge's own, from their specs: Slurm's record does not have it)."""
    t_now = now.timestamp()
    listed = fold_hetjobs(jobs)
    base = _Map([_node(n) for n in nodes])
    for job in listed:
        for c in job.components:
            if c.state.primary != "PENDING" and c.state.active:
                for name, use in _running_uses(c, t_now):
                    base.hold(name, use)
    queue = sorted(
        (_pending(j, tiers or {}, min_nodes or {}) for j in listed if j.state.primary == "PENDING"),
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
    return any(math.isinf(u.end) for us in m.uses.values() for u in us)
