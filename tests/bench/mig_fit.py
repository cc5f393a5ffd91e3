"""Exact fit of MIG slices (``python -m tests.bench.fit --mig``): pods asking MIG slices of
several profiles, and whole GPUs, through a BUSY cluster of MIG nodes (more pods in flight
than devices, pods ending and new ones arriving), against REAL Slurm and the sandbox API
server, the scheduler in this process.

Each pod asks one device, in turn by ``--mix`` (default ``1g.10gb*3,2g.20gb*2,3g.40gb,
whole``): a MIG slice as the extended resource ``nvidia.com/mig-<profile>: 1``, or a whole
GPU as ``nvidia.com/gpu: 1`` (``scheduler.gresMapping`` types it ``gpu:<the layout's
whole type>``; with ``--untyped-whole`` it stays ``gpu``, and Slurm may give it a slice);
``exclusive: "false"`` so pods share a node. At most ``--mig-in-flight`` at once (default
twice the devices), each held ``--hold`` seconds (random up to) once bound, then ended
(its Slurm job cancelled, its pod finished).

What Slurm holds is checked two ways. SAMPLED while the pods run (every ``--sample`` s,
``GET /jobs/``: every running job's ``gres_detail``, one entry per node, with the indices
Slurm gave): each sample is one consistent view of slurmctld. And per JOB WINDOW: from the
bench's read of a bound pod's running job to its cancel's answer, the job surely held
what it read; the windows are replayed at each one's start, so every overlap is checked,
not only those a sample fell on. The
sandbox lays each MIG node's GPUs out as ``--mig-layout`` (sandbox/slurm/mig.py): device
index -> physical GPU and type; each profile's compute and memory slices come from
bridge/devices/mig.py ``NVIDIA_MIG_GPUS`` for ``--mig-gpu``. Output, ONE JSON line:

* ``slices_requested`` / ``slices_allocated``: MIG slices the pods asked, and those Slurm
  held for them (read from their job when bound, of the profile asked); the same for
  ``whole_gpus_*``; ``wrong_type``: pods whose job held another type than asked;
* ``counter_overcommits``: (sample or window start, GPU) pairs where the slices held on
  one physical GPU consume more compute or memory slices than it has (must be 0);
* ``double_allocations``: (node, index) devices seen held by two jobs at once (must be 0);
* ``layout_mismatches``: held devices whose type is not the layout's at that index (the
  benchmark's own check of its index -> GPU map; 0);
* ``wait_s`` (created -> bound: ``p50``, ``p99``), ``bound``, ``unbound`` (pods not bound
  within ``--limit`` s: counted and deleted, the run goes on), ``scheduler_cancels`` (jobs
  the scheduler cancelled: given back to Slurm, or of a pod deleted), ``peak_devices_held``,
  ``samples``, ``job_windows``.

``--claims``: the pods ask by ResourceClaimTemplate instead (a slice: class
``mig.nvidia.com`` and a CEL selector on ``profile``; a whole GPU: ``gpu.nvidia.com``,
``scheduler.deviceClassGres`` typing it), on every node the sandbox DRA driver stand-in's
pool (sandbox/controllers/dra_driver.py ``mig_slices``: the layout's whole GPUs, then each
cut GPU with every placement of every profile and its ``sharedCounters``). The claims'
allocations are checked the same two ways, in DRA's own terms (every allocated claim of
the API server sampled every 0.05 s; each claim's window from its read once the pod is
bound to the pod's end): ``claims``: ``counter_overcommits`` (a counter set whose
devices held consume more than it has), ``double_allocations`` (a device in two claims),
``wrong_device`` (a claim given a device of another profile or kind), ``unknown_devices``
(a device no slice publishes); the totals above include them.

Sandbox: the one ``$SLURM_SANDBOX_MIG_ENV`` or ``$SLURM_SANDBOX_ENV`` names when it has
MIG nodes with a layout, else one of its own (``up --mig-nodes 3 --mig-layout
a100,3g.40gb+2g.20gb+1g.10gb*2``: per node a whole GPU and a GPU cut in four), in the
tests' sandbox dir + ``-migfit`` on the tests' ports + 70, stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import re
import secrets
import statistics
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from bridge.devices.mig import MigGpu, nvidia_mig_gpu
from bridge.errors import ConfigError, KubeError, SlurmError
from bridge.kube.resources import PODS, RESOURCE_CLAIMS
from bridge.slurm.client import SlurmClient
from bridge.translate.quantity import parse_non_negative
from bridge.wellknown import LABEL_JOB_ID, slurmjob_annotation
from sandbox.cluster import SandboxCluster
from sandbox.controllers import dra_driver
from sandbox.slurm.launcher import ENV_FILE, parse_env_file
from sandbox.slurm.mig import MIG_PROFILE, MigLayout
from scheduler.dra import CLAIM_TEMPLATES, DEVICE_CLASSES, RESOURCE_SLICES
from tests.bench.scheduler import percentile
from tests.bench.topology import scheduler_for
from tests.clients import list_jobs
from tests.integration.bridge_harness import Sandboxes
from tests.integration.conftest import SlurmSandbox, load_sandbox, make_client
from tests.mig_sandbox import ENV_MIG
from tests.topology_sandbox import own_sandbox
from tests.waiting import eventually

NS = "slurm-bridge"
WHOLE = "whole"
LAYOUT = "a100,3g.40gb+2g.20gb+1g.10gb*2"
GPU_MODEL = "A100-80GB"
MIX = "1g.10gb*3,2g.20gb*2,3g.40gb,whole"
PORT_OFFSET = 70
# one typed GRES of a gres_detail entry: gpu:1g.10gb:2(IDX:3-4) or gpu:1g.10gb(CNT:2)
_HELD = re.compile(r"(?P<name>[a-z]+)(?::(?P<type>[^:(),]+))?(?::(?P<n>\d+))?\((?P<what>[^)]*)\)")


@dataclass(frozen=True)
class Held:
    """Devices of one type a job holds on one node: their indices when Slurm names them."""

    type: str
    count: int
    indices: tuple[int, ...]


def parse_indices(text: str) -> tuple[int, ...]:
    """``0,2-3`` -> (0, 2, 3)."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return tuple(out)


