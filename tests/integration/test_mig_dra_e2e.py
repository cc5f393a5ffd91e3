"""MIG slices through DRA end to end: REAL Slurm 26.05 (a State=EXTERNAL node whose GPU
is seven typed ``gpu:1g.10gb`` slices, tests/mig_sandbox.py), the sandbox API server with
the stand-in of NVIDIA's DRA driver publishing partitionable devices (every MIG placement
with shared counters, sandbox/controllers/dra_driver.py), and the scheduler.

Pods ask for a slice by a ResourceClaimTemplate whose DeviceClass and CEL selector pick
the profile, and by the DRA extended-resource form; each claim gets exactly the slice
Slurm's ``gres_detail`` names. A mixed node (a whole GPU and the slices of another), and
a slice Slurm gave that the slices do not show (the job given back), are tested too.
(The device plugin's form, ``nvidia.com/mig-1g.10gb`` without a DeviceClass, is
tests/integration/test_mig_e2e.py.)
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge.devices.allocation import DeviceId, Ledger, node_devices, taken_devices
from bridge.kube.resources import EVENTS, PODS
from bridge.wellknown import slurmjob_annotation
from sandbox.controllers import dra_driver
from scheduler.dra import CLAIM_TEMPLATES, DEVICE_CLASSES, RESOURCE_CLAIMS, RESOURCE_SLICES
from tests.integration.bridge_harness import NS, Bridge, has_job, job_of, pod, running_bridge
from tests.integration.conftest import SlurmSandbox, load_sandbox
from tests.mig_sandbox import mig_mixed_sandbox, mig_sandbox

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]

DRIVER = dra_driver.GPU_DRIVER
SHARED = {slurmjob_annotation("exclusive"): "false"}
PROFILE_SELECTOR = {"cel": {"expression": f'device.attributes["{DRIVER}"].profile == "1g.10gb"'}}
_IDX = re.compile(r"^gpu:1g\.10gb:(\d+)\(IDX:([0-9,-]+)\)$")


@pytest.fixture(scope="module")
def mig() -> Iterator[SlurmSandbox]:
    with mig_sandbox() as env_file:
        yield load_sandbox(env_file)


def indices(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


@contextlib.asynccontextmanager
async def mig_bridge(
    sb: SlurmSandbox,
    tmp_path: Path,
    *,
    slices: list[dict[str, Any]] | None = None,
    classes: list[dict[str, Any]] = (),  # type: ignore[assignment]
    **over: Any,
) -> AsyncIterator[Bridge]:
    """The bridge (scheduler and controller) with the MIG node's pool published as
    NVIDIA's driver would (``slices`` replaces it) and the driver's DeviceClasses."""
    async with running_bridge(sb, tmp_path, controller=True, **over) as b:
        for obj in [*dra_driver.device_classes(), *classes]:
            await b.kube.create(DEVICE_CLASSES, obj)
        (node,) = sb.external_nodes
        for obj in slices if slices is not None else dra_driver.mig_slices(node, 1):
            await b.kube.create(RESOURCE_SLICES, obj)
        yield b


def template(name: str, cls: str, selectors: list[Any] | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": cls}
    if selectors:
        exactly["selectors"] = selectors
    return {
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [{"name": "mig", "exactly": exactly}]}}},
    }


def claim_pod(name: str, tmpl: str) -> dict[str, Any]:
    p = pod(name, annotations=SHARED, cpu="100m")
    p["spec"]["resourceClaims"] = [{"name": "mig", "resourceClaimTemplateName": tmpl}]
    p["spec"]["containers"][0]["resources"]["claims"] = [{"name": "mig"}]
    return p


async def claim_of(b: Bridge, name: str) -> dict[str, Any]:
    async def named() -> str:
        p = await b.get_pod(name)
        st = p.get("status") or {}
        for s in st.get("resourceClaimStatuses") or []:
            if s.get("resourceClaimName"):
                return str(s["resourceClaimName"])
        ext = st.get("extendedResourceClaimStatus") or {}
        return str(ext.get("resourceClaimName") or "")

    claim = await b.wait_for(f"{name}'s claim", named)

    async def allocated() -> dict[str, Any] | None:
        c = await b.kube.get(RESOURCE_CLAIMS, claim, NS)
        return c if (c.get("status") or {}).get("allocation") else None

    return dict(await b.wait_for(f"{name}'s claim allocated", allocated))


def devices_of(claim: dict[str, Any]) -> list[str]:
    return [r["device"] for r in claim["status"]["allocation"]["devices"]["results"]]


async def slurm_slices(b: Bridge, name: str) -> tuple[int, list[int]]:
    job = await b.slurm.get_job(job_of(await b.get_pod(name)))
    (detail,) = job.gres_detail
    m = _IDX.match(detail)
    assert m, detail
    return int(m.group(1)), indices(m.group(2))


async def no_overcommit(b: Bridge, node: str) -> None:
    """Every claim of the cluster against the node's pool: no counter past its set, no
    device twice, no slice beside its full GPU."""
    claims = (await b.kube.list(RESOURCE_CLAIMS, NS)).items
    held = [
        DeviceId(r["driver"], r["pool"], r["device"])
        for c in claims
        for r in ((c.get("status") or {}).get("allocation") or {})
        .get("devices", {})
        .get("results", [])
    ]
    assert len(held) == len(set(held)), held
    slices = (await b.kube.list(RESOURCE_SLICES, field_selector=f"spec.nodeName={node}")).items
    ledger = Ledger.of(node_devices(slices, DRIVER), slices, taken_devices(claims))
    assert ledger.overcommitted() == []
    assert not ledger.whole & ledger.sliced


async def test_seven_claims_by_class_and_cel_fill_one_gpu_on_slurms_slices_and_an_eighth_waits(
    mig: SlurmSandbox, tmp_path: Path
) -> None:
    (node,) = mig.external_nodes
    async with mig_bridge(mig, tmp_path) as b:
        await b.kube.create(
            CLAIM_TEMPLATES, template("one-1g", "mig.nvidia.com", [PROFILE_SELECTOR]), NS
        )
        names = [f"migc-{secrets.token_hex(2)}-{i}" for i in range(8)]
        for n in names[:7]:
            await b.kube.create(PODS, claim_pod(n, "one-1g"), NS)
        for n in names[:7]:
            assert await b.bound(n, deadline=90) == node
        got: dict[str, str] = {}
        for n in names[:7]:
            count, idx = await slurm_slices(b, n)
            assert count == 1
            (device,) = devices_of(await claim_of(b, n))
            # Slurm's index i of gpu:1g.10gb is the GPU's 1g.10gb placement i
            assert device == f"gpu-0-mig-1g10gb-19-{idx[0]}", (device, idx)
            got[n] = device
        assert len(set(got.values())) == 7
        await no_overcommit(b, node)

        await b.kube.create(PODS, claim_pod(names[7], "one-1g"), NS)

        async def waiting() -> str:
            p = await b.get_pod(names[7])
            msg = await b.scheduled_message(names[7])
            return msg if has_job(p) and "pending" in msg else ""

        msg = await b.wait_for("the eighth pod's pending reason", waiting, deadline=60)
        assert "Resources" in msg, msg  # Slurm's own reason: no free slice

        # the first pod deleted: the controller cancels its job and releases its claim;
        # the eighth starts on the freed slice and its claim names it
        await b.kube.delete(PODS, names[0], NS)
        assert await b.bound(names[7], deadline=90) == node
        _, idx = await slurm_slices(b, names[7])
        assert devices_of(await claim_of(b, names[7])) == [got[names[0]]]
        assert got[names[0]].endswith(f"-{idx[0]}")
        await no_overcommit(b, node)


async def test_dra_extended_resource_form_of_a_mig_class_gets_slurms_slices_counted_once(
    mig: SlurmSandbox, tmp_path: Path
) -> None:
    (node,) = mig.external_nodes
    cls = dra_driver.mig_profile_class("1g.10gb", "nvidia.com/mig-1g.10gb")
    async with mig_bridge(mig, tmp_path, classes=[cls]) as b:
        name = f"migx-{secrets.token_hex(2)}"
        p = pod(name, annotations=SHARED, cpu="100m")
        p["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/mig-1g.10gb": "2"}
        await b.kube.create(PODS, p, NS)
        assert await b.bound(name, deadline=90) == node
        count, idx = await slurm_slices(b, name)
        assert count == 2  # the device plugin's name and the class's: asked once
        claim = await claim_of(b, name)
        assert claim["metadata"]["annotations"]["resource.kubernetes.io/extended-resource-claim"]
        assert sorted(devices_of(claim)) == sorted(f"gpu-0-mig-1g10gb-19-{i}" for i in idx)
        await no_overcommit(b, node)


async def test_a_slice_slurm_gave_that_the_slices_do_not_show_gives_the_job_back(
    mig: SlurmSandbox, tmp_path: Path
) -> None:
    """The node's pool shows three 1g.10gb placements; Slurm has seven: Slurm's layout
    cannot be placed on the node's devices, so a pod's job there is given back, told why
    (the type short), never given a guess."""
    (node,) = mig.external_nodes
    three = (dra_driver.placements("1g.10gb", 19, (0, 1, 2)),)
    slices = dra_driver.mig_slices(node, 1, profiles=three)
    async with mig_bridge(mig, tmp_path, slices=slices) as b:
        await b.kube.create(
            CLAIM_TEMPLATES, template("one-1g", "mig.nvidia.com", [PROFILE_SELECTOR]), NS
        )
        names = [f"migm-{secrets.token_hex(2)}-{i}" for i in range(5)]
        for n in names:
            await b.kube.create(PODS, claim_pod(n, "one-1g"), NS)

        async def mismatch() -> str:
            for n in names:
                msg = await b.scheduled_message(n)
                if "SlurmDevicesMismatch" in msg:
                    return f"{n} {msg}"
            return ""

        msg = await b.wait_for("a pod told of the mismatch", mismatch, deadline=90)
        assert "given back to Slurm" in msg, msg
        assert "cannot all be placed on its ResourceSlices' devices" in msg, msg
        assert "gpu:1g.10gb: 7 wanted, the node has 3 such device(s)" in msg, msg
        who = msg.split()[0]
        events = await b.kube.list(EVENTS, NS, field_selector=f"involvedObject.name={who}")
        assert any(
            e.get("type") == "Warning" and "cannot all be placed" in str(e.get("message"))
            for e in events.items
        ), [(e.get("reason"), e.get("message")) for e in events.items]
        await no_overcommit(b, node)


async def test_a_mismatch_never_loops_the_node_is_excluded_until_its_slices_change(
    mig: SlurmSandbox, tmp_path: Path
) -> None:
    """Slurm has seven 1g.10gb on the node, its pool shows three: each pod's job is given
    back ONCE (a Warning naming the node and its slices, the metric counted); its group
    never asks Slurm for that node again while the slices stay as they are. Once the
    driver publishes the whole GPU, the exclusion lifts and the pods run."""
    (node,) = mig.external_nodes
    three = (dra_driver.placements("1g.10gb", 19, (0, 1, 2)),)
    async with mig_bridge(
        mig,
        tmp_path,
        slices=dra_driver.mig_slices(node, 1, profiles=three),
        scheduler={"rejectBackoffSeconds": 0.5},
    ) as b:
        await b.kube.create(
            CLAIM_TEMPLATES, template("one-1g", "mig.nvidia.com", [PROFILE_SELECTOR]), NS
        )
        names = [f"migx-{secrets.token_hex(2)}-{i}" for i in range(2)]
        for n in names:
            await b.kube.create(PODS, claim_pod(n, "one-1g"), NS)

        async def mismatches() -> dict[str, int] | None:
            out = {}
            for n in names:
                events = await b.kube.list(EVENTS, NS, field_selector=f"involvedObject.name={n}")
                out[n] = sum(
                    1
                    for e in events.items
                    if e.get("type") == "Warning"
                    and "Slurm and the ResourceSlices disagree" in str(e.get("message"))
                )
            return out if all(out.values()) else None

        seen = await b.wait_for("each pod told of the mismatch", mismatches, deadline=90)
        assert seen == dict.fromkeys(names, 1), seen
        events = await b.kube.list(EVENTS, NS, field_selector=f"involvedObject.name={names[0]}")
        (msg,) = [
            str(e.get("message"))
            for e in events.items
            if "Slurm and the ResourceSlices disagree" in str(e.get("message"))
        ]
        assert f"node {node} is excluded for this group until its ResourceSlices" in msg, msg
        assert f"{node}-gpu-nvidia-com" in msg, msg
        # the groups keep trying (a short backoff), never on that node: no second give-back
        for _ in range(6):
            await asyncio.sleep(1)
            again = await mismatches()
            assert again == dict.fromkeys(names, 1), again
        assert b.sched.metrics.device_mismatches._value.get() == len(names)
        # the driver now publishes every placement: the node is asked for again
        for obj in dra_driver.mig_slices(node, 1, profiles=three):
            await b.kube.delete(RESOURCE_SLICES, obj["metadata"]["name"])
        for obj in dra_driver.mig_slices(node, 1):
            await b.kube.create(RESOURCE_SLICES, obj)
        for n in names:
            assert await b.bound(n, deadline=90) == node
        assert await mismatches() == dict.fromkeys(names, 1)
        await no_overcommit(b, node)


@pytest.fixture(scope="module")
def mixed() -> Iterator[SlurmSandbox]:
    with mig_mixed_sandbox() as env_file:
        yield load_sandbox(env_file)


async def test_mixed_node_gives_the_whole_gpu_and_the_slices_of_the_other(
    mixed: SlurmSandbox, tmp_path: Path
) -> None:
    """``gpu:a100:1(IDX:0),gpu:1g.10gb:7(IDX:1-7)``: the whole-GPU claim gets gpu-0, the
    slice claims the placements of gpu-1 that Slurm's indices 1-7 name."""
    (node,) = mixed.external_nodes
    slices = dra_driver.mig_slices(node, 1, full_gpus=1)
    async with mig_bridge(
        mixed,
        tmp_path,
        slices=slices,
        scheduler={
            "rejectBackoffSeconds": 0.5,
            "workers": 4,
            "deviceClassGres": {DRIVER: "gpu:a100"},
        },
    ) as b:
        await b.kube.create(
            CLAIM_TEMPLATES, template("one-1g", "mig.nvidia.com", [PROFILE_SELECTOR]), NS
        )
        await b.kube.create(CLAIM_TEMPLATES, template("one-gpu", DRIVER), NS)
        whole = f"mixw-{secrets.token_hex(2)}"
        await b.kube.create(PODS, claim_pod(whole, "one-gpu"), NS)
        names = [f"mixs-{secrets.token_hex(2)}-{i}" for i in range(7)]
        for n in names:
            await b.kube.create(PODS, claim_pod(n, "one-1g"), NS)
        for n in [whole, *names]:
            assert await b.bound(n, deadline=90) == node
        job = await b.slurm.get_job(job_of(await b.get_pod(whole)))
        assert job.gres_detail == ("gpu:a100:1(IDX:0)",)
        assert devices_of(await claim_of(b, whole)) == ["gpu-0"]
        seen = set()
        for n in names:
            _, idx = await slurm_slices(b, n)
            (device,) = devices_of(await claim_of(b, n))
            assert device == f"gpu-1-mig-1g10gb-19-{idx[0] - 1}", (device, idx)
            seen.add(device)
        assert len(seen) == 7
        await no_overcommit(b, node)
