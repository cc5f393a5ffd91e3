"""Fractional GPUs end to end: REAL Slurm 26.05 with a State=EXTERNAL node whose one GPU
is seven MIG slices of ``1g.10gb`` (typed GRES ``gpu:1g.10gb:7``, tests/mig_sandbox.py),
the sandbox API server and the scheduler.

Pods ask for ``nvidia.com/mig-1g.10gb: 1`` (the device plugin's mixed strategy); each
placeholder job asks Slurm for ``gres/gpu:1g.10gb:1``. Seven fill the GPU, each with its
own slice index (gres.conf names a File= per slice, so Slurm reports ``IDX``); the eighth
waits with Slurm's reason in its PodScheduled condition.
"""

from __future__ import annotations

import contextlib
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge.devices.node_gres import GresKind, gres_text, parse_slurm_gres
from bridge.errors import SlurmNotFound, SlurmRejected
from bridge.kube.resources import NODES, PODS, RESOURCE_SLICES
from bridge.wellknown import (
    CONDITION_SLURM_GRES_COMPATIBLE,
    LABEL_EXTERNAL_NODE,
    slurmjob_annotation,
)
from tests.integration.bridge_harness import NS, has_job, job_of, pod, running_bridge
from tests.integration.conftest import (
    SlurmSandbox,
    load_sandbox,
    make_client,
    remove_dynamic_node,
)
from tests.integration.controller_harness import (
    controller_config,
    running_controller,
    sandbox_kube,
    unique_mcs,
)
from tests.integration.test_node_gres_e2e import mig_slice
from tests.mig_sandbox import mig_sandbox
from tests.waiting import eventually

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]

SLICE = "nvidia.com/mig-1g.10gb"
SLICES = 7
SHARED = {slurmjob_annotation("exclusive"): "false"}
_IDX = re.compile(r"^gpu:1g\.10gb:1\(IDX:(\d+)\)$")


@pytest.fixture(scope="module")
def mig() -> Iterator[SlurmSandbox]:
    with mig_sandbox() as env_file:
        yield load_sandbox(env_file)


def slice_pod(name: str, limits: dict[str, str]) -> dict[str, Any]:
    p = pod(name, annotations=SHARED, cpu="100m")
    p["spec"]["containers"][0]["resources"]["limits"] = limits
    return p


async def test_seven_slice_pods_fill_one_gpu_each_on_its_own_index_and_an_eighth_waits(
    mig: SlurmSandbox, tmp_path: Path
) -> None:
    (node,) = mig.external_nodes
    async with running_bridge(mig, tmp_path) as b:
        names = [f"mig-{secrets.token_hex(2)}-{i}" for i in range(SLICES + 1)]
        for n in names[:SLICES]:
            await b.kube.create(PODS, slice_pod(n, {SLICE: "1"}), NS)
        for n in names[:SLICES]:
            assert await b.bound(n, deadline=60) == node
        await b.kube.create(PODS, slice_pod(names[SLICES], {SLICE: "1"}), NS)

        async def waiting() -> str:
            p = await b.get_pod(names[SLICES])
            msg = await b.scheduled_message(names[SLICES])
            return msg if has_job(p) and "pending" in msg else ""

        msg = await b.wait_for("the eighth pod's pending reason", waiting, deadline=60)
        assert msg.startswith("False "), msg
        assert "Resources" in msg, msg  # Slurm's own reason: no free slice
        eighth = await b.slurm.get_job(job_of(await b.get_pod(names[SLICES])))
        assert eighth.state.primary == "PENDING"

        indices: list[int] = []
        for n in names[:SLICES]:
            job = await b.slurm.get_job(job_of(await b.get_pod(n)))
            assert job.nodes == (node,)
            (detail,) = job.gres_detail
            m = _IDX.match(detail)
            assert m, detail
            indices.append(int(m.group(1)))
        assert sorted(indices) == list(range(SLICES)), indices  # no slice given twice

        # a slice freed is the eighth's: it starts on the index the first one held
        first = await b.slurm.get_job(job_of(await b.get_pod(names[0])))
        freed = int(_IDX.match(first.gres_detail[0]).group(1))  # type: ignore[union-attr]
        await b.slurm.cancel(first.job_id)
        assert await b.bound(names[SLICES], deadline=60) == node
        job = await b.slurm.get_job(job_of(await b.get_pod(names[SLICES])))
        assert job.gres_detail == (f"gpu:1g.10gb:1(IDX:{freed})",)


