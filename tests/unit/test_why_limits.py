"""``slurm-bridge why`` on a QOS or association limit and on a reservation, with their values
(bridge.status.limits, through bridge.status.why.explain): which limit a reason names,
its value where it is set, what the jobs it counts hold (other users' only as counts and
sums), and what is said when slurmdbd cannot be read."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bridge.slurm.models import SlurmAssociation, SlurmLimits, SlurmQos, SlurmReservation
from bridge.status.limits import Accounting, Limit, limit_of, tres_of
from bridge.status.why import explain, render
from tests.unit.test_why import NODES, NOW, job, node, pod


@pytest.mark.parametrize(
    ("reason", "limit"),
    [
        ("QOSMaxGRESPerUser", Limit("qos", "MaxTRESPerUser", "gres/")),
        ("QOSMaxCpuPerUserLimit", Limit("qos", "MaxTRESPerUser", "cpu")),
        ("QOSMaxNodePerUserLimit", Limit("qos", "MaxTRESPerUser", "node")),
        ("QOSMaxMemoryPerJob", Limit("qos", "MaxTRESPerJob", "mem")),
        ("QOSGrpCpuLimit", Limit("qos", "GrpTRES", "cpu")),
        ("QOSGrpCPURunMinutesLimit", Limit("qos", "GrpTRESRunMins", "cpu")),
        ("QOSMinCpuNotSatisfied", Limit("qos", "MinTRESPerJob", "cpu")),
        ("QOSMaxJobsPerUserLimit", Limit("qos", "MaxJobsPerUser")),
        ("QOSMaxSubmitJobPerUserLimit", Limit("qos", "MaxSubmitJobsPerUser")),
        ("QOSGrpSubmitJobsLimit", Limit("qos", "GrpSubmitJobs")),
        ("QOSGrpJobsLimit", Limit("qos", "GrpJobs")),
        ("QOSMaxWallDurationPerJobLimit", Limit("qos", "MaxWall")),
        ("MaxCpuPerAccount", Limit("qos", "MaxTRESPerAccount", "cpu")),
        ("MaxJobsPerAccount", Limit("qos", "MaxJobsPerAccount")),
        ("MaxSubmitJobsPerAccount", Limit("qos", "MaxSubmitJobsPerAccount")),
        ("AssocGrpCpuLimit", Limit("assoc", "GrpTRES", "cpu")),
        ("AssocGrpGRES", Limit("assoc", "GrpTRES", "gres/")),
        ("AssocGrpNodeLimit", Limit("assoc", "GrpTRES", "node")),
        ("AssocGrpMemMinutes", Limit("assoc", "GrpTRESMins", "mem")),
        ("AssocMaxCpuMinutesPerJobLimit", Limit("assoc", "MaxTRESMinsPerJob", "cpu")),
        ("AssocMaxCpuPerNode", Limit("assoc", "MaxTRESPerNode", "cpu")),
        ("AssocMaxJobsLimit", Limit("assoc", "MaxJobs")),
        ("AssocMaxSubmitJobLimit", Limit("assoc", "MaxSubmitJobs")),
        ("AssocGrpWallLimit", Limit("assoc", "GrpWall")),
        ("AssocGrpUnknown", Limit("assoc", "GrpTRES", None)),
    ],
)
def test_a_limit_reason_names_sacctmgrs_limit_and_its_tres(reason: str, limit: Limit) -> None:
    assert limit_of(reason) == limit


@pytest.mark.parametrize(
    "reason", ["Resources", "Priority", "QOSNotAllowed", "QOSUsageThreshold", "MaxMemPerLimit"]
)
def test_a_reason_naming_no_limit_value_is_not_a_limit(reason: str) -> None:
    assert limit_of(reason) is None


def test_tres_strings_count_memory_in_mb() -> None:
    assert tres_of("cpu=3,mem=500M,node=1,billing=3,gres/gpu=1") == {
        "cpu": 3,
        "mem": 500,
        "node": 1,
        "billing": 3,
        "gres/gpu": 1,
    }
    assert tres_of("mem=2G,gres/gpu:a100=2,bad=x")["mem"] == 2048


QOS = SlurmQos(
    name="normal",
    limits=SlurmLimits(
        tres={"MaxTRESPerUser": {"cpu": 12, "gres/gpu": 4}, "GrpTRES": {"cpu": 20}},
        counts={"MaxJobsPerUser": 3, "MaxWall": 60},
    ),
)
ASSOCS = (
    SlurmAssociation(account="root"),
    SlurmAssociation(account="research", parent_account="root",
                     limits=SlurmLimits(tres={"GrpTRES": {"cpu": 16}})),
    SlurmAssociation(account="ml", parent_account="research"),
    SlurmAssociation(account="ml", user="slurm", limits=SlurmLimits(tres={"GrpTRES": {"cpu": 14}})),
)  # fmt: skip


def gpu_job(
    job_id: int, user: str, *, gpus: int = 2, state: str = "RUNNING", **kw: object
) -> object:
    return job(
        job_id, state, "None", ns=None, name=f"train-{user}", nodes=1, cpus=4, user=user,
        qos="normal", account=kw.pop("account", "ml"),
        tres_alloc_str=f"cpu=4,mem=1000M,node=1,gres/gpu={gpus}", **kw,
    )  # fmt: skip


def waiting(reason: str, **kw: object) -> object:
    return job(48, reason=reason, qos="normal", account="ml", nodes=1, cpus=4,
               tres_req_str="cpu=4,mem=500M,node=1,gres/gpu=2", **kw)  # fmt: skip


def test_a_qos_per_user_limit_says_its_value_and_what_the_user_holds() -> None:
    mine = waiting("QOSMaxGRESPerUser")
    jobs = [mine, gpu_job(7, "slurm"), gpu_job(8, "slurm"), gpu_job(9, "bob", gpus=4)]
    e = explain(pod(job=48), mine, jobs, NODES, now=NOW, accounting=Accounting((QOS,), ASSOCS))
    text = render(e)
    assert "a limit of QOS normal is reached: max GRES per user (QOSMaxGRESPerUser)" in text
    assert (
        "QOS normal: MaxTRESPerUser gres/gpu=4; user slurm holds gres/gpu=4 in 2 running jobs"
        in text
    )
    # the other user's job counts nowhere here, and is never named
    for unnamed in ("bob", "job 9", "train-"):
        assert unnamed not in text
    assert "sacctmgr" not in text


def test_a_qos_group_limit_sums_every_users_jobs_without_naming_them() -> None:
    mine = waiting("QOSGrpCpuLimit")
    jobs = [mine, gpu_job(7, "slurm"), gpu_job(9, "bob"), gpu_job(10, "carol"),
            gpu_job(11, "dave", state="PENDING")]  # fmt: skip
    text = render(explain(pod(job=48), mine, jobs, NODES, now=NOW,
                          accounting=Accounting((QOS,), ASSOCS)))  # fmt: skip
    assert (
        "QOS normal: GrpTRES cpu=20; the QOS holds cpu=12 in 3 running jobs "
        "(user slurm: cpu=4 in 1 running job)"
    ) in text
    for other in ("bob", "carol", "dave"):
        assert other not in text


def test_a_job_count_and_a_wall_limit_say_their_values() -> None:
    mine = waiting("QOSMaxJobsPerUserLimit")
    jobs = [mine, *(gpu_job(i, "slurm") for i in (7, 8, 9))]
    text = render(explain(pod(job=48), mine, jobs, NODES, now=NOW,
                          accounting=Accounting((QOS,), ASSOCS)))  # fmt: skip
    assert "QOS normal: MaxJobsPerUser 3; user slurm holds 3 running jobs" in text
    long = waiting("QOSMaxWallDurationPerJobLimit", time_limit_minutes=120)
    text = render(explain(pod(job=48), long, [long], NODES, now=NOW,
                          accounting=Accounting((QOS,), ASSOCS)))  # fmt: skip
    assert "QOS normal: MaxWall 60 minutes; it asks 120 minutes" in text


def test_an_association_limit_is_said_at_each_level_that_sets_it() -> None:
    mine = waiting("AssocGrpCpuLimit")
    jobs = [mine, gpu_job(7, "slurm"), gpu_job(8, "slurm"), gpu_job(9, "bob"),
            gpu_job(10, "eve", account="research"),
            gpu_job(11, "zed", account="other")]  # fmt: skip
    e = explain(pod(job=48), mine, jobs, NODES, now=NOW, accounting=Accounting((QOS,), ASSOCS))
    text = render(e)
    assert "a limit of account ml is reached: group CPU (AssocGrpCpuLimit)" in text
    assert "association ml/slurm: GrpTRES cpu=14; it holds cpu=8 in 2 running jobs" in text
    # the account above counts its whole subtree (ml under research), not "other"
    assert "account research: GrpTRES cpu=16; it holds cpu=16 in 4 running jobs" in text
    assert "eve" not in text
    assert "bob" not in text


def test_without_accounting_the_value_is_said_unreadable_with_the_sacctmgr_command() -> None:
    mine = waiting("QOSMaxGRESPerUser")
    none = Accounting(error="slurmrestd serves no slurmdbd endpoints: no accounting")
    text = render(explain(pod(job=48), mine, [mine], NODES, now=NOW, accounting=none))
    assert (
        "its value is not readable here (slurmrestd serves no slurmdbd endpoints: no "
        "accounting): `sacctmgr show qos normal format=Name,MaxTRESPU` shows it"
    ) in text
    assocs = render(explain(pod(job=48), waiting("AssocMaxJobsLimit"), [mine], NODES, now=NOW,
                            accounting=none))  # fmt: skip
    assert "`sacctmgr show assoc where account=ml user=slurm format=Account,User,MaxJobs`" in assocs


def test_a_limit_its_qos_does_not_set_points_at_the_partitions_qos() -> None:
    mine = waiting("QOSMaxNodePerUserLimit")
    text = render(explain(pod(job=48), mine, [mine], NODES, now=NOW,
                          accounting=Accounting((QOS,), ASSOCS)))  # fmt: skip
    assert "QOS normal sets no MaxTRESPerUser for node" in text
    assert "`scontrol show partition p`" in text


MAINT = SlurmReservation(
    name="maint",
    start_time=NOW + timedelta(minutes=10),
    end_time=NOW + timedelta(minutes=40),
    node_count=3,
    nodes=("n0", "n1", "n2"),
    flags=("MAINT",),
)


def test_a_reservation_is_named_with_its_window_and_its_node_count() -> None:
    mine = job(48, reason="Reservation", reservation="maint")
    e = explain(pod(job=48), mine, [mine], NODES, now=NOW, reservations=[MAINT])
    assert (
        "reservation maint: 2026-11-29T14:03:00Z to 2026-11-29T14:33:00Z, starts in 10 min; 3 nodes"
    ) in render(e)


def test_nodes_not_available_name_the_reservation_that_holds_them() -> None:
    mine = job(48, reason="ReqNodeNotAvail, Reserved for maintenance", nodes=1, cpus=1)
    now_on = MAINT.model_copy(update={"start_time": NOW - timedelta(minutes=5)})
    idle = [node(n, alloc_cpus=0, state=frozenset({"IDLE", "MAINTENANCE", "RESERVED"}))
            for n in ("n0", "n1", "n2")]  # fmt: skip
    text = render(explain(pod(job=48), mine, [mine], idle, now=NOW, reservations=[now_on]))
    assert "3 nodes short of usable state (down, drained or reserved)" in text
    assert (
        "reservation maint holds 3 of its partition's nodes: 2026-11-29T13:48:00Z to "
        "2026-11-29T14:33:00Z, active, ends in 40 min (MAINT)"
    ) in text
