"""What ``slurm-bridge status`` shows: the pure join of pods and Slurm jobs, and its rendering.

No I/O, no clock: the caller lists the pods (one list) and Slurm's jobs (one ``GET /jobs/``)
and passes them in with the time. Either side may be missing (``None``: it could not be
read); the report then shows what the other side says and carries the error.

Joining, in the order tried (the links the bridge writes on both sides):

1. a pod's label ``scheduler.slinky.slurm.net/slurm-jobid`` -> that job; the job's
   ``admin_comment`` names the group (bound pods);
2. an active job whose ``admin_comment`` lists the pod (``ns/name``) -> that job and its
   group (pods waiting in Slurm: not labelled until bound);
3. otherwise the pod's group is worked out from its own labels and owner references
   (:func:`bridge.translate.group_of`, without reading the owners), and it has no job.

Mismatches: active bridge jobs none of whose pods exists (the controller's sweep cancels
them), and pods not finished whose job Slurm no longer lists or has ended.

A heterogeneous job (docs/hetjob.md) is one row, its pods carrying the leader's id; a
line per component (``32+0``, ``32+1``: squeue's names) follows with its state and nodes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Literal

from bridge.expected import BY_BRIDGE, Plan, job_start, parse_rfc3339, plan_of, rfc3339, short_in
from bridge.models import GroupId
from bridge.slurm.hostlist import HostlistError, compress
from bridge.slurm.models import SlurmJob, fold_hetjobs
from bridge.status.why import names_pod
from bridge.translate import group_of, kobj, parse_admin_comment, pod_belongs, pod_job_id
from bridge.translate.settings import TranslateSettings
from bridge.wellknown import (
    ANNOTATION_EXPECTED_START,
    ANNOTATION_EXPECTED_START_BY,
    CONDITION_POD_SCHEDULED,
)

Output = Literal["table", "wide", "json"]
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
NONE = "-"
# Slurm's state_reason of a job that has none.
SLURM_NO_REASON = "None"
# Shown instead of a state when the link names a job Slurm no longer lists.
GONE = "gone"
# Shown instead of a state when Slurm could not be read.
UNKNOWN = "?"


@dataclass(frozen=True)
class GroupRow:
    """One workload group: its pods and its Slurm job."""

    namespace: str
    kind: str
    name: str
    pods_bound: int | None  # None: Kubernetes could not be read
    pods_total: int | None
    job_id: int | None
    state: str  # Slurm's job state, GONE, UNKNOWN or NONE (no job yet)
    reason: str  # Slurm's reason; without a job, the pods' PodScheduled message
    nodes: str  # Slurm's hostlist of the job's nodes
    age_seconds: float | None
    partition: str = ""
    pods: tuple[str, ...] = ()
    # a heterogeneous job's components (docs/hetjob.md), leader first; () for a plain job
    components: tuple[ComponentRow, ...] = ()
    # a pending job: when Slurm plans to start it (RFC 3339; "" none), how far ahead that
    # was at the read (seconds), and whether Slurm can plan it at all (docs/why-pending.md)
    expected_start: str = ""
    expected_in_seconds: float | None = None
    expected: str = NONE
    expected_by: str = ""  # who planned it: "slurm" (backfill) or "slurm-bridge"

    @property
    def group(self) -> str:
        return f"{self.kind}/{self.name}"


@dataclass(frozen=True)
class ComponentRow:
    """One component of a group's heterogeneous job, as squeue names it (``32+1``)."""

    component: str
    job_id: int
    state: str
    reason: str
    nodes: str


@dataclass(frozen=True)
class OrphanJob:
    """An active bridge job in Slurm none of whose pods exists."""

    job_id: int
    state: str
    group: str  # Kind/namespace/name, or the pods' namespace for upstream's form
    pods: tuple[str, ...]
    nodes: str
    partition: str


