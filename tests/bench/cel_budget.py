"""Claim CEL selectors on the scheduler's loop (``python -m tests.bench.cel_budget``):
``--claims`` ResourceClaims (default 100) of the largest selectors a Kubernetes 1.36 API
server accepts (8 requests x 16 selectors x 250 ``matches()``, each under 10 KiB, reading
each device's own ``uuid`` so that no two devices evaluate alike; ``--shape matching``: one
selector of 10 ``matches()`` on the uuid, that compiles within the budget but costs more to
match against every GPU; ``--shape typical``: a MIG profile), one pod each, resolved
by the scheduler's own DRA path (``scheduler.dra.DraAllocator.inputs`` over its
watch-fed cache, then ``bridge.translate.dra.pod_devices``: what a group's translation and
its allocation run) against ``--nodes`` nodes of the sandbox DRA driver's MIG layout (a
whole GPU and a cut one each: 15 devices a node). ``--workers`` tasks take the pods in
turn, ``--rounds`` times (the first round compiles; later ones find what was kept), and
yield between groups as the scheduler's workers do at their API calls.

Meanwhile a probe asks the loop for a 5 ms sleep, again and again: its lateness is the
loop's lag, what every other pod, watch and timer of the scheduler waits. Output, ONE JSON
line: ``claims``, ``refused`` (pods refused: over the budget, naming the expression),
``resolved``, ``lag_ms`` (``p50``, ``p99``, ``max``), ``group_ms`` (one group's resolution:
``p50``, ``p99``, ``max``), ``wall_s``, ``reason`` (one refusal, cut). Runs on any tree that
has ``DraAllocator`` and ``pod_devices`` (before and after the budget alike), with
``--claims`` small for a tree without the budget (a pod took seconds there).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any, cast

from bridge import loops
from bridge.config import DEFAULT_GRES_MAPPING
from bridge.errors import InvalidInput
from bridge.kube.client import KubeClient
from bridge.slurm.client import SlurmClient
from bridge.translate.dra import pod_devices
from sandbox.controllers import dra_driver
from scheduler.dra import DEVICE_CLASSES, RESOURCE_CLAIMS, RESOURCE_SLICES, DraAllocator

DRIVER = "gpu.nvidia.com"
PROBE_S = 0.005


def largest_selector(i: int) -> str:
    """250 matches() in under 10 KiB, each device read by its uuid (no two alike)."""
    uuid = f'device.attributes["{DRIVER}"].uuid != ""'
    return " && ".join([uuid, *([f'device.driver.matches("^gpu|x{i % 97}")'] * 249)])


def claim(n: int, shape: str = "largest") -> dict[str, Any]:
    if shape == "largest":  # 8 requests x 16 selectors
        cls, shaped = (
            DRIVER,
            [[largest_selector(n * 128 + k * 16 + j) for j in range(16)] for k in range(8)],
        )
    elif shape == "matching":  # compiles within the budget, matching every GPU does not
        uuid = f'device.attributes["{DRIVER}"].uuid != ""'
        cls, shaped = (
            DRIVER,
            [[" && ".join([uuid, *([f'device.driver.matches("^gpu|x{n}")'] * 10)])]],
        )
    else:  # typical: a MIG profile
        cls, shaped = (
            "mig.nvidia.com",
            [[f'device.attributes["{DRIVER}"].profile == "1g.10gb" || {n} == -1']],
        )
    requests = [
        {
            "name": f"r{k}",
            "exactly": {
                "deviceClassName": cls,
                "selectors": [{"cel": {"expression": e}} for e in sels],
            },
        }
        for k, sels in enumerate(shaped)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": f"c{n}", "namespace": "bench", "resourceVersion": "1"},
        "spec": {"devices": {"requests": requests}},
    }


def pod(n: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"p{n}", "namespace": "bench", "uid": f"u{n}"},
        "spec": {
            "containers": [{"name": "c"}],
            "resourceClaims": [{"name": "g", "resourceClaimName": f"c{n}"}],
        },
    }


def allocator(nodes: int, claims: int, shape: str = "largest") -> DraAllocator:
    dra = DraAllocator(
        cast(KubeClient, object()),  # never called: everything is in the cache
        cast(SlurmClient, object()),
        device_class_gres={DRIVER: "gpu"},
        gres_mapping=DEFAULT_GRES_MAPPING,
    )
    for c in dra_driver.device_classes():
        dra.cache.on_class_event("ADDED", c)
    for n in range(nodes):
        for s in dra_driver.mig_slices(f"node-{n}", 1, full_gpus=1):
            s["metadata"]["resourceVersion"] = "1"
            dra.cache.on_slice_event("ADDED", s)
    for i in range(claims):
        dra.cache.on_claim_event("ADDED", claim(i, shape))
    for res in (DEVICE_CLASSES, RESOURCE_SLICES, RESOURCE_CLAIMS):
        dra.cache.listed(res)
    return dra


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


def _figures(values: list[float]) -> dict[str, float]:
    return {"p50": _pct(values, 0.5), "p99": _pct(values, 0.99), "max": _pct(values, 1.0)}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    dra = allocator(args.nodes, args.claims, args.shape)
    pods = [pod(i) for i in range(args.claims)]
    lags: list[float] = []
    groups: list[float] = []
    refused: list[str] = []
    resolved = 0
    done = asyncio.Event()

    async def probe() -> None:
        while not done.is_set():
            t = time.perf_counter()
            await asyncio.sleep(PROBE_S)
            lags.append((time.perf_counter() - t - PROBE_S) * 1000)

    async def worker(mine: list[dict[str, Any]]) -> None:
        nonlocal resolved
        for p in mine:
            await dra.cel_turn()  # as the cycle takes it, before the snapshot's copy
            inputs = dra.inputs([p])
            assert inputs is not None
            t = time.perf_counter()  # what follows holds the loop: the group's CEL work
            try:
                pod_devices(p, inputs)
                resolved += 1
            except InvalidInput as e:
                refused.append(str(e))
            groups.append((time.perf_counter() - t) * 1000)
            await asyncio.sleep(0)  # the scheduler's workers await the API between groups

    started = time.perf_counter()
    probing = asyncio.create_task(probe())
    await asyncio.sleep(PROBE_S * 2)
    for _ in range(args.rounds):
        await asyncio.gather(*(worker(pods[w :: args.workers]) for w in range(args.workers)))
    done.set()
    await probing
    return {
        "claims": args.claims,
        "shape": args.shape,
        "refused": len(refused) // max(1, args.rounds),
        "resolved": resolved // max(1, args.rounds),
        "lag_ms": _figures(lags),
        "group_ms": _figures(groups),
        "wall_s": round(time.perf_counter() - started, 2),
        "nodes": args.nodes,
        "rounds": args.rounds,
        "reason": refused[0][:300] if refused else "",
    }


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m tests.bench.cel_budget",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--claims", type=int, default=100, help="claims (one pod each)")
    ap.add_argument("--nodes", type=int, default=100, help="nodes of DRA devices")
    ap.add_argument("--workers", type=int, default=16, help="scheduler workers (its default: 16)")
    ap.add_argument("--rounds", type=int, default=3, help="times each pod is resolved")
    ap.add_argument(
        "--shape",
        choices=("largest", "matching", "typical"),
        default="largest",
        help="the claims' selectors: the largest 1.36 accepts; one that compiles within the "
        "budget but whose matching of every GPU (its uuid, 10 matches()) does not; a MIG "
        "profile",
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    report = loops.run(run(args))  # as the scheduler runs: uvloop, modules frozen for the GC
    print(f"lag p99 {report['lag_ms']['p99']} ms, group p99 {report['group_ms']['p99']} ms")
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
