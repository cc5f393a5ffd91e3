"""``slurm-bridge status``'s driver: --watch rounds, exit codes, the kubeconfig namespace
(fake clients: the join itself is tests/unit/test_status_view.py, the real thing
tests/integration/test_status_e2e.py)."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from bridge.config import parse_config
from bridge.errors import KubeNotFound, SlurmUnavailable
from bridge.kube.fetching import ObjectList
from bridge.slurm.models import SlurmJob
from bridge.status.cli import context_namespace, main, run, run_why
from tests.fake_clock import FakeClock


class InstantClock(FakeClock):
    """Sleeping moves the clock at once (records how long it was asked to)."""

    def __init__(self) -> None:
        super().__init__()
        self.slept: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.advance(seconds)


class FakeKube:
    def __init__(self) -> None:
        self.lists: list[tuple[Any, ...]] = []

    async def list_pods(self, namespace: str | None = None, **kw: Any) -> ObjectList:
        self.lists.append((namespace, kw.get("field_selector")))
        return ObjectList([], "1")


class FakeSlurm:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.calls = 0

    async def scan_jobs(
        self, keep: Callable[[SlurmJob], bool], sharing: bool = False
    ) -> tuple[SlurmJob, ...]:
        self.calls += 1
        if self.fail:
            raise SlurmUnavailable("jobs_get: cannot reach slurmrestd: ClientConnectorError")
        return ()


CFG = parse_config({"schedulerName": "my-sched"}, env={})


async def test_watch_reads_both_sides_once_per_round_every_interval() -> None:
    kube, slurm, clock, out = FakeKube(), FakeSlurm(), InstantClock(), io.StringIO()
    code = await run(
        CFG,
        namespace="hpc",
        all_namespaces=False,
        output="table",
        watch=True,
        interval=5,
        out=out,
        clock=clock,
        kube=kube,  # type: ignore[arg-type]
        slurm=slurm,  # type: ignore[arg-type]
        rounds=3,
    )
    assert code == 0
    assert kube.lists == [("hpc", "spec.schedulerName=my-sched")] * 3
    assert slurm.calls == 3
    assert clock.slept == [5, 5]
    assert out.getvalue().count("No slurm-bridge workloads in namespace hpc.") == 3


async def test_a_side_that_fails_gives_exit_1_and_an_error_naming_it() -> None:
    out, err = io.StringIO(), io.StringIO()
    code = await run(
        CFG,
        namespace=None,
        all_namespaces=True,
        output="table",
        out=out,
        err=err,
        clock=InstantClock(),
        kube=FakeKube(),  # type: ignore[arg-type]
        slurm=FakeSlurm(fail=True),  # type: ignore[arg-type]
    )
    assert code == 1
    assert out.getvalue() == "No slurm-bridge workloads in any namespace.\n"
    assert err.getvalue().startswith(f"error: Slurm ({CFG.slurm_rest_api}): cannot list jobs: ")


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (
            {"current-context": "c", "contexts": [{"name": "c", "context": {"namespace": "hpc"}}]},
            "hpc",
        ),
        ({"current-context": "c", "contexts": [{"name": "c", "context": {}}]}, "default"),
        (
            {"current-context": "x", "contexts": [{"name": "c", "context": {"namespace": "a"}}]},
            "default",
        ),
        ("not: [a mapping", "default"),
    ],
)
def test_default_namespace_is_the_kubeconfig_contexts(
    tmp_path: Path, doc: Any, expected: str
) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    assert context_namespace(CFG, {"KUBECONFIG": str(path)}) == expected
    cfg = parse_config({"kubeconfig": str(path)}, env={})
    assert context_namespace(cfg, {}) == expected


def test_bad_flags_and_bad_config_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--interval", "0"]) == 2
    bad = tmp_path / "c.yaml"
    bad.write_text("nope: 1\n")
    assert main(["--config", str(bad)]) == 2
    assert "config key 'nope': unknown key" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["-n", "a", "-A"])


class WhyKube:
    """The pod ``found``, or none."""

    def __init__(self, found: bool) -> None:
        self.found = found

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any]:
        if not self.found:
            raise KubeNotFound(f"pods {name!r} not found in {namespace}")
        return {"metadata": {"name": name, "namespace": namespace}, "spec": {}, "status": {}}


class WhySlurm(FakeSlurm):
    async def list_nodes(self) -> tuple[Any, ...]:
        return ()


@pytest.mark.parametrize(
    ("kube", "slurm", "said"),
    [
        (WhyKube(False), WhySlurm(), "error: hpc/gone: pods 'gone' not found in hpc"),
        (WhyKube(True), WhySlurm(fail=True), "error: hpc/gone: jobs_get: cannot reach slurmrestd"),
    ],
    ids=["pod-not-found", "slurm-unreachable"],
)
async def test_why_says_which_side_failed_and_exits_1(kube: Any, slurm: Any, said: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = await run_why(CFG, "hpc/gone", "text", out=out, err=err, kube=kube, slurm=slurm)
    assert code == 1
    assert err.getvalue().startswith(said)
    assert out.getvalue() == ""


async def test_why_explains_a_pod_without_a_job_and_exits_0() -> None:
    out = io.StringIO()
    code = await run_why(CFG, "hpc/p", "text", out=out, kube=WhyKube(True), slurm=WhySlurm())  # type: ignore[arg-type]
    assert code == 0
    assert out.getvalue() == (
        "Pod hpc/p\n  no Slurm job yet: the scheduler has not looked at it yet\n"
    )