@dataclass(frozen=True)
class StrayPod:
    """A pod not finished whose Slurm job is gone or has ended."""

    namespace: str
    name: str
    job_id: int
    why: str


@dataclass(frozen=True)
class Report:
    groups: tuple[GroupRow, ...]
    orphan_jobs: tuple[OrphanJob, ...] = ()
    stray_pods: tuple[StrayPod, ...] = ()
    errors: tuple[str, ...] = ()
    all_namespaces: bool = False
    namespace: str = ""

    def to_json(self) -> dict[str, Any]:
        """camelCase keys, as Kubernetes tools write JSON."""
        return {
            "namespace": None if self.all_namespaces else self.namespace,
            "groups": [
                _camel(
                    asdict(g)
                    | {
                        "group": g.group,
                        "reason": _reason_or_null(g.reason),
                        "components": [
                            _camel(asdict(c) | {"reason": _reason_or_null(c.reason)})
                            for c in g.components
                        ],
                    }
                )
                for g in self.groups
            ],
            "orphanJobs": [_camel(asdict(j)) for j in self.orphan_jobs],
            "strayPods": [_camel(asdict(p)) for p in self.stray_pods],
            "errors": list(self.errors),
        }


def _reason_or_null(reason: str) -> str | None:
    """A row's reason for JSON: null where there is none (Slurm's "None", or the table's
    placeholder), never a string a script must know to compare against."""
    return None if reason in (NONE, SLURM_NO_REASON) else reason


def _camel(d: Mapping[str, Any]) -> dict[str, Any]:
    def key(k: str) -> str:
        first, *rest = k.split("_")
        return first + "".join(w.title() for w in rest)

    return {key(k): list(v) if isinstance(v, tuple) else v for k, v in d.items()}


@dataclass
class _Group:
    namespace: str
    kind: str
    name: str
    pods: list[Mapping[str, Any]] = field(default_factory=list)
    jobs: set[int] = field(default_factory=set)  # jobs linked to its pods


# --------------------------------------------------------------------------- helpers
def _finished(pod: Mapping[str, Any]) -> bool:
    return kobj.text(pod, "status", "phase") in TERMINAL_PHASES or bool(
        kobj.get(pod, "metadata", "deletionTimestamp")
    )


def _waiting_message(pods: Iterable[Mapping[str, Any]]) -> str:
    """The first unbound pod's ``PodScheduled=False`` message (the bridge's words)."""
    for p in pods:
        if kobj.text(p, "spec", "nodeName"):
            continue
        for c in kobj.sequence(p, "status", "conditions"):
            if kobj.text(c, "type") == CONDITION_POD_SCHEDULED and kobj.text(c, "status") != "True":
                return kobj.text(c, "message") or kobj.text(c, "reason")
    return ""


def _created(obj: Mapping[str, Any]) -> datetime | None:
    text = kobj.text(obj, "metadata", "creationTimestamp")
    try:
        return datetime.fromisoformat(text) if text else None
    except ValueError:
        return None


def hostlist(nodes: Sequence[str]) -> str:
    if not nodes:
        return NONE
    try:
        return compress(nodes)
    except HostlistError:
        return ",".join(nodes)


def _in_scope(namespace: str, scope: str | None) -> bool:
    return scope is None or namespace == scope


@dataclass(frozen=True)
class _BridgeJob:
    job: SlurmJob
    group: GroupId | None
    pods: tuple[str, ...]

    @property
    def namespace(self) -> str:
        if self.group is not None:
            return self.group.namespace
        return self.pods[0].partition("/")[0] if self.pods else ""

    @property
    def group_key(self) -> str:
        return self.group.key if self.group is not None else f"Pod/{self.namespace}/?"