def held_gpus(entry: str) -> tuple[Held, ...]:
    """The GPUs in one node's ``gres_detail`` entry: ``gpu:a100:1(IDX:0),gpu:1g.10gb:2(IDX:
    3-4)``; a count without indices (``gpu:1g.10gb(CNT:2)``) has none. A type the job
    holds none of (``gpu:h100:0(IDX:)``, an untyped request on a node of several types) is
    left out."""
    out: list[Held] = []
    for m in _HELD.finditer(entry):
        if m.group("name") != "gpu":
            continue
        what = m.group("what")
        if what.startswith("CNT:"):
            out.append(Held(m.group("type") or "", int(what[4:]), ()))
        elif what.startswith("IDX:") and what not in ("IDX:", "IDX:N/A"):
            idx = parse_indices(what[4:])
            out.append(Held(m.group("type") or "", int(m.group("n") or len(idx)), idx))
    return tuple(out)


@dataclass
class Ledger:
    """What Slurm held, sample by sample, checked against the nodes' physical GPUs."""

    layout: MigLayout
    gpu: MigGpu
    samples: int = 0
    overcommits: int = 0
    mismatches: int = 0
    peak: int = 0
    doubles: set[tuple[str, int, frozenset[int]]] = field(default_factory=set)

    def counters(self, kind: str) -> tuple[int, int]:
        """(compute, memory) slices a device of ``kind`` takes of its GPU: all of them for a
        whole GPU."""
        if kind in {p.name for p in self.gpu.profiles}:
            p = self.gpu.profile(kind)
            return p.compute, p.memory
        return self.gpu.compute, self.gpu.memory

    def sample(self, held: Mapping[int, Mapping[str, tuple[Held, ...]]]) -> None:
        """One snapshot: job id -> node -> what it holds there."""
        self.samples += 1
        devices = self.layout.devices
        owners: dict[tuple[str, int], set[int]] = {}
        for job_id, nodes in held.items():
            for node, items in nodes.items():
                for h in items:
                    for i in h.indices:
                        owners.setdefault((node, i), set()).add(job_id)
                        if i >= len(devices) or devices[i].type != h.type:
                            self.mismatches += 1
        self.peak = max(self.peak, len(owners))
        use: dict[tuple[str, int], list[int]] = {}
        for (node, i), jobs in owners.items():
            if len(jobs) > 1:
                self.doubles.add((node, i, frozenset(jobs)))
            if i >= len(devices):
                continue
            c, m = self.counters(devices[i].type)
            u = use.setdefault((node, devices[i].gpu), [0, 0])
            u[0] += c * len(jobs)
            u[1] += m * len(jobs)
        self.overcommits += sum(
            1 for c, m in use.values() if c > self.gpu.compute or m > self.gpu.memory
        )


