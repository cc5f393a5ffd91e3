"""What ``slurm-bridge why`` says of a QOS or association limit and of a reservation, with
their values (docs/why-pending.md). Pure: the CLI reads slurmdbd's QOS and associations
(slurmrestd's ``openapi/slurmdbd`` plugin) and Slurm's reservations, and passes them in.

A pending reason names a limit (``QOSMaxGRESPerUser``, ``AssocGrpCpuLimit``,
``MaxJobsPerAccount`` ...); :func:`limit_of` turns it into sacctmgr's name of the limit
(``MaxTRESPerUser``, ``GrpTRES``, ``MaxJobsPerAccount``) and the TRES it is about, and
:func:`limit_lines` says its value where it is set (the job's QOS; the job's association
and each account above it) beside what the jobs it counts hold now.

Tenants: a limit's value is the admin's policy and is shown; what other users' jobs hold
is shown only as a count and a sum, never by job, name or user.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from bridge.expected import human_in, rfc3339
from bridge.slurm.models import (
    SlurmAssociation,
    SlurmJob,
    SlurmLimits,
    SlurmQos,
    SlurmReservation,
)

# A limit reason: [QOS|Assoc](Grp|Max|Min)<what>[Run][Minutes][Per<scope>][Limit]. Without
# a prefix only the QOS's per-account limits (MaxCpuPerAccount, MaxJobsPerAccount ...).
_LIMIT = re.compile(
    r"(?P<src>QOS|Assoc)?(?P<scope>Grp|Max|Min)"
    r"(?P<what>Cpu|CPU|Memory|Mem|Node|GRES|Energy|License|BB|Billing|Unknown"
    r"|SubmitJobs?|Jobs|WallDuration|Wall)"
    r"(?P<run>Run)?(?P<mins>Minutes)?(?:Per(?P<per>Job|User|Node|Account))?"
    r"(?:Limit|NotSatisfied)?"
)
# The TRES a reason's <what> is about ("gres/": every GRES; None: every TRES).
_TRES = {
    "Cpu": "cpu",
    "CPU": "cpu",
    "Memory": "mem",
    "Mem": "mem",
    "Node": "node",
    "Energy": "energy",
    "Billing": "billing",
    "GRES": "gres/",
    "License": "license/",
    "BB": "bb/",
}
# sacctmgr's format names where they differ from the limit's (``sacctmgr show qos
# format=...``, ``show assoc format=...``: checked on 26.05).
_QOS_FORMAT = {
    "MaxTRESPerJob": "MaxTRES",
    "MaxTRESPerUser": "MaxTRESPU",
    "MaxTRESPerAccount": "MaxTRESPA",
    "MaxTRESMinsPerJob": "MaxTRESMins",
    "MaxTRESRunMinsPerUser": "MaxTRESRunMinsPU",
    "MaxTRESRunMinsPerAccount": "MaxTRESRunMinsPA",
    "MinTRESPerJob": "MinTRES",
    "MaxJobsPerUser": "MaxJobsPU",
    "MaxJobsPerAccount": "MaxJobsPA",
    "MaxSubmitJobsPerUser": "MaxSubmitPU",
    "MaxSubmitJobsPerAccount": "MaxSubmitPA",
    "GrpSubmitJobs": "GrpSubmit",
}
_ASSOC_FORMAT = {
    "MaxTRESPerJob": "MaxTRES",
    "MaxTRESMinsPerJob": "MaxTRESMins",
    "GrpSubmitJobs": "GrpSubmit",
    "MaxSubmitJobs": "MaxSubmit",
}
# TRES amounts with a unit (``mem=500M``, ``mem=2G``), in MB as slurmdbd's limits count
_UNITS = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024, "P": 1024**3}


@dataclass(frozen=True)
class Limit:
    """What a pending reason names: sacctmgr's limit, of a QOS or an association, about
    which TRES (``tres``: one, ``"gres/"`` a kind, None every one or a count limit)."""

    source: str  # "qos" | "assoc"
    name: str  # sacctmgr's: GrpTRES, MaxTRESPerUser, MaxJobsPerUser, MaxWall ...
    tres: str | None = None


@dataclass(frozen=True)
class Accounting:
    """slurmdbd's QOS and associations as read for ``why``; ``error``: why they could not
    be read (no accounting: slurmrestd without ``openapi/slurmdbd``, a token not allowed)."""

    qos: tuple[SlurmQos, ...] = ()
    associations: tuple[SlurmAssociation, ...] = ()
    error: str = ""


def limit_of(reason: str) -> Limit | None:
    """The limit a pending reason names, None when it names none."""
    m = _LIMIT.fullmatch(reason)
    if m is None or (m["src"] is None and m["per"] != "Account"):
        return None
    source = "assoc" if m["src"] == "Assoc" else "qos"
    scope, what, per = m["scope"], m["what"], m["per"]
    if what in _TRES or what == "Unknown":
        tres = _TRES.get(what)
        if scope == "Min":
            return Limit(source, "MinTRESPerJob", tres)
        if scope == "Grp":
            mins = "RunMins" if m["run"] else "Mins" if m["mins"] else ""
            return Limit(source, f"GrpTRES{mins}", tres)
        if m["run"]:
            return Limit(source, f"MaxTRESRunMinsPer{per or 'User'}", tres)
        if m["mins"]:
            return Limit(source, "MaxTRESMinsPerJob", tres)
        return Limit(source, f"MaxTRESPer{per or 'Job'}", tres)
    if what.startswith("Wall"):
        return Limit(source, "GrpWall" if scope == "Grp" else "MaxWall")
    kind = "Jobs" if what == "Jobs" else "SubmitJobs"
    if scope == "Grp":
        return Limit(source, f"Grp{kind}")
    return Limit(source, f"Max{kind}" + (f"Per{per}" if per else ""))


def tres_of(text: str) -> dict[str, int]:
    """A job's ``tres_alloc_str``/``tres_req_str`` (``cpu=3,mem=500M,node=1,gres/gpu=1``)
    as amounts (memory in MB); what is not a number is left out."""
    out: dict[str, int] = {}
    for item in text.split(","):
        key, _, value = item.partition("=")
        unit = value[-1:].upper()
        scale = _UNITS.get(unit, 1) if unit.isalpha() else 1
        number = value[:-1] if unit.isalpha() else value
        try:
            out[key.strip()] = round(float(number) * scale)
        except ValueError:
            continue
    return out


def _about(tres: Mapping[str, int], which: str | None) -> dict[str, int]:
    """The entries of ``tres`` a limit about ``which`` counts."""
    if which is None:
        return dict(tres)
    if which.endswith("/"):
        return {k: v for k, v in tres.items() if k.startswith(which)}
    return {k: v for k, v in tres.items() if k == which}


def _tres_text(tres: Mapping[str, int]) -> str:
    return ",".join(f"{k}={v}M" if k == "mem" else f"{k}={v}" for k, v in sorted(tres.items()))


def _value(limits: SlurmLimits, limit: Limit) -> str | None:
    """The limit's value as sacctmgr shows it (only the TRES the reason is about), None
    when it is not set here."""
    if limit.name in limits.counts:
        n = limits.counts[limit.name]
        return f"{n} minutes" if limit.name.endswith("Wall") else str(n)
    tres = _about(limits.tres.get(limit.name, {}), limit.tres)
    return _tres_text(tres) if tres else None


def _held(jobs: Sequence[SlurmJob], limit: Limit) -> str:
    """What ``jobs`` (the ones a limit counts) hold of it, in words."""
    running = [j for j in jobs if j.state.primary == "RUNNING"]
    if limit.name.startswith(("GrpSubmitJobs", "MaxSubmitJobs")):
        return f"{len(jobs)} job{'s' if len(jobs) != 1 else ''} submitted (pending or running)"
    n = len(running)
    jobs_text = f"{n} running job{'s' if n != 1 else ''}"
    if limit.tres is None and "TRES" not in limit.name:
        return jobs_text
    total: dict[str, int] = {}
    for j in running:
        for k, v in _about(tres_of(j.tres_alloc_str), limit.tres).items():
            total[k] = total.get(k, 0) + v
    return f"{_tres_text(total) or 'nothing of it'} in {jobs_text}"


def _asks(job: SlurmJob, limit: Limit) -> str:
    """What the job itself asks of a per-job, per-node or minimum limit."""
    if limit.name.endswith("Wall"):
        asked = job.time_limit_minutes
        return f"it asks {asked} minutes" if asked is not None else "it asks no time limit"
    asked_tres = _about(tres_of(job.tres_req_str), limit.tres)
    nodes = job.node_count or 1
    if limit.name == "MaxTRESPerNode" and nodes > 1:
        per_node = {k: -(-v // nodes) for k, v in asked_tres.items() if k != "node"}
        return f"it asks {_tres_text(per_node) or 'none'} per node"
    return f"it asks {_tres_text(asked_tres) or 'none'}"


def _format(limit: Limit) -> str:
    table = _QOS_FORMAT if limit.source == "qos" else _ASSOC_FORMAT
    return table.get(limit.name, limit.name)


def sacctmgr_command(limit: Limit, job: SlurmJob) -> str:
    """The sacctmgr command that shows the limit's value."""
    if limit.source == "qos":
        return f"sacctmgr show qos {job.qos or '<qos>'} format=Name,{_format(limit)}"
    who = f" user={job.user}" if job.user else ""
    return (
        f"sacctmgr show assoc where account={job.account or '<account>'}{who} "
        f"format=Account,User,{_format(limit)}"
    )


