"""Issue #40's node end to end, against REAL Slurm 26.05: two A100-80GB GPUs cut the way
NVIDIA's docs show (GPU 0 ``3g.40gb+2g.20gb+1g.10gb*2``, GPU 1 ``1g.10gb*7``:
``Gres=gpu:3g.40gb:1,gpu:2g.20gb:1,gpu:1g.10gb:9``), published as NVIDIA's current DRA
driver does for dynamic MIG (counters in their own slice, every placement, names
``gpu-<minor>-mig-<profile>-<start>[-<end>]``, ``parentMinor``; tests/mig_sandbox.py
``mig_balanced_sandbox``), the scheduler and the controller.

The node's condition is True; every 1g/2g/3g pod is bound once with a slice of its
profile, no job is given back, no counter is overcommitted; the tenth 1g.10gb pod waits
for ``Resources`` and then gets the slice a finished pod freed."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge.kube.resources import EVENTS, NODES, PODS
from bridge.wellknown import CONDITION_SLURM_GRES_COMPATIBLE
from sandbox.controllers import dra_driver
from sandbox.slurm.mig import MigLayout
from scheduler.dra import CLAIM_TEMPLATES
from tests.integration.bridge_harness import NS, Bridge, has_job
from tests.integration.conftest import SlurmSandbox, load_sandbox
from tests.integration.test_mig_dra_e2e import (
    DRIVER,
    claim_of,
    claim_pod,
    devices_of,
    mig_bridge,
    no_overcommit,
    template,
)
from tests.mig_sandbox import BALANCED_LAYOUT, mig_balanced_sandbox

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]

GRES = "gpu:3g.40gb:1,gpu:2g.20gb:1,gpu:1g.10gb:9"


@pytest.fixture(scope="module")
def balanced() -> Iterator[SlurmSandbox]:
    with mig_balanced_sandbox() as env_file:
        yield load_sandbox(env_file)


def selector(profile: str) -> list[dict[str, object]]:
    return [{"cel": {"expression": f'device.attributes["{DRIVER}"].profile == "{profile}"'}}]


async def mismatches(b: Bridge) -> list[str]:
    events = (await b.kube.list(EVENTS, NS)).items
    return [
        str(e.get("message"))
        for e in events
        if "Slurm and the ResourceSlices disagree" in str(e.get("message"))
    ]


async def test_the_issues_balanced_node_runs_every_slice_once_and_the_tenth_waits(
    balanced: SlurmSandbox, tmp_path: Path
) -> None:
    (node,) = balanced.external_nodes
    slices = dra_driver.mig_pool(
        node, MigLayout.parse(BALANCED_LAYOUT), naming=dra_driver.NAMING_PROFILE_START_END
    )
    async with mig_bridge(
        balanced, tmp_path, slices=slices, scheduler={"rejectBackoffSeconds": 0.5}
    ) as b:
        assert (await b.slurm.get_node(node)).gres.startswith(GRES)

        async def compatible() -> dict[str, object] | None:
            n = await b.kube.get(NODES, node)
            for c in (n.get("status") or {}).get("conditions") or []:
                if c.get("type") == CONDITION_SLURM_GRES_COMPATIBLE and c["status"] == "True":
                    return dict(c)
            return None

        cond = await b.wait_for("the node's GRES condition True", compatible, deadline=60)
        assert "Gres=gpu:1g.10gb:9,gpu:2g.20gb:1,gpu:3g.40gb:1," in str(cond["message"]), cond
        for p in ("1g.10gb", "2g.20gb", "3g.40gb"):
            await b.kube.create(CLAIM_TEMPLATES, template(p, "mig.nvidia.com", selector(p)), NS)
        tag = secrets.token_hex(2)
        asks = {f"bal-{tag}-3g": "3g.40gb", f"bal-{tag}-2g": "2g.20gb"}
        asks |= {f"bal-{tag}-1g-{i}": "1g.10gb" for i in range(9)}
        for name, profile in asks.items():
            await b.kube.create(PODS, claim_pod(name, profile), NS)
        got: dict[str, str] = {}
        for name, profile in asks.items():
            assert await b.bound(name, deadline=120) == node
            (device,) = devices_of(await claim_of(b, name))
            assert f"-mig-{profile.replace('.', '')}-" in device, (name, device)
            got[name] = device
        assert len(set(got.values())) == 11
        # the nine 1g.10gb: two on GPU 0 beside its 3g and 2g, seven on GPU 1
        ones = sorted(d.split("-mig-")[0] for n, d in got.items() if "-1g-" in n)
        assert ones == ["gpu-0"] * 2 + ["gpu-1"] * 7, ones
        assert await mismatches(b) == []
        await no_overcommit(b, node)

        tenth = f"bal-{tag}-1g-9"
        await b.kube.create(PODS, claim_pod(tenth, "1g.10gb"), NS)

        async def waiting() -> str:
            p = await b.get_pod(tenth)
            msg = await b.scheduled_message(tenth)
            return msg if has_job(p) and "pending" in msg else ""

        msg = await b.wait_for("the tenth 1g pod's pending reason", waiting, deadline=60)
        assert "Resources" in msg, msg
        freed = f"bal-{tag}-1g-0"
        await b.kube.delete(PODS, freed, NS)
        assert await b.bound(tenth, deadline=90) == node
        assert devices_of(await claim_of(b, tenth)) == [got[freed]]
        assert await mismatches(b) == []
        await no_overcommit(b, node)