@dataclass(frozen=True)
class Window:
    """What one job surely held, and when: from the bench's read of its running record
    (``gres_detail``) to its cancel's answer (monotonic seconds)."""

    job_id: int
    start: float
    end: float
    held: Mapping[str, tuple[Held, ...]]


def replay(ledger: Ledger, windows: list[Window]) -> None:
    """Feed ``ledger`` what every job held at each moment one began: every overlap of two
    windows is seen, not only those a sample fell on."""
    for w in windows:
        ledger.sample({o.job_id: o.held for o in windows if o.start <= w.start < o.end})


# ------------------------------------------------------------------ --claims: ask by claim
DeviceKey = tuple[str, str, str]  # (driver, pool, device)
CounterKey = tuple[str, str, str]  # (driver, pool, counter set)


@dataclass(frozen=True)
class Pool:
    """What the nodes' ResourceSlices publish: each device's counter consumption and
    attributes, each counter set's size."""

    consumes: Mapping[DeviceKey, tuple[tuple[CounterKey, Mapping[str, Decimal]], ...]]
    attributes: Mapping[DeviceKey, Mapping[str, Any]]
    shared: Mapping[CounterKey, Mapping[str, Decimal]]

    @classmethod
    def of(cls, slices: list[Mapping[str, Any]]) -> Pool:
        consumes: dict[DeviceKey, tuple[tuple[CounterKey, Mapping[str, Decimal]], ...]] = {}
        attributes: dict[DeviceKey, Mapping[str, Any]] = {}
        shared: dict[CounterKey, Mapping[str, Decimal]] = {}
        for s in slices:
            spec = s.get("spec") or {}
            driver, pool = spec.get("driver", ""), (spec.get("pool") or {}).get("name", "")
            for cs in spec.get("sharedCounters") or []:
                shared[(driver, pool, cs["name"])] = _amounts(cs.get("counters"))
            for d in spec.get("devices") or []:
                key = (driver, pool, d["name"])
                attributes[key] = {
                    k: next(iter(v.values()), None) for k, v in (d.get("attributes") or {}).items()
                }
                consumes[key] = tuple(
                    ((driver, pool, c["counterSet"]), _amounts(c.get("counters")))
                    for c in d.get("consumesCounters") or []
                )
        return cls(consumes, attributes, shared)


def _amounts(counters: Any) -> dict[str, Decimal]:
    return {
        name: parse_non_negative(str(c.get("value", "0")), field=f"counters[{name}]")
        for name, c in (counters or {}).items()
    }


def claim_devices(claim: Mapping[str, Any]) -> tuple[DeviceKey, ...]:
    """The devices a claim's allocation gives (none while it has none)."""
    alloc = (claim.get("status") or {}).get("allocation") or {}
    return tuple(
        (r.get("driver", ""), r.get("pool", ""), r.get("device", ""))
        for r in (alloc.get("devices") or {}).get("results") or []
    )


@dataclass
class ClaimLedger:
    """What the ResourceClaims held, sample by sample, against the pool's shared
    counters: the same checks as :class:`Ledger`, in DRA's own terms."""

    pool: Pool
    samples: int = 0
    overcommits: int = 0
    unknown: int = 0
    doubles: set[tuple[DeviceKey, frozenset[str]]] = field(default_factory=set)

    def sample(self, held: Mapping[str, tuple[DeviceKey, ...]]) -> None:
        """One snapshot: claim uid -> the devices its allocation gives."""
        self.samples += 1
        owners: dict[DeviceKey, set[str]] = {}
        for uid, devices in held.items():
            for d in devices:
                owners.setdefault(d, set()).add(uid)
        use: dict[CounterKey, dict[str, Decimal]] = {}
        for d, uids in owners.items():
            if len(uids) > 1:
                self.doubles.add((d, frozenset(uids)))
            if d not in self.pool.consumes:
                self.unknown += 1
                continue
            for cset, amounts in self.pool.consumes[d]:
                u = use.setdefault(cset, {})
                for name, q in amounts.items():
                    u[name] = u.get(name, Decimal(0)) + q * len(uids)
        for cset, u in use.items():
            size = self.pool.shared.get(cset, {})
            if any(q > size.get(name, Decimal(0)) for name, q in u.items()):
                self.overcommits += 1