def _subtree(account: str, associations: Iterable[SlurmAssociation]) -> set[str]:
    """``account`` and every account below it."""
    children: dict[str, set[str]] = {}
    for a in associations:
        if not a.user and a.parent_account:
            children.setdefault(a.parent_account, set()).add(a.account)
    out, todo = set(), [account]
    while todo:
        acct = todo.pop()
        if acct not in out:
            out.add(acct)
            todo += children.get(acct, ())
    return out


def _chain(job: SlurmJob, associations: Sequence[SlurmAssociation]) -> list[SlurmAssociation]:
    """The job's association (its user's in its account: the partition's first, if any),
    then its account's and each account above it, to the root."""
    mine = [a for a in associations if a.account == job.account and a.user == job.user]
    mine.sort(key=lambda a: a.partition != job.partition)  # the partition's own first
    by_account = {a.account: a for a in associations if not a.user}
    out = mine[:1]
    account: str | None = job.account
    while account and (acct := by_account.get(account)) is not None and acct not in out:
        out.append(acct)
        account = acct.parent_account
    return out


def limit_lines(
    limit: Limit, job: SlurmJob, jobs: Sequence[SlurmJob], accounting: Accounting
) -> list[str]:
    """The limit's value where it is set, and what the jobs it counts hold; or, when
    slurmdbd could not be read, that the value is not readable and the command that shows
    it. ``job`` is the waiting job, ``jobs`` Slurm's active jobs (``job`` left out)."""
    if accounting.error:
        return [
            f"its value is not readable here ({accounting.error}): "
            f"`{sacctmgr_command(limit, job)}` shows it"
        ]
    per_job = limit.name in ("MaxTRESPerJob", "MaxTRESPerNode", "MinTRESPerJob", "MaxWall")
    per_job = per_job or limit.name.startswith("MaxTRESMins")
    lines: list[str] = []
    if limit.source == "qos":
        qos = next((q for q in accounting.qos if q.name == job.qos), None)
        value = _value(qos.limits, limit) if qos is not None else None
        if value is None:
            return [
                f"QOS {job.qos or '?'} sets no {limit.name}"
                + (f" for {limit.tres.rstrip('/')}" if limit.tres else "")
                + ": the limit is another QOS's (the partition's QOS: `scontrol show "
                f"partition {job.partition}`)"
            ]
        in_qos = [j for j in jobs if j.qos == job.qos]
        if per_job:
            held = _asks(job, limit)
        elif limit.name.endswith("PerUser"):
            held = f"user {job.user} holds " + _held(
                [j for j in in_qos if j.user == job.user], limit
            )
        elif limit.name.endswith("PerAccount"):
            held = f"account {job.account} holds " + _held(
                [j for j in in_qos if j.account == job.account], limit
            )
        else:
            everyone = _held(in_qos, limit)
            own = _held([j for j in in_qos if j.user == job.user], limit)
            held = f"the QOS holds {everyone} (user {job.user}: {own})"
        return [f"QOS {job.qos}: {limit.name} {value}; {held}"]
    for assoc in _chain(job, accounting.associations):
        value = _value(assoc.limits, limit)
        if value is None:
            continue
        if assoc.user:
            where = f"association {assoc.account}/{assoc.user}"
            counted = [j for j in jobs if j.account == assoc.account and j.user == assoc.user]
        else:
            where = f"account {assoc.account}"
            below = _subtree(assoc.account, accounting.associations)
            counted = [j for j in jobs if j.account in below]
        held = _asks(job, limit) if per_job else f"it holds {_held(counted, limit)}"
        lines.append(f"{where}: {limit.name} {value}; {held}")
    if not lines:
        lines.append(
            f"no association of account {job.account or '?'} (user {job.user or '?'}) sets "
            f"{limit.name}: `{sacctmgr_command(limit, job)}`"
        )
    return lines


