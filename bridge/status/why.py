"""What ``slurm-bridge why NS/POD`` says: why a pod waits, in words, from Slurm's facts.

Pure: the CLI (:mod:`bridge.status.cli`) reads the pod, Slurm's job table and node list
and passes them in with the time; :func:`explain` answers an :class:`Explanation`,
:func:`render` prints it (docs/why-pending.md).

By Slurm's pending reason:

* ``Priority``: the jobs ahead of it in its partition (pending, higher priority, or the same
  and older) and their total size;
* ``Resources``: what the job asks per node, and which resource is short on how many of
  the partition's nodes (CPUs, memory, GRES by type, nodes down or drained), and the
  running jobs that hold them (how many, their size, the first planned end);
* a QOS or association limit (``QOSMax...``, ``AssocGrp...``): which limit, of which QOS or
  account; a reservation, a dependency, a hold, a begin time: which;
* a heterogeneous job: which component waits, and why.

Then when Slurm expects it to start, and how sure that is (a plan from Slurm's scheduler,
when it made it; no plan yet; or none possible behind a job without a time limit).

Tenants: other jobs are counted and sized only, never named (id, name, user), unless the
admin allows it (``whyNamesOtherJobs``); a job is the pod's tenant's own when the bridge's
back-link names the pod's namespace.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Literal

from bridge.devices.node_gres import GresKind, parse_slurm_gres, tres_gres
from bridge.errors import InvalidInput
from bridge.expected import (
    BY_BRIDGE,
    BY_SLURM,
    NO_LIMIT,
    NO_PLAN,
    PLANNED_BY,
    choose,
    human_in,
    job_start,
    plan_of,
    rfc3339,
    unlimited,
)
from bridge.queueplan import NO_QUEUE_PLAN, PLANNABLE_REASONS, UNUSABLE_NODE_STATES, plan_queue
from bridge.slurm.models import SlurmJob, SlurmNode, SlurmReservation
from bridge.status.limits import Accounting, limit_lines, limit_of, reservation_lines
from bridge.translate import kobj, names_any_pod, parse_admin_comment, pod_job_id
from bridge.wellknown import CONDITION_POD_SCHEDULED

WhyOutput = Literal["text", "json"]


# What a user can change, per kind of reason (the pod's annotations: docs/annotations.md).
CHANGE_SIZE = (
    "ask less: fewer nodes (slurmjob.slinky.slurm.net/min-nodes), fewer CPUs or less "
    "memory per pod, or no exclusive nodes (exclusive: false) fit sooner"
)
CHANGE_TIME = (
    "a shorter time limit (slurmjob.slinky.slurm.net/timelimit, minutes) lets Slurm's "
    "backfill start it in a gap before the jobs ahead"
)
CHANGE_HELD = (
    'a job held at priority 0 (slurmjob.slinky.slurm.net/priority: "0") starts once '
    "released: `scontrol release <job>` by its user or an admin"
)
HELD = frozenset({"JobHeldUser", "JobHeldAdmin"})
CHANGE_RESV = (
    "no reservation (slurmjob.slinky.slurm.net/reservation), if it need not run in one: "
    "it then waits for free nodes only"
)
CHANGE_QOS = (
    "another QOS (slurmjob.slinky.slurm.net/qos) or account, if your namespace's policy "
    "allows one, or fewer jobs of yours at once"
)


@dataclass(frozen=True)
class JobSize:
    """Jobs counted together: how many, and their nodes and CPUs."""

    jobs: int = 0
    nodes: int = 0
    cpus: int = 0

    def __str__(self) -> str:
        s = "" if self.jobs == 1 else "s"
        return f"{self.jobs} job{s} ({self.nodes} nodes, {self.cpus} CPUs)"


@dataclass(frozen=True)
class Explanation:
    """Why one pod waits."""

    pod: str  # namespace/name
    job_id: int | None
    state: str  # Slurm's job state, or "" without a job
    reason: str  # Slurm's reason (or the pod's message without a job)
    why: tuple[str, ...]  # the facts, in words
    expected_start: str = ""  # RFC 3339, "" no plan
    sureness: str = ""  # how sure Slurm is of it
    changes: tuple[str, ...] = ()  # what the user can change
    component: str = ""  # a hetjob's waiting component (``32+1``)
    ahead: JobSize | None = None  # Priority: the jobs ahead
    holding: JobSize | None = None  # Resources: the running jobs on the partition's nodes
    short: dict[str, int] = field(default_factory=dict)  # resource -> nodes short of it
    planned_by: str = ""  # who made the expected start: "slurm" or "slurm-bridge"

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        return {_camel(k): list(v) if isinstance(v, tuple) else v for k, v in d.items()}


def _camel(k: str) -> str:
    first, *rest = k.split("_")
    return first + "".join(w.title() for w in rest)


# --------------------------------------------------------------------------- facts
def _tenant_of(job: SlurmJob) -> str | None:
    """The namespace the bridge's back-link of ``job`` names, else None (a native job)."""
    parsed = parse_admin_comment(job.admin_comment)
    if parsed is None:
        return None
    gid, pods = parsed
    if gid is not None:
        return gid.namespace
    return pods[0].partition("/")[0] if pods else None