def mig_env_file(environ: Mapping[str, str]) -> Path | None:
    """The env file of a sandbox the environment names that has MIG nodes with a layout."""
    for given in (environ.get(ENV_MIG), environ.get(ENV_FILE)):
        if given and Path(given).is_file():
            env = parse_env_file(Path(given).read_text())
            if env.get("SLURM_MIG_NODES") and env.get("SLURM_MIG_LAYOUT"):
                return Path(given)
    return None


@contextlib.contextmanager
def mig_fit_sandbox(args: argparse.Namespace) -> Iterator[Path]:
    given = mig_env_file(os.environ)
    if given is not None:
        yield given
        return
    up: tuple[str, ...] = ("--nodes", "1", "--external-nodes", "0", "--node-gpus", "0")
    up += ("--mig-nodes", str(args.mig_nodes), "--mig-layout", args.mig_layout)
    up += ("--mig-gpu", args.mig_gpu)
    with own_sandbox(os.environ, "-migfit", PORT_OFFSET, up) as env_file:
        yield env_file


def parse_mix(text: str) -> list[str]:
    """``1g.10gb*3,whole`` -> ['1g.10gb', '1g.10gb', '1g.10gb', 'whole']."""
    out: list[str] = []
    for part in text.split(","):
        kind, _, n = part.strip().partition("*")
        if not kind or (n and not n.isdigit()):
            raise ConfigError("mix", f"{part!r} is not <profile or whole>[*N]")
        out += [kind] * int(n or 1)
    return out


def template_name(kind: str) -> str:
    return "whole-gpu" if kind == WHOLE else f"mig-{kind.replace('.', '-')}"


def claim_template(kind: str) -> dict[str, Any]:
    """One device of ``kind``: a MIG profile picked by ``mig.nvidia.com`` and CEL, or a
    whole GPU of ``gpu.nvidia.com``."""
    exactly: dict[str, Any] = {"deviceClassName": dra_driver.GPU_DRIVER}
    if kind != WHOLE:
        expr = f'device.attributes["{dra_driver.GPU_DRIVER}"].profile == "{kind}"'
        exactly = {
            "deviceClassName": dra_driver.MIG_CLASS,
            "selectors": [{"cel": {"expression": expr}}],
        }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": template_name(kind)},
        "spec": {"spec": {"devices": {"requests": [{"name": "dev", "exactly": exactly}]}}},
    }


def slice_pod(name: str, kind: str, *, by_claim: bool = False) -> dict[str, Any]:
    """A pod asking one device of ``kind``: the extended resource, or (``by_claim``) a
    claim from :func:`claim_template`'s template."""
    resources: dict[str, Any] = {"requests": {"cpu": "100m", "memory": "100Mi"}}
    spec: dict[str, Any] = {"schedulerName": "slurm-bridge-scheduler"}
    if by_claim:
        resources["claims"] = [{"name": "dev"}]
        spec["resourceClaims"] = [{"name": "dev", "resourceClaimTemplateName": template_name(kind)}]
    else:
        resource = "nvidia.com/gpu" if kind == WHOLE else f"nvidia.com/mig-{kind}"
        resources["limits"] = {resource: "1"}
    spec["containers"] = [
        {"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": resources}
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": {slurmjob_annotation("exclusive"): "false"}},
        "spec": spec,
    }


@dataclass(frozen=True)
class ClaimWindow:
    """What one claim surely held, and when: from the read of its allocation once its pod
    was bound to the pod's end (monotonic seconds)."""

    uid: str
    start: float
    end: float
    devices: tuple[DeviceKey, ...]


