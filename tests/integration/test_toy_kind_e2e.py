"""Adding a workload kind is one module and one registry line (docs/workload-kinds.md):
a toy kind, defined here and put in the registry only (no edit to grouping, translation,
the scheduler's state, snapshot or cycle), gets its gang scheduled by the real cycle
against real Slurm. Its object (a ConfigMap naming the gang's size) comes after its pods:
its arrival on the scheduler's watch wakes the gang (no timed retry)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from bridge import kobj
from bridge.kube.resources import PODS, Resource
from bridge.workloads import registry
from bridge.workloads.base import Api, Claim, GroupRef, Kind, Obj, Related
from tests.integration.bridge_harness import NS, Bridge, job_of, pod, running_bridge
from tests.integration.conftest import SlurmSandbox

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]

TOY_LABEL = "toy.example.com/gang"
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", True)


class ToyGang(Kind):
    """The pods labelled ``toy.example.com/gang: <name>``; their size is the ConfigMap
    ``<name>``'s ``data.size``; ordered by name (the default)."""

    name = "ToyGang"
    api = Api("", ("v1",), "configmaps", "ConfigMap", builtin=True)
    name_field = f"metadata.labels[{TOY_LABEL}]"
    source_field = name_field
    size_field = "data.size"

    def claim(self, c: Claim) -> GroupRef | None:
        name = c.labels.get(TOY_LABEL)
        return self.group(c, name) if name else None

    def size(
        self, ref: GroupRef, obj: Obj | None, pods: Sequence[Obj], related: Related
    ) -> int | None:
        raw = kobj.text(obj, "data", "size") if obj is not None else ""
        return int(raw) if raw.isdigit() else None


@pytest.fixture
async def bridge(
    sandbox: SlurmSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Bridge]:
    # the one registry line (first: it claims its pods before the plain pod does)
    monkeypatch.setattr(registry, "REGISTRY", (ToyGang(), *registry.REGISTRY))
    async with running_bridge(sandbox, tmp_path) as b:
        # the toy's API is not in the chart's RBAC: the scheduler runs as the admin here
        # (its chart line is the rule docs/workload-kinds.md adds)
        await b.stop_scheduler()
        b.sched_kube = None
        await b.start_scheduler()
        yield b


async def test_a_kind_added_through_the_registry_only_gets_its_gang_scheduled(
    bridge: Bridge,
) -> None:
    names = ["toy-0", "toy-1", "toy-2"]
    for n in names:
        await bridge.kube.create(PODS, pod(n, labels={TOY_LABEL: "toy"}), NS)

    async def waiting() -> str:
        msg = await bridge.scheduled_message(names[0])
        return msg if "ConfigMap slurm-bridge/toy" in msg else ""

    said = await bridge.wait_for("the gang waiting for its ConfigMap", waiting)
    assert f"metadata.labels[{TOY_LABEL}]" in said
    assert "does not exist" in said
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "toy"}}
    await bridge.kube.create(CONFIGMAPS, {**body, "data": {"size": "3"}}, NS)
    for n in names:
        await bridge.bound(n)
    ids = {job_of(await bridge.get_pod(n)) for n in names}
    assert len(ids) == 1  # one Slurm job for the gang
    job = await bridge.slurm.get_job(ids.pop())
    assert job.name == "toy"
    assert '"kind":"ToyGang"' in job.admin_comment.replace(" ", "")