def bridge_jobs(jobs: Iterable[SlurmJob], mcs_label: str) -> dict[int, _BridgeJob]:
    """Jobs whose admin_comment is the bridge's back-link (and not another bridge's); a
    hetjob (folded: its leader) names the pods of every component."""
    out: dict[int, _BridgeJob] = {}
    for job in jobs:
        parsed = parse_admin_comment(job.admin_comment)
        if parsed is None or (mcs_label and job.mcs_label and job.mcs_label != mcs_label):
            continue
        pods = list(parsed[1])
        for c in job.het_components:
            more = parse_admin_comment(c.admin_comment)
            pods += more[1] if more is not None else ()
        out[job.job_id] = _BridgeJob(job, parsed[0], tuple(pods))
    return out


def _expected(
    job: SlurmJob | None, now: datetime, pods: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """The EXPECTED fields of a row: Slurm's plan for a pending job (bridge.expected), or
    the bridge's per-CPU plan where its pods show that one (their annotations say so:
    the scheduler made it from Slurm's whole queue, which this view does not read)."""
    if job is None or not any(c.state.primary == "PENDING" for c in job.components):
        return {}
    plan = plan_of(job_start(job), now)
    for p in pods:
        notes = kobj.annotations(p)
        bridge = parse_rfc3339(notes.get(ANNOTATION_EXPECTED_START))
        if (
            plan.start is not None
            and bridge
            and notes.get(ANNOTATION_EXPECTED_START_BY) == BY_BRIDGE
        ):
            plan = Plan(bridge, by=BY_BRIDGE, slurm_start=plan.start)
            break
    if plan.start is None:
        return {"expected": "unknowable" if plan.unknowable else "unplanned"}
    ahead = (plan.start - now).total_seconds()
    return {
        "expected_start": rfc3339(plan.start),
        "expected_in_seconds": round(ahead),
        "expected": short_in(ahead),
        "expected_by": plan.by,
    }


def _het_summary(job: SlurmJob) -> tuple[str, str]:
    """(state, reason) of a hetjob as one unit: its first component that ended, else the
    first not running, else the leader's (as the scheduler shows it)."""
    comps = job.components
    pick = next((c for c in comps if not c.state.active), None) or next(
        (c for c in comps if c.state.primary != "RUNNING"), job
    )
    return pick.state.primary, pick.state_reason or NONE


def _components(job: SlurmJob) -> tuple[ComponentRow, ...]:
    if not job.het_components:
        return ()
    return tuple(
        ComponentRow(
            f"{job.job_id}+{c.het_job_offset if c.het_job_offset is not None else i}",
            c.job_id,
            c.state.primary,
            c.state_reason or NONE,
            hostlist(c.nodes),
        )
        for i, c in enumerate(job.components)
    )


# --------------------------------------------------------------------------- the join
def build(
    pods: Sequence[Mapping[str, Any]] | None,
    jobs: Sequence[SlurmJob] | None,
    *,
    now: datetime,
    namespace: str | None,
    mcs_label: str = "",
    settings: TranslateSettings | None = None,
    errors: Sequence[str] = (),
) -> Report:
    """The report: ``pods`` (the bridge's pods in scope) and ``jobs`` (Slurm's whole job
    list); either is None when it could not be read. ``namespace`` None = all."""
    if jobs is not None:
        jobs = fold_hetjobs(jobs)
    ours = bridge_jobs(jobs or (), mcs_label)
    by_id = {j.job_id: j for j in jobs or ()}
    named_by: dict[str, list[int]] = {}  # pod key -> active bridge jobs naming it
    for bj in ours.values():
        if bj.job.state.active:
            for pod_key in bj.pods:
                named_by.setdefault(pod_key, []).append(bj.job.job_id)

    groups: dict[tuple[str, str, str], _Group] = {}
    for pod in pods or ():
        job_id = pod_job_id(pod)
        linked = ours.get(job_id) if job_id is not None else None
        if linked is not None and not names_pod(linked.job, pod, mcs_label):
            # a label naming a job that is not this pod's (another tenant's): not believed
            job_id, linked = None, None
        if linked is None:
            active = sorted(named_by.get(kobj.pod_key(pod), ()))
            if active:
                linked = ours[active[-1]]
        if linked is not None and linked.group is not None:
            key = (linked.group.namespace, linked.group.kind, linked.group.name)
        else:
            ref = group_of(pod, {}, settings)
            key = (ref.namespace, ref.kind, ref.name)
        g = groups.setdefault(key, _Group(*key))
        g.pods.append(pod)
        if job_id is not None:
            g.jobs.add(job_id)
        elif linked is not None:
            g.jobs.add(linked.job.job_id)

    rows = [_row(g, by_id, now, jobs is not None) for g in groups.values()]
    orphans: list[OrphanJob] = []
    if pods is None:
        # Kubernetes could not be read: the active bridge jobs are all there is to show.
        rows += [_job_only_row(bj, now) for bj in ours.values() if _shown(bj, namespace)]
    else:
        existing = {kobj.pod_key(p): p for p in pods}
        for bj in sorted(ours.values(), key=lambda b: b.job.job_id):
            if not _shown(bj, namespace) or any(
                pod_belongs(bj.job.job_id, existing.get(k)) for k in bj.pods
            ):
                continue
            orphans.append(
                OrphanJob(
                    bj.job.job_id,
                    bj.job.state.primary,
                    bj.group_key,
                    bj.pods,
                    hostlist(bj.job.nodes),
                    bj.job.partition,
                )
            )
    strays: list[StrayPod] = []
    if jobs is not None:
        for pod in pods or ():
            job_id = pod_job_id(pod)
            if job_id is None or _finished(pod):
                continue
            job = by_id.get(job_id)
            if job is None:
                why = f"job {job_id} is gone from Slurm"
            elif not names_pod(job, pod, mcs_label):
                why = f"job {job_id} is not this pod's (its back-link does not name it)"
            elif not job.state.active:
                why = f"job {job_id} ended: {job.state.primary}"
            else:
                continue
            strays.append(StrayPod(kobj.namespace(pod), kobj.name(pod), job_id, why))
    rows.sort(key=lambda r: (r.namespace, r.kind, r.name))
    strays.sort(key=lambda s: (s.namespace, s.name))
    return Report(
        tuple(rows),
        tuple(orphans),
        tuple(strays),
        tuple(errors),
        all_namespaces=namespace is None,
        namespace=namespace or "",
    )


def _shown(bj: _BridgeJob, namespace: str | None) -> bool:
    return bj.job.state.active and _in_scope(bj.namespace, namespace)


def _row(g: _Group, by_id: Mapping[int, SlurmJob], now: datetime, slurm_read: bool) -> GroupRow:
    listed = [by_id[j] for j in g.jobs if j in by_id]
    # The newest active job, else the newest listed one, else the newest id the pods name.
    job = max((j for j in listed if j.state.active), key=lambda j: j.job_id, default=None)
    job = job or max(listed, key=lambda j: j.job_id, default=None)
    job_id = job.job_id if job is not None else max(g.jobs, default=None)
    if job is not None:
        state, reason = _het_summary(job)
    elif job_id is not None:
        state, reason = (GONE if slurm_read else UNKNOWN), NONE
    else:
        state, reason = NONE, _waiting_message(g.pods) or NONE
    created = [c for c in (_created(p) for p in g.pods) if c is not None]
    return GroupRow(
        namespace=g.namespace,
        kind=g.kind,
        name=g.name,
        pods_bound=sum(1 for p in g.pods if kobj.text(p, "spec", "nodeName")),
        pods_total=len(g.pods),
        job_id=job_id,
        state=state,
        reason=reason,
        nodes=hostlist([n for c in job.components for n in c.nodes]) if job is not None else NONE,
        age_seconds=(now - min(created)).total_seconds() if created else None,
        partition=job.partition if job is not None else "",
        pods=tuple(sorted(kobj.name(p) for p in g.pods)),
        components=_components(job) if job is not None else (),
        **_expected(job, now, g.pods),
    )


def _job_only_row(bj: _BridgeJob, now: datetime) -> GroupRow:
    kind, name = (bj.group.kind, bj.group.name) if bj.group else ("Pod", "?")
    submitted = bj.job.submit_time
    return GroupRow(
        namespace=bj.namespace,
        kind=kind,
        name=name,
        pods_bound=None,
        pods_total=None,
        job_id=bj.job.job_id,
        state=_het_summary(bj.job)[0],
        reason=_het_summary(bj.job)[1],
        nodes=hostlist([n for c in bj.job.components for n in c.nodes]),
        age_seconds=(now - submitted).total_seconds() if submitted else None,
        partition=bj.job.partition,
        pods=tuple(k.partition("/")[2] for k in bj.pods),
        components=_components(bj.job),
        **_expected(bj.job, now),
    )


# --------------------------------------------------------------------------- rendering
def human_age(seconds: float | None) -> str:
    """kubectl's AGE: ``45s``, ``3m12s``, ``17m``, ``5h3m``, ``30h``, ``3d4h``, ``12d``."""
    if seconds is None:
        return NONE
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s"
    m, h, d = s // 60, s // 3600, s // 86400
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if h < 3:
        return f"{m}m"
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    if d < 8:
        return f"{d}d{h % 24}h" if h % 24 else f"{d}d"
    return f"{d}d"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    body = [list(header), *[list(r) for r in rows]]
    widths = [max(len(r[i]) for r in body) for i in range(len(header))]
    return ["   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in body]


def _count(n: int | None) -> str:
    return UNKNOWN if n is None else str(n)


def render(report: Report, output: Output = "table") -> str:
    """The report as text (``table``/``wide``, kubectl-like) or JSON; errors are not in
    the text (the CLI prints them on stderr) but are in the JSON."""
    if output == "json":
        return json.dumps(report.to_json(), indent=2)
    wide = output == "wide"
    header = ["GROUP", "PODS", "JOB", "STATE", "REASON", "EXPECTED", "NODES", "AGE"]
    if report.all_namespaces:
        header.insert(0, "NAMESPACE")
    if wide:
        header += ["PARTITION", "POD NAMES"]
    rows = []
    for g in report.groups:
        row = [
            g.group,
            f"{_count(g.pods_bound)}/{_count(g.pods_total)}",
            NONE if g.job_id is None else str(g.job_id),
            g.state,
            g.reason,
            f"{g.expected_start} ({g.expected})" if wide and g.expected_start else g.expected,
            g.nodes,
            human_age(g.age_seconds),
        ]
        if report.all_namespaces:
            row.insert(0, g.namespace)
        if wide:
            row += [g.partition or NONE, ",".join(g.pods) or NONE]
        rows.append(row)
        for c in g.components:  # a hetjob: a line per component, under its group
            sub = [f"  {c.component}", "", "", c.state, c.reason, "", c.nodes, ""]
            if report.all_namespaces:
                sub.insert(0, "")
            if wide:
                sub += ["", ""]
            rows.append(sub)
    if rows:
        lines = _table(header, rows)
    else:
        where = "any namespace" if report.all_namespaces else f"namespace {report.namespace}"
        lines = [f"No slurm-bridge workloads in {where}."]
    if report.orphan_jobs:
        lines += ["", "Slurm jobs of the bridge whose pods are all gone:"]
        lines += _table(
            ["JOB", "STATE", "GROUP", "NODES", "PODS NAMED"],
            (
                [str(j.job_id), j.state, j.group, j.nodes, ",".join(j.pods) or NONE]
                for j in report.orphan_jobs
            ),
        )
    if report.stray_pods:
        lines += ["", "Pods whose Slurm job is gone or ended:"]
        lines += _table(
            ["POD", "JOB", "WHY"],
            ([f"{p.namespace}/{p.name}", str(p.job_id), p.why] for p in report.stray_pods),
        )
    return "\n".join(lines)