def replay_claims(ledger: ClaimLedger, windows: list[ClaimWindow]) -> None:
    """:func:`replay` for claims."""
    for w in windows:
        ledger.sample({o.uid: o.devices for o in windows if o.start <= w.start < o.end})


class Run:
    """The pods, what they asked and what Slurm held for them."""

    def __init__(self, sb: Sandboxes, whole_type: str, pool: Pool | None = None) -> None:
        self.sb, self.whole_type = sb, whole_type
        self.pool = pool  # asking by claim: what the nodes publish
        self.claim_windows: list[ClaimWindow] = []
        self.claim_wrong = 0
        self.waits: list[float] = []
        self.asked: dict[str, int] = {}
        self.got: dict[str, int] = {}
        self.wrong_type = 0
        self.unbound = 0
        self.windows: list[Window] = []

    async def pod(self, i: int, kind: str, hold: float, limit: float) -> None:
        name = f"mig-{secrets.token_hex(2)}-{i}"
        started = time.monotonic()
        await self.sb.kube.create(PODS, slice_pod(name, kind, by_claim=self.pool is not None), NS)
        self.asked[kind] = self.asked.get(kind, 0) + 1

        async def bound() -> dict[str, Any] | None:
            p = await self.sb.get_pod(name)
            return p if (p.get("spec") or {}).get("nodeName") else None

        try:
            p = await eventually(bound, within=limit, what=f"pod {name} bound", every=0.05)
        except AssertionError:  # never bound within --limit: counted, and deleted
            self.unbound += 1
            with contextlib.suppress(KubeError):
                await self.sb.kube.delete_pod(NS, name)
            return
        self.waits.append(time.monotonic() - started)
        job = await self.sb.slurm.get_job(int(p["metadata"]["labels"][LABEL_JOB_ID]))
        read = time.monotonic()
        want = self.whole_type if kind == WHOLE else kind
        for entry in job.gres_detail:
            for h in held_gpus(entry):
                if h.type == want:
                    self.got[kind] = self.got.get(kind, 0) + h.count
                else:
                    self.wrong_type += 1
        claim = await self.claim_of(p, kind) if self.pool is not None else None
        claimed = time.monotonic()
        await asyncio.sleep(hold)
        with contextlib.suppress(SlurmError):
            await self.sb.slurm.cancel(job.job_id)
        held = {n: held_gpus(e) for n, e in zip(job.nodes, job.gres_detail, strict=False)}
        self.windows.append(Window(job.job_id, read, time.monotonic(), held))
        self.sb.api.finish_pod(NS, name)
        if claim is not None:
            uid = claim["metadata"]["uid"]
            self.claim_windows.append(
                ClaimWindow(uid, claimed, time.monotonic(), claim_devices(claim))
            )

    async def claim_of(self, pod: dict[str, Any], kind: str) -> dict[str, Any] | None:
        """The bound pod's claim as allocated (the bridge writes it before binding); a
        device not of ``kind`` counts in ``claim_wrong``."""
        assert self.pool is not None
        statuses = (pod.get("status") or {}).get("resourceClaimStatuses") or []
        names = [s.get("resourceClaimName") for s in statuses if s.get("resourceClaimName")]
        if not names:
            self.claim_wrong += 1
            return None
        claim = await self.sb.kube.get(RESOURCE_CLAIMS, names[0], NS)
        for d in claim_devices(claim) or [("", "", "")]:
            attrs = self.pool.attributes.get(d, {})
            ok = attrs.get("type") == "gpu" if kind == WHOLE else attrs.get("profile") == kind
            self.claim_wrong += not ok
        return dict(claim)


async def sampler(slurm: SlurmClient, ledger: Ledger, every: float, stop: asyncio.Event) -> None:
    """Every ``every`` s, what each running job of the partition holds, per node."""
    while not stop.is_set():
        jobs = (await list_jobs(slurm)).jobs
        held: dict[int, dict[str, tuple[Held, ...]]] = {}
        for j in jobs:
            if j.state.primary != "RUNNING" or not j.gres_detail:
                continue
            held[j.job_id] = {
                node: held_gpus(entry) for node, entry in zip(j.nodes, j.gres_detail, strict=False)
            }
        ledger.sample(held)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every)


