"""``kubectl slurm-bridge why`` on limits and reservations, end to end: real slurmrestd
26.05, the sandbox API server and the scheduler.

* A QOS limit with accounting (tests/accounting_sandbox.py: MariaDB + slurmdbd,
  ``AccountingStorageEnforce=associations,limits,qos``): a gang waits on
  ``QOSMaxCpuPerUserLimit`` behind the same user's running gang; ``why`` reads the QOS from
  slurmdbd (``/slurmdb/<v>/qos/``) and says the limit's value and what the user holds.
* Without accounting (the plain sandbox: slurmrestd without ``openapi/slurmdbd``) the
  value is not readable, and ``why`` says so.
* A reservation that has not started: ``why`` names it with its window and node count.
"""

from __future__ import annotations

import contextlib
import re
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge.errors import SlurmNotFound
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import JobState, SlurmJob
from bridge.status.cli import reads_for
from bridge.wellknown import slurmjob_annotation
from tests.accounting_sandbox import accounting_sandbox
from tests.integration.bridge_harness import NS, Bridge, kubectl_plugin, podgroup, running_bridge
from tests.integration.conftest import SlurmSandbox, load_sandbox

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]


@pytest.fixture(scope="module")
def accounted() -> Iterator[SlurmSandbox]:
    with accounting_sandbox() as env_file:
        yield load_sandbox(env_file)


def exec_ok(sb: SlurmSandbox, *cmd: str) -> str:
    done = sb.cli("exec", "--", *cmd)
    assert done.returncode == 0, done.stderr
    return done.stdout


@contextlib.contextmanager
def qos_tres_limit(sb: SlurmSandbox, qos: str, name: str, tres: str, n: int) -> Iterator[None]:
    """``sacctmgr modify qos QOS set NAME=TRES=N`` for the test, cleared after it."""
    exec_ok(sb, "sacctmgr", "-i", "modify", "qos", qos, "set", f"{name}={tres}={n}")
    try:
        yield
    finally:
        exec_ok(sb, "sacctmgr", "-i", "modify", "qos", qos, "set", f"{name}={tres}=-1")


async def why(b: Bridge, tmp_path: Path, pod: str) -> str:
    proc = await kubectl_plugin(b, tmp_path, "why", f"{NS}/{pod}")
    assert proc.returncode == 0, proc.stderr
    print(proc.stdout)
    return proc.stdout


async def test_a_qos_limit_is_named_with_its_value_from_slurmdbd_and_what_the_user_holds(
    accounted: SlurmSandbox, tmp_path: Path
) -> None:
    # the sandbox's external nodes go whole to a job: a gang of 2 pods holds 2 nodes' CPUs
    limit = 2 * accounted.node_cpus
    with qos_tres_limit(accounted, "normal", "MaxTRESPerUser", "cpu", limit):
        async with running_bridge(accounted, tmp_path) as b:
            first = await podgroup(b, "qos-run", 2)  # the user's limit, all of it
            for n in first:
                await b.bound(n)
            second = await podgroup(b, "qos-wait", 1, cpu="1")

            async def limited() -> str:
                msg = await b.scheduled_message(second[0])
                return msg if "QOSMaxCpuPerUserLimit" in msg else ""

            await b.wait_for("the QOS limit on the second gang", limited)
            said = await why(b, tmp_path, second[0])
            assert "(QOSMaxCpuPerUserLimit)" in said
            assert "a limit of QOS normal is reached: max CPU per user" in said
            assert (
                f"QOS normal: MaxTRESPerUser cpu={limit}; user slurm holds cpu={limit} in 1 "
                "running job"
            ) in said
            assert "not readable" not in said
            assert "slurmjob.slinky.slurm.net/qos" in said  # what the user can change


async def test_without_accounting_a_limits_value_is_said_not_readable(
    slurm: SlurmClient,
) -> None:
    with pytest.raises(SlurmNotFound):
        await slurm.list_qos()
    waiting = SlurmJob(
        job_id=1,
        name="x",
        state=JobState(primary="PENDING"),
        state_reason="QOSMaxGRESPerUser",
        qos="normal",
    )
    accounting, reservations = await reads_for(slurm, waiting)
    assert accounting is not None
    assert accounting.error == "slurmrestd serves no slurmdbd endpoints: no accounting"
    assert reservations is None


async def test_a_reservation_not_started_is_named_with_its_window_and_node_count(
    sandbox: SlurmSandbox, tmp_path: Path
) -> None:
    resv = "why-" + secrets.token_hex(3)
    nodes = ",".join(sandbox.external_nodes)
    exec_ok(sandbox, "scontrol", "create", "reservation", f"reservationname={resv}",
            "starttime=now+10minutes", "duration=30", f"nodes={nodes}", "users=slurm",
            "flags=ignore_jobs")  # fmt: skip
    try:
        async with running_bridge(sandbox, tmp_path) as b:
            ann = {slurmjob_annotation("reservation"): resv}
            (pod,) = await podgroup(b, "in-resv", 1, annotations=ann)

            async def waiting() -> str:
                msg = await b.scheduled_message(pod)
                return msg if "is pending: Reservation" in msg else ""

            await b.wait_for("the pod waiting for its reservation", waiting)
            said = await why(b, tmp_path, pod)
            n = len(sandbox.external_nodes)
            assert f"it waits for reservation {resv} (Reservation)" in said
            assert f"reservation {resv}: " in said
            assert re.search(rf", starts in (9|10) min; {n} nodes\n", said), said
            assert f"Slurm plans none before its reservation {resv} starts at 20" in said
            assert "users" not in said  # the reservation's users are never shown
    finally:
        # Slurm deletes no reservation a job still waits for: its jobs go first, whatever
        # the test's outcome (a reservation left behind holds the next tests' nodes)
        waiting_in = exec_ok(sandbox, "squeue", "-h", "-R", resv, "-o", "%i").split()
        if waiting_in:
            exec_ok(sandbox, "scancel", *waiting_in)
        exec_ok(sandbox, "scontrol", "delete", f"reservationname={resv}")