def _partitions(job: SlurmJob) -> set[str]:
    return {p for p in job.partition.split(",") if p}


def _size(jobs: Iterable[SlurmJob]) -> JobSize:
    listed = list(jobs)
    return JobSize(
        len(listed),
        sum(j.node_count or len(j.nodes) or 0 for j in listed),
        sum(j.cpus or 0 for j in listed),
    )


def _named(jobs: Iterable[SlurmJob], namespace: str, names_others: bool) -> list[str]:
    """The jobs by id, name and user, where the viewer may see them: the tenant's own
    always, the others only when the admin allows it."""
    out = []
    for j in jobs:
        if names_others or _tenant_of(j) == namespace:
            who = f", user {j.user}" if j.user else ""
            out.append(f"job {j.job_id} ({j.name}{who}): {j.node_count or 0} nodes, {j.cpus} CPUs")
    return out


def _free_gres(node: SlurmNode) -> dict[GresKind, int]:
    try:
        total = parse_slurm_gres(node.gres)
        used = parse_slurm_gres(node.gres_used)
    except InvalidInput:
        return {}
    return {k: n - used.get(k, 0) for k, n in total.items()}


def _need_per_node(job: SlurmJob) -> tuple[int, int, dict[GresKind, int]]:
    """(CPUs, memory MiB, GRES) the job asks of each of its nodes."""
    nodes = max(job.node_count or 1, 1)
    cpus = max(job.minimum_cpus_per_node or 0, -(-(job.cpus or 0) // nodes))
    mem = job.memory_per_node_mib or (job.memory_per_cpu_mib or 0) * cpus
    return cpus, mem, tres_gres(job.tres_per_node, field_name="tres_per_node")


def _exclusive(job: SlurmJob) -> bool:
    return "none" in job.shared


def _lacks(job: SlurmJob, node: SlurmNode, need: tuple[int, int, dict[GresKind, int]]) -> list[str]:
    """What ``node`` lacks to take a node's share ``need`` of ``job`` now ([]: it can)."""
    if UNUSABLE_NODE_STATES & node.state:
        return ["usable state (down, drained or reserved)"]
    cpus, mem, gres = need
    out = []
    if _exclusive(job) and node.alloc_cpus:
        out.append("idle node (exclusive)")
    elif node.cpus - node.alloc_cpus < cpus:
        out.append("CPUs")
    if mem and node.real_memory_mib - node.alloc_memory_mib < mem:
        out.append("memory")
    free = _free_gres(node)
    out += [f"GRES {kind}" for kind, count in gres.items() if free.get(kind, 0) < count]
    return out


def _short(
    job: SlurmJob, nodes: Sequence[SlurmNode]
) -> tuple[dict[str, int], int, tuple[int, int, dict[GresKind, int]]]:
    """Per resource, how many of the partition's ``nodes`` lack it for the job now; how
    many could take it; and its per-node need."""
    need = _need_per_node(job)
    short: dict[str, int] = {}
    fit = 0
    for n in nodes:
        lacks = _lacks(job, n, need)
        for what in lacks:
            short[what] = short.get(what, 0) + 1
        fit += not lacks
    return short, fit, need


def _unit(node: SlurmNode) -> str:
    """The node's block or leaf switch: the last unit of its first ``Topology=`` entry
    (``net:block-0`` -> ``block-0``, ``net:spine-0:leaf-1`` -> ``leaf-1``); "" none."""
    first = node.topology.split(",")[0]
    return first.rsplit(":", 1)[1] if ":" in first else ""


def _topology(
    job: SlurmJob, nodes: Sequence[SlurmNode], need: tuple[int, int, dict[GresKind, int]]
) -> tuple[list[str], dict[str, int]]:
    """A job's topology request (``--segment``, ``--switches``) against the free nodes of
    each block or leaf switch of its partition's ``nodes``: the lines, and the short
    resource (what is short -> how many nodes)."""
    segment, switches = job.segment_size, job.required_switches
    if segment is None and switches is None:
        return [], {}
    want = max(job.node_count or 1, 1)
    asks = []
    if segment is not None:
        asks.append(f"segments of {min(segment, want)} nodes, each inside one block")
    if switches is not None:
        asks.append(f"at most {switches} leaf switch{'es' if switches != 1 else ''}")
    head = f"topology: it asks {' and '.join(asks)}"
    units: dict[str, list[bool]] = {}
    for n in nodes:
        if unit := _unit(n):
            units.setdefault(unit, []).append(not _lacks(job, n, need))
    if not units:
        return [
            f"{head}; the nodes of its partition carry no Topology= in Slurm, so which "
            "block or switch has room is not known here (`scontrol show topology`)"
        ], {}
    free = {u: sum(fits) for u, fits in units.items()}
    room = ", ".join(f"{u}: {free[u]} of {len(units[u])} nodes free" for u in sorted(units))
    short: dict[str, int] = {}
    if segment is not None:
        size = min(segment, want)
        wanted = -(-want // size)
        fits = sum(f // size for f in free.values())
        if fits < wanted:
            most = max(free.values())
            short[f"a block with {size} free nodes"] = (
                size - most if wanted == 1 else (wanted - fits) * size
            )
    if switches is not None:
        best_units = sorted(free, key=lambda u: -free[u])[:switches]
        most = sum(free[u] for u in best_units)
        if most < want:
            under = f"{switches} leaf switch{'es' if switches != 1 else ''}"
            short[f"{want} free nodes under {under}"] = want - most
    return [f"{head}; {room}"], short


def _words(reason: str) -> str:
    """``QOSMaxGRESPerUser`` -> ``max GRES per user``: a limit's name in words."""
    body = re.sub(r"^(QOS|Assoc)", "", reason)
    body = re.sub(r"Limit$", "", body)
    words = re.findall(r"GRES|TRES|CPU|[A-Z][a-z]+|[a-z]+|[A-Z]+(?![a-z])", body)
    said = {"grp": "group", "cpu": "CPU", "mem": "memory"}
    return " ".join(w if w.isupper() else said.get(w.lower(), w.lower()) for w in words)


def _pod_message(pod: Mapping[str, Any]) -> str:
    for c in kobj.sequence(pod, "status", "conditions"):
        if kobj.text(c, "type") == CONDITION_POD_SCHEDULED:
            return kobj.text(c, "message") or kobj.text(c, "reason")
    return ""


def names_pod(job: SlurmJob, pod: Mapping[str, Any], mcs_label: str | None) -> bool:
    """The job (one of its components) is this cluster's bridge's and its back-link names
    this very pod (:func:`bridge.translate.names_any_pod`): the proof a job-id label needs,
    since anyone who can create a pod can write one."""
    return any(
        names_any_pod(c.admin_comment, c.mcs_label, [pod], mcs_label) for c in job.components
    )


def find_job(
    pod: Mapping[str, Any], jobs: Sequence[SlurmJob], mcs_label: str | None = None
) -> SlurmJob | None:
    """The pod's job: the one its job-id label names when that job's back-link names the
    pod, else the active bridge job whose back-link names it (a pending job's pods are
    not always labelled yet). A label naming another job (another tenant's, a native
    one) is not believed: ``why`` never explains a job that is not the pod's."""
    job_id = pod_job_id(pod)
    labelled = next((j for j in jobs if j.job_id == job_id), None) if job_id else None
    if labelled is not None and names_pod(labelled, pod, mcs_label):
        return labelled
    named = [j for j in jobs if j.state.active and names_pod(j, pod, mcs_label)]
    return max(named, key=lambda j: j.job_id, default=None)


def _ahead(other: SlurmJob, job: SlurmJob) -> bool:
    """``other`` is pending ahead of ``job``: a higher priority, or the same and older."""
    if other.state.primary != "PENDING":
        return False
    theirs, mine = other.priority or 0, job.priority or 0
    return theirs > mine or (theirs == mine and other.job_id < job.job_id)


# --------------------------------------------------------------------------- explain
def explain(
    pod: Mapping[str, Any],
    job: SlurmJob | None,
    jobs: Sequence[SlurmJob],
    nodes: Sequence[SlurmNode],
    *,
    now: datetime,
    names_others: bool = False,
    accounting: Accounting | None = None,
    reservations: Sequence[SlurmReservation] | None = None,
) -> Explanation:
    """Why ``pod`` waits: ``job`` is its Slurm job (a hetjob: its leader with every
    component), ``jobs`` Slurm's active jobs, ``nodes`` Slurm's nodes; ``accounting``
    slurmdbd's QOS and associations (read for a limit reason, None: not read),
    ``reservations`` Slurm's (read for a reservation or unavailable nodes)."""
    key = kobj.pod_key(pod)
    namespace = kobj.namespace(pod)
    if kobj.text(pod, "spec", "nodeName"):
        node = kobj.text(pod, "spec", "nodeName")
        return Explanation(key, job.job_id if job else None, "RUNNING", "", (f"bound to {node}",))
    if job is None:
        message = _pod_message(pod)
        said = message or "the scheduler has not looked at it yet"
        return Explanation(key, None, "", message, (f"no Slurm job yet: {said}",))
    waiting = next((c for c in job.components if c.state.primary != "RUNNING"), job)
    component = ""
    if job.het_components:
        offset = waiting.het_job_offset if waiting.het_job_offset is not None else 0
        component = f"{job.job_id}+{offset}"
    state, reason = waiting.state.primary, waiting.state_reason or "None"
    if state != "PENDING":
        return Explanation(
            key,
            job.job_id,
            state,
            reason,
            (f"Slurm job {job.job_id} is {state}",),
            component=component,
        )
    why: list[str] = []
    if component:
        why.append(
            f"heterogeneous job: component {component} of {len(job.components)} waits "
            "(the components start together)"
        )
    others = [j for j in jobs if j.job_id not in {c.job_id for c in job.components}]
    parts = _partitions(waiting)
    in_part = [j for j in others if _partitions(j) & parts]
    running = [j for j in in_part if j.state.primary == "RUNNING"]
    part_nodes = [n for n in nodes if parts & set(n.partitions)]
    part_name = ",".join(sorted(parts)) or "?"
    changes: list[str] = []
    ahead_size: JobSize | None = None
    holding: JobSize | None = None
    short: dict[str, int] = {}

    if reason == "Priority":
        mine = waiting.priority or 0
        ahead = [
            j
            for j in in_part
            if j.state.primary == "PENDING"
            and (
                (j.priority or 0) > mine
                or ((j.priority or 0) == mine and j.job_id < waiting.job_id)
            )
        ]
        ahead_size = _size(ahead)
        why.append(
            f"{ahead_size} ahead of it in partition {part_name} (a higher priority than its "
            f"{mine}, or the same and queued before it)"
        )
        why += [f"  {line}" for line in _named(ahead, namespace, names_others)]
        changes += [CHANGE_TIME, CHANGE_SIZE]
    if reason in ("Resources", "Priority", "BadConstraints") or reason.startswith(
        ("ReqNodeNotAvail", "No suitable topology")
    ):
        short, fit, (cpus, mem, gres) = _short(waiting, part_nodes)
        asks = (
            [f"{cpus} CPUs"]
            + ([f"{mem} MiB"] if mem else [])
            + [f"{n} {k}" for k, n in gres.items()]
        )
        if _exclusive(waiting):
            asks.append("the whole node")
        want = waiting.node_count or 1
        why.append(
            f"it asks {want} node{'s' if want != 1 else ''} with {', '.join(asks)} each; of the "
            f"{len(part_nodes)} nodes of partition {part_name}, {fit} can take that now"
        )
        for what, n in sorted(short.items(), key=lambda kv: -kv[1]):
            why.append(f"  {n} node{'s' if n != 1 else ''} short of {what}")
        topo, topo_short = _topology(waiting, part_nodes, (cpus, mem, gres))
        why += topo
        for what, n in topo_short.items():
            why.append(f"  {n} node{'s' if n != 1 else ''} short of {what}")
        short |= topo_short
        holding = _size(running)
        if running:
            ends = [j.end_time for j in running if j.end_time is not None and not unlimited(j)]
            first = f"; the first ends by {rfc3339(min(ends))} (its time limit)" if ends else ""
            forever = sum(1 for j in running if unlimited(j))
            if forever:
                first += f"; {forever} of them without a time limit (INFINITE)"
            why.append(f"{holding} running in partition {part_name}{first}")
            why += [f"  {line}" for line in _named(running, namespace, names_others)]
        if reason != "Priority":
            changes += [CHANGE_TIME, CHANGE_SIZE]
        if reason.startswith("ReqNodeNotAvail"):
            names = [n.name for n in part_nodes]
            why += reservation_lines(waiting, reservations or (), names, now)
    elif (limit := limit_of(reason)) is not None or reason.startswith(("QOS", "Assoc")):
        assoc = reason.startswith("Assoc")
        which = f"account {waiting.account}" if assoc else f"QOS {waiting.qos}"
        said = f"a limit of {which} is reached: {_words(reason)} ({reason})"
        if limit is not None and accounting is not None:
            why.append(said)
            why += [f"  {line}" for line in limit_lines(limit, waiting, others, accounting)]
        else:
            why.append(f"{said}; `sacctmgr show {'assoc' if assoc else 'qos'}` shows its value")
        if limit is None or accounting is None or accounting.error:
            theirs = [j for j in others if j.user == waiting.user and j.state.primary == "RUNNING"]
            if waiting.user:
                why.append(f"{_size(theirs)} of the same Slurm user running")
        changes.append(CHANGE_QOS)
    elif reason in ("Dependency", "DependencyNeverSatisfied"):
        why.append(f"it waits for other jobs: {waiting.dependency or '?'}")
    elif reason in HELD:
        why.append("it is held (priority 0): it starts only once released")
        changes.append(CHANGE_HELD)
    elif reason == "BeginTime":
        begin = rfc3339(waiting.eligible_time) if waiting.eligible_time else "?"
        why.append(f"it may not start before {begin}")
    elif reason.startswith(("Reservation", "Resv")) or waiting.reservation:
        why.append(f"it waits for reservation {waiting.reservation or '?'} ({reason})")
        if reservations is not None:
            why += [f"  {line}" for line in reservation_lines(waiting, reservations, (), now)]
        changes.append(CHANGE_RESV)
    elif reason in ("None", ""):
        why.append("Slurm has not looked at it yet (its next scheduling pass)")
    else:
        why.append(
            f"Slurm's reason: {reason}"
            + (f": {waiting.state_description}" if waiting.state_description else "")
        )
    if waiting.reservation and not any("reservation" in w for w in why):
        why.append(f"it runs in reservation {waiting.reservation}")

    plan = plan_of(job_start(job), now)
    if plan.start is not None and reason in PLANNABLE_REASONS:
        # the bridge's per-CPU plan of the same queue, where Slurm's reserves whole nodes
        queue = plan_queue(jobs, nodes, now, {job.job_id}).get(job.job_id, NO_QUEUE_PLAN)
        plan = choose(plan, queue.start, queue.whole)
    if plan.start is not None and plan.by == BY_BRIDGE:
        expected = rfc3339(plan.start)
        ahead_s = (plan.start - now).total_seconds()
        slurms = rfc3339(plan.slurm_start) if plan.slurm_start else "?"
        sure = (
            f"slurm-bridge expects it to start at {expected} ({human_in(ahead_s)}): "
            f"{PLANNED_BY[BY_BRIDGE]}, per CPU, assuming every job ahead runs to its time "
            f"limit; Slurm's backfill plans {slurms} (it reserves whole nodes for the jobs "
            "it plans, in time slots of bf_resolution)"
        )
    elif plan.start is not None:
        expected = rfc3339(plan.start)
        when = waiting.last_sched_evaluation
        at = f" at {rfc3339(when)}" if when else ""
        ahead_s = (plan.start - now).total_seconds()
        sure = (
            f"Slurm expects it to start at {expected} ({human_in(ahead_s)}): "
            f"{PLANNED_BY[BY_SLURM]}, made{at}, assuming every job ahead runs to its time "
            "limit"
        )
    else:
        expected = ""
        sure = NO_PLAN + (NO_LIMIT if plan.unknowable else "")
        # Slurm plans no start past a job without a time limit: name what blocks the plan
        before = [j for j in in_part if j.state.primary == "RUNNING" or _ahead(j, waiting)]
        infinite = [j for j in before if unlimited(j)]
        if infinite:
            sure += (
                f"; Slurm cannot plan past {_size(infinite)} running or ahead of it in "
                f"partition {part_name} without a time limit (INFINITE)"
            )
            sure += "".join(f"; {line}" for line in _named(infinite, namespace, names_others))
        elif reason in HELD or reason.startswith("Dependency"):
            sure += ": Slurm plans no start for a job that is held or waits for other jobs"
        elif reason.startswith(("Reservation", "Resv")):
            resv = waiting.reservation or "?"
            found = next((r for r in reservations or () if r.name == resv), None)
            at = (
                f"at {rfc3339(found.start_time)}"
                if found is not None and found.start_time is not None
                else f"(`scontrol show res {resv}`)"
            )
            sure += f": Slurm plans none before its reservation {resv} starts {at}"
        elif not plan.unknowable:
            sure += (
                " (no backfill pass has planned it: it is new, or further down the queue "
                "than bf_max_job_test)"
            )
    return Explanation(
        key,
        job.job_id,
        state,
        reason,
        tuple(why),
        expected,
        sure,
        tuple(dict.fromkeys(changes)),
        component,
        ahead_size,
        holding,
        short,
        plan.by if plan.start is not None else "",
    )


def render(e: Explanation, output: WhyOutput = "text") -> str:
    if output == "json":
        return json.dumps(e.to_json(), indent=2)
    head = f"Pod {e.pod}"
    if e.job_id is not None:
        head += f": Slurm job {e.job_id} is {e.state}" + (f" ({e.reason})" if e.reason else "")
    lines = [head]
    lines += [f"  {w}" for w in e.why]
    if e.sureness:
        lines += ["When:", f"  {e.sureness}"]
    if e.changes:
        lines += ["What you can change:"] + [f"  - {c}" for c in e.changes]
    return "\n".join(lines)