async def claim_sampler(
    api: SandboxCluster, ledger: ClaimLedger, every: float, stop: asyncio.Event
) -> None:
    """Every ``every`` s, what each allocated ResourceClaim of the API server gives."""
    key = (RESOURCE_CLAIMS.group, RESOURCE_CLAIMS.plural)
    while not stop.is_set():
        ledger.sample({c["metadata"]["uid"]: claim_devices(c) for c in api.store.list(key)})
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every)


async def publish(kube: Any, nodes: list[str], layout: MigLayout) -> Pool:
    """NVIDIA's DeviceClasses, the claim templates, and each node's pool as the DRA
    driver stand-in publishes it for ``layout`` (its whole GPUs first, then the GPUs it
    cuts: each with every placement of every profile and its shared counters)."""
    whole = sum(1 for g in layout.gpus if len(g) == 1 and not MIG_PROFILE.fullmatch(g[0]))
    if any(len(g) == 1 and not MIG_PROFILE.fullmatch(g[0]) for g in layout.gpus[whole:]):
        raise ConfigError("mig_layout", f"{layout}: --claims needs the whole GPUs first")
    for obj in dra_driver.device_classes():
        await kube.create(DEVICE_CLASSES, obj)
    slices: list[dict[str, Any]] = []
    for node in nodes:
        for obj in dra_driver.mig_slices(node, len(layout.gpus) - whole, full_gpus=whole):
            slices.append(dict(await kube.create(RESOURCE_SLICES, obj)))
    return Pool.of(slices)


async def run_mig(args: argparse.Namespace) -> dict[str, Any]:
    kinds = parse_mix(args.mix)
    with mig_fit_sandbox(args) as env_file:
        env = parse_env_file(env_file.read_text())
        layout = MigLayout.parse(env["SLURM_MIG_LAYOUT"])
        model = nvidia_mig_gpu(env.get("SLURM_MIG_GPU") or GPU_MODEL)
        whole = [d.type for d in layout.devices if d.whole]
        if WHOLE in kinds and not whole:
            raise ConfigError("mix", f"asks whole GPUs, the layout {layout} has none")
        sb = load_sandbox(env_file)
        in_flight = args.in_flight_mig or 2 * len(layout.devices) * len(sb.external_nodes)
        report = await run_pods(
            sb, args, in_flight, kinds, layout, model, whole[0] if whole else ""
        )
    report["nodes"] = {
        "mig_nodes": len(sb.external_nodes),
        "layout": str(layout),
        "gpu": model.model,
        "devices_per_node": len(layout.devices),
    }
    return report