def _window(r: SlurmReservation, now: datetime) -> str:
    start = rfc3339(r.start_time) if r.start_time else "?"
    end = rfc3339(r.end_time) if r.end_time else "?"
    when = ""
    if r.start_time is not None and r.start_time > now:
        when = f", starts {human_in((r.start_time - now).total_seconds())}"
    elif r.end_time is not None:
        when = f", active, ends {human_in((r.end_time - now).total_seconds())}"
    return f"{start} to {end}{when}"


def reservation_lines(
    job: SlurmJob,
    reservations: Sequence[SlurmReservation],
    partition_nodes: Iterable[str],
    now: datetime,
) -> list[str]:
    """The job's reservation (its window, its nodes' count), else the reservations that
    hold nodes of its partition (Slurm's ``ReqNodeNotAvail, Reserved for maintenance``);
    never a reservation's users or accounts."""
    if job.reservation:
        r = next((r for r in reservations if r.name == job.reservation), None)
        if r is None:
            return [f"reservation {job.reservation}: not found in Slurm (ended or deleted?)"]
        return [f"reservation {r.name}: {_window(r, now)}; {r.node_count} nodes"]
    ours = set(partition_nodes)
    lines = []
    for r in reservations:
        held = len(ours.intersection(r.nodes))
        if held and (r.end_time is None or r.end_time > now):
            lines.append(
                f"reservation {r.name} holds {held} of its partition's nodes: {_window(r, now)}"
                + (f" ({', '.join(r.flags)})" if r.flags else "")
            )
    return lines