async def test_an_unknown_profile_is_refused_naming_the_field(
    mig: SlurmSandbox, tmp_path: Path
) -> None:
    async with running_bridge(mig, tmp_path) as b:
        name = f"mig-bad-{secrets.token_hex(2)}"
        await b.kube.create(PODS, slice_pod(name, {"nvidia.com/mig-9g.99gb": "1"}), NS)

        async def refused() -> str:
            msg = await b.scheduled_message(name)
            return msg if "mig-9g.99gb" in msg else ""

        msg = await b.wait_for("the refusal", refused)
        assert "spec.containers[0].resources.limits[nvidia.com/mig-9g.99gb]" in msg, msg
        assert "has no Slurm GRES" in msg, msg
        assert not has_job(await b.get_pod(name))


async def test_slurm_refuses_a_typed_gpu_on_an_external_node_gres_conf_gives_no_file(
    mig: SlurmSandbox,
) -> None:
    """What docs/slurm-configuration.md says: a typed GPU needs a gres.conf line with
    ``File=`` for the node, even an external one; without it Slurm drops the GPU
    ("Ignoring file-less GPU") and refuses the node with that Gres."""
    name = f"nofile-{secrets.token_hex(3)}"  # gres.conf names mig-node-* only
    async with make_client(mig) as slurm:
        try:
            with pytest.raises(SlurmRejected) as e:
                await slurm.create_external_node(
                    name, cpus=8, memory_mib=16000, features=(), gres="gpu:1g.10gb:7"
                )
            assert "Invalid argument" in str(e.value), e.value
        finally:
            await remove_dynamic_node(slurm, name)


async def test_the_controller_registers_a_mig_node_with_the_typed_gres_of_its_slices(
    mig: SlurmSandbox,
) -> None:
    """The controller registers a labelled node with the GRES its ResourceSlices publish,
    MIG slices as the mapping table's typed GRES (``Gres=gpu:1g.10gb:7``); Slurm accepts it
    (gres.conf has the node's File= line) and the node's condition says they agree. The
    sandbox's own mig-node-0 is taken out for the test and put back as it was."""
    (node,) = mig.external_nodes
    cfg = controller_config(mig, unique_mcs())
    async with make_client(mig) as slurm:
        before = await slurm.get_node(node)
        await remove_dynamic_node(slurm, node)
        try:
            async with sandbox_kube(mig) as (_srv, kube), running_controller(cfg, kube):
                await kube.create(RESOURCE_SLICES, mig_slice(node, SLICES))
                labels = {LABEL_EXTERNAL_NODE: "true"}
                await kube.patch_node(node, {"metadata": {"labels": labels}}, patch_type="merge")

                async def registered() -> str:
                    with contextlib.suppress(SlurmNotFound):
                        sn = await slurm.get_node(node)
                        return sn.gres if sn.comment.endswith(cfg.mcs_label) else ""
                    return ""

                gres = await eventually(registered, within=30, what="the node registered")
                assert parse_slurm_gres(gres) == {GresKind("gpu", "1g.10gb"): SLICES}

                async def agrees() -> str:
                    for c in (await kube.get(NODES, node))["status"].get("conditions") or []:
                        if c["type"] == CONDITION_SLURM_GRES_COMPATIBLE:
                            return str(c["status"])
                    return ""

                assert await eventually(agrees, within=30, what="the condition") == "True"
        finally:
            await remove_dynamic_node(slurm, node)
            await slurm.create_external_node(
                node,
                cpus=before.cpus,
                memory_mib=before.real_memory_mib,
                features=before.features,
                gres=gres_text(parse_slurm_gres(before.gres)),
            )