async def run_pods(
    sb: SlurmSandbox,
    args: argparse.Namespace,
    in_flight: int,
    kinds: list[str],
    layout: MigLayout,
    model: MigGpu,
    whole_type: str,
) -> dict[str, Any]:
    ledger = Ledger(layout, model)
    # whole GPUs typed: untyped, Slurm may give a whole-GPU pod a MIG slice
    typed = whole_type and not args.untyped_whole
    mapping = {"nvidia.com/gpu": f"gpu:{whole_type}"} if typed else {}
    classes = {dra_driver.GPU_DRIVER: f"gpu:{whole_type}" if typed else "gpu"}
    config = {"scheduler": {"workers": 8, "gresMapping": mapping, "deviceClassGres": classes}}
    claims: ClaimLedger | None = None
    claim_windows = ClaimLedger(Pool({}, {}, {}))
    stop = asyncio.Event()
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            SandboxCluster(nodes=list(sb.external_nodes), kubelet=True) as api,
            scheduler_for(sb, api, Path(tmp), "mig", **config) as (kube, counting),
            make_client(sb) as slurm,
        ):
            pool = None
            if args.claims:
                pool = await publish(kube, list(sb.external_nodes), layout)
                claims = ClaimLedger(pool)
                claim_windows = ClaimLedger(pool)
                for kind in sorted(set(kinds)):
                    await kube.create(CLAIM_TEMPLATES, claim_template(kind), NS)
            run = Run(Sandboxes(kube, slurm, api), whole_type, pool)
            slots = asyncio.Semaphore(in_flight)
            rng = random.Random(args.seed)
            plan = [(kinds[i % len(kinds)], rng.random() * args.hold) for i in range(args.pods)]
            rng.shuffle(plan)
            watch = asyncio.create_task(sampler(slurm, ledger, args.sample, stop))
            watch_claims = (
                asyncio.create_task(claim_sampler(api, claims, 0.05, stop)) if claims else None
            )

            async def one(i: int) -> None:
                async with slots:
                    await run.pod(i, *plan[i], args.limit)

            try:
                await asyncio.gather(*(one(i) for i in range(args.pods)))
            finally:
                stop.set()
                try:
                    await watch
                    if watch_claims is not None:
                        await watch_claims
                finally:
                    await Sandboxes(kube, slurm, api).cancel_jobs()
            given_back = counting.calls["job_cancel"]
    windows = Ledger(layout, model)
    replay(windows, run.windows)
    replay_claims(claim_windows, run.claim_windows)
    by_claim = claims or ClaimLedger(Pool({}, {}, {}))
    mig_kinds = [k for k in run.asked if k != WHOLE]
    by_profile = {
        k: {"requested": run.asked.get(k, 0), "allocated": run.got.get(k, 0)}
        for k in sorted(run.asked)
    }
    return {
        "mode": "mig-claims" if claims is not None else "mig",
        "pods": args.pods,
        "in_flight": in_flight,
        "slices_requested": sum(run.asked[k] for k in mig_kinds),
        "slices_allocated": sum(run.got.get(k, 0) for k in mig_kinds),
        "whole_gpus_requested": run.asked.get(WHOLE, 0),
        "whole_gpus_allocated": run.got.get(WHOLE, 0),
        "wrong_type": run.wrong_type,
        "counter_overcommits": ledger.overcommits
        + windows.overcommits
        + by_claim.overcommits
        + claim_windows.overcommits,
        "double_allocations": len(ledger.doubles | windows.doubles)
        + len(by_claim.doubles | claim_windows.doubles),
        "layout_mismatches": ledger.mismatches + windows.mismatches,
        "wait_s": {
            "p50": round(statistics.median(run.waits), 3) if run.waits else 0.0,
            "p99": round(percentile(run.waits, 0.99), 3) if run.waits else 0.0,
        },
        "bound": len(run.waits),
        "unbound": run.unbound,
        "scheduler_cancels": given_back,
        "samples": ledger.samples,
        "job_windows": len(run.windows),
        "peak_devices_held": ledger.peak,
        "by_profile": by_profile,
        **(
            {
                "claims": {
                    "counter_overcommits": by_claim.overcommits + claim_windows.overcommits,
                    "double_allocations": len(by_claim.doubles | claim_windows.doubles),
                    "wrong_device": run.claim_wrong,
                    "unknown_devices": by_claim.unknown + claim_windows.unknown,
                    "samples": by_claim.samples,
                    "claim_windows": len(run.claim_windows),
                }
            }
            if claims is not None
            else {}
        ),
    }


def add_mig_args(ap: argparse.ArgumentParser) -> None:
    g = ap.add_argument_group("--mig: MIG slices through a busy cluster")
    g.add_argument("--mig", action="store_true", help="run the MIG benchmark instead of gangs")
    g.add_argument(
        "--claims",
        action="store_true",
        help="pods ask by ResourceClaimTemplate (mig.nvidia.com + CEL, gpu.nvidia.com) on the "
        "DRA driver stand-in's partitionable devices; their allocations are checked too",
    )
    g.add_argument("--pods", type=int, default=120, help="pods, one device each (--mig)")
    g.add_argument("--mix", default=MIX, help=f"what the pods ask in turn (default {MIX})")
    g.add_argument("--mig-in-flight", dest="in_flight_mig", type=int, default=0,
                   help="pods at once (default: twice the devices)")  # fmt: skip
    g.add_argument("--mig-nodes", type=int, default=3, help="MIG nodes of its own sandbox")
    g.add_argument("--mig-layout", default=LAYOUT, help=f"their GPUs (default {LAYOUT})")
    g.add_argument("--mig-gpu", default=GPU_MODEL, help=f"their GPU model (default {GPU_MODEL})")
    g.add_argument(
        "--untyped-whole",
        action="store_true",
        help="leave nvidia.com/gpu untyped (gpu): shows Slurm giving whole-GPU pods slices",
    )
    g.add_argument("--sample", type=float, default=0.25, help="seconds between samples")
