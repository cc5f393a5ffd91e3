"""Property-based fuzz (hypothesis, bounded examples) of device ownership (issue 39, "Done
when"): tenants of two namespaces with ResourceClaims (their own, or one claim name they
share across groups), ``gres`` annotations (one namespace's policy lets pods set it, the
other's does not; the webhook is sometimes bypassed) and a native Slurm job holding GPUs of
the shared node. Each group goes through the real pieces: the webhook's ``validate``, the
scheduler's translation and policy, a model of Slurm placing the job (indices on the
slurmd-backed shared node, a count on the external node; never a GPU another job holds),
and :class:`scheduler.dra.DraAllocator` writing the claims (in-memory API objects); jobs
end at random and their claims are released as kube-controller-manager would.

The invariant: no device is ever held by two (pod, job) pairs of different jobs (the native
job holds its GPUs), and every claim holds only devices Slurm gave the job of each pod it
is reserved for, in number (counted node) and index (slurmd node)."""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from admission.policy import AdmissionContext
from admission.review import parse_review
from admission.validate import validate
from bridge import wellknown
from bridge.config import DEFAULT_GRES_MAPPING, parse_config
from bridge.errors import DeviceAllocationError, InvalidInput, KubeConflict, KubeNotFound
from bridge.slurm.models import GresAllocation, NodeResources
from bridge.translate.dra import DraInputs
from bridge.translate.job import translate_group
from bridge.translate.policy import resolve_policy
from bridge.translate.settings import TranslateSettings
from sandbox.controllers import dra_driver
from scheduler.dra import DraAllocator
from tests.admission_helpers import make_review

TENANTS = ("team-a", "team-b")  # team-a's policy lets pods set gres, team-b's does not
SHARED, EXTERNAL = "shared-0", "ext-0"  # slurmd-backed (indices), external (a count)
GPUS = {SHARED: 4, EXTERNAL: 2}
NATIVE = "native"
GRES_KEY = wellknown.slurmjob_annotation("gres")
CFG = parse_config(
    {
        "managedNamespaces": list(TENANTS),
        "namespacePolicies": [{"namespaces": ["team-a"], "allowPodKeys": ["gres"]}],
    },
    env={},
)
CTX = AdmissionContext(CFG, {})
DRIVER = dra_driver.GPU_DRIVER


@dataclass
class Tenant:
    ns: str
    pods: int  # 1 or 2 (a PodGroup)
    counts: list[int]  # GPUs per pod's claim
    shared_claim: bool  # the pods name the namespace's claim "shared", else their own
    gres: str | None
    exclusive: bool
    node: str
    bypass: bool  # the webhook was bypassed (down, failurePolicy: Ignore)
    ends_after: bool  # its job ends once bound (claims released)


tenants = st.builds(
    Tenant,
    ns=st.sampled_from(TENANTS),
    pods=st.integers(1, 2),
    counts=st.lists(st.integers(1, 2), min_size=2, max_size=2),
    shared_claim=st.booleans(),
    gres=st.sampled_from([None, "gpu:0", "gpu:1", "gpu:2", "gpu:4", "shard:1"]),
    exclusive=st.booleans(),
    node=st.sampled_from([SHARED, EXTERNAL]),
    bypass=st.booleans(),
    ends_after=st.booleans(),
)


class Kube:
    """The API objects DraAllocator reads and writes, in memory: claims with a
    resourceVersion (a stale write is a 409), pods, classes and slices."""

    def __init__(self) -> None:
        self.objs: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.rv = 0

    def put(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        md = obj["metadata"]
        self.objs[(plural, md.get("namespace", ""), md["name"])] = obj
        return copy.deepcopy(obj)

    async def list(self, res: Any, namespace: str | None = None, **kw: Any) -> Any:
        node = (kw.get("field_selector") or "=").partition("=")[2]
        items = [
            copy.deepcopy(o)
            for (plural, ns, _), o in self.objs.items()
            if plural == res.plural
            and (namespace is None or ns == namespace)
            and (not node or o["spec"].get("nodeName") == node)
        ]
        return SimpleNamespace(items=items)

    async def get(self, res: Any, name: str, namespace: str | None = None) -> dict[str, Any]:
        obj = self.objs.get((res.plural, namespace or "", name))
        if obj is None:
            raise KubeNotFound(f"{res.plural} {namespace}/{name}", status=404)
        return copy.deepcopy(obj)

    async def patch(self, res: Any, name: str, body: dict[str, Any], **kw: Any) -> Any:
        obj = self.objs[(res.plural, kw.get("namespace") or "", name)]
        if body["metadata"]["resourceVersion"] != obj["metadata"]["resourceVersion"]:
            raise KubeConflict(f"{name}: changed", status=409)
        status = obj.setdefault("status", {})
        for k, v in body["status"].items():
            if v is None:
                status.pop(k, None)
            else:
                status[k] = v
        return self.put(res.plural, obj)

    async def add_finalizer(self, res: Any, name: str, fin: str, namespace: str = "") -> Any:
        obj = self.objs[(res.plural, namespace, name)]
        obj["metadata"].setdefault("finalizers", []).append(fin)
        return self.put(res.plural, obj)


@dataclass
class Slurm:
    """A model of slurmctld's GPUs: the native job's indices on the shared node, and
    per bridge job its node and indices (shared node) or count (external node)."""

    jobs: dict[int, tuple[str, tuple[int, ...] | None, int]] = field(default_factory=dict)
    native: tuple[int, ...] = ()

    def free(self, node: str) -> list[int]:
        held = set(self.native) if node == SHARED else set()
        used = 0
        for n, idx, count in self.jobs.values():
            if n == node:
                held |= set(idx or ())
                used += count
        if node == EXTERNAL:
            return list(range(GPUS[node] - used))
        return [i for i in range(GPUS[node]) if i not in held]

    def start(self, job_id: int, node: str, gpus: int) -> bool:
        free = self.free(node)
        if gpus > len(free):
            return False  # pending: Slurm never gives a GPU another job holds
        idx = tuple(free[:gpus]) if node == SHARED else None
        self.jobs[job_id] = (node, idx, gpus)
        return True

    async def get_job_resources(self, job_id: int) -> tuple[NodeResources, ...]:
        node, idx, count = self.jobs[job_id]
        gres = (GresAllocation(name="gpu", count=count, indices=idx),) if count else ()
        return (NodeResources(node=node, gres=gres),)


def tres_gpus(spec: Any) -> int:
    """The GPUs the job holds on its one node (all its tasks there)."""
    per_node, per_task = spec.tres_per_node, spec.tres_per_task
    total = 0
    for text, times in ((per_node, 1), (per_task, spec.tasks or 1)):
        for part in (text or "").split(","):
            name, _, n = part.removeprefix("gres/").rpartition(":")
            if name == "gpu" and n.isdigit():
                total += int(n) * times
    return total


def claim(ns: str, name: str, count: int) -> dict[str, Any]:
    req = {"name": "gpu", "exactly": {"deviceClassName": DRIVER, "count": count}}
    return {
        "metadata": {"name": name, "namespace": ns, "uid": f"claim-{ns}-{name}"},
        "spec": {"devices": {"requests": [req]}},
    }


def admitted(pod: dict[str, Any]) -> bool:
    review = parse_review(make_review(pod))
    return bool(validate(review, CTX).to_review()["response"]["allowed"])


async def run(world: list[Tenant], native: int) -> list[str]:
    """Every group of ``world`` in turn; the violations of the invariant found."""
    kube, slurm = Kube(), Slurm(native=tuple(range(native)))
    for obj in dra_driver.device_classes():
        kube.put("deviceclasses", obj)
    for node, n in GPUS.items():
        kube.put("resourceslices", dra_driver.gpu_slice(node, n))
    dra = DraAllocator(
        kube,  # type: ignore[arg-type]
        slurm,  # type: ignore[arg-type]
        device_class_gres={DRIVER: "gpu"},
        gres_mapping=DEFAULT_GRES_MAPPING,
    )
    job_of: dict[str, int] = {}  # pod uid -> its job
    for g, t in enumerate(world):
        job_id = 100 + g
        notes = {GRES_KEY: t.gres} if t.gres else {}
        notes[wellknown.slurmjob_annotation("exclusive")] = str(t.exclusive).lower()
        pods, claims = [], {}
        for p in range(t.pods):
            name = "shared" if t.shared_claim else f"c-{g}-{p}"
            key = ("resourceclaims", t.ns, name)
            if key not in kube.objs:
                kube.put("resourceclaims", claim(t.ns, name, t.counts[p]))
            claims[name] = kube.objs[key]
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"p-{g}-{p}",
                    "namespace": t.ns,
                    "uid": f"uid-{g}-{p}",
                    "annotations": dict(notes),
                    "labels": {wellknown.LABEL_POD_GROUP: f"g-{g}"} if t.pods > 1 else {},
                },
                "spec": {
                    "schedulerName": CFG.scheduler_name,
                    "containers": [{"name": "c", "image": "x"}],
                    "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
                },
            }
            pods.append(pod)
        if not t.bypass and not all(admitted(p) for p in pods):
            continue
        group = None
        if t.pods > 1:
            group = {
                "apiVersion": wellknown.API_POD_GROUP,
                "kind": "PodGroup",
                "metadata": {"name": f"g-{g}", "namespace": t.ns, "uid": f"pg-{g}"},
                "spec": {"minMember": t.pods},
            }
        inputs = DraInputs(claims=claims, device_class_gres={DRIVER: "gpu"})
        try:
            spec = translate_group(
                pods,
                group,
                [],
                TranslateSettings(),
                dra=inputs,
                policy=resolve_policy(CFG, t.ns, {}),
            )
        except InvalidInput:
            continue  # refused before any submit
        if not slurm.start(job_id, t.node, tres_gpus(spec)):
            continue  # waits in Slurm
        for p in pods:
            p["metadata"]["labels"][wellknown.LABEL_JOB_ID] = str(job_id)
            kube.put("pods", copy.deepcopy(p))
        try:
            await dra.allocate(job_id, [(p, t.node) for p in pods], {}, group=job_id)
        except (DeviceAllocationError, InvalidInput):
            del slurm.jobs[job_id]  # given back
            continue
        for p in pods:
            job_of[p["metadata"]["uid"]] = job_id
        if t.ends_after:  # the job ends: kube-controller-manager releases its claims
            del slurm.jobs[job_id]
            gone = {p["metadata"]["uid"] for p in pods}
            for (plural, _, _), c in kube.objs.items():
                if plural != "resourceclaims":
                    continue
                st_ = c.get("status") or {}
                left = [r for r in st_.get("reservedFor") or [] if r["uid"] not in gone]
                if len(left) != len(st_.get("reservedFor") or []):
                    st_["reservedFor"] = left
                    if not left:
                        st_.pop("allocation", None)
    return violations(kube, slurm, job_of)


def violations(kube: Kube, slurm: Slurm, job_of: dict[str, int]) -> list[str]:
    out: list[str] = []
    holders: dict[tuple[str, str], set[int | str]] = {
        (SHARED, f"gpu-{i}"): {NATIVE} for i in slurm.native
    }
    given: dict[tuple[int, str], int] = {}  # (running job, node) -> devices its claims hold
    for (plural, ns, name), c in kube.objs.items():
        alloc = (c.get("status") or {}).get("allocation")
        if plural != "resourceclaims" or not alloc:
            continue
        node = alloc["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"][0]
        devices = [r["device"] for r in alloc["devices"]["results"]]
        # a pod whose job was given back holds nothing Slurm gave
        jobs = {
            job_of.get(r["uid"], f"given back: {r['name']}")
            for r in c["status"].get("reservedFor") or []
        }
        for d in devices:
            holders.setdefault((node, d), set()).update(jobs)
        for job in jobs:
            if not isinstance(job, int) or job not in slurm.jobs:
                continue
            _, idx, _ = slurm.jobs[job]
            given[(job, node)] = given.get((job, node), 0) + len(devices)
            if idx is not None and not {f"gpu-{i}" for i in idx} >= set(devices):
                out.append(f"claim {ns}/{name} holds {devices}, job {job} has indices {idx}")
    for (job, node), n in given.items():
        if n > slurm.jobs[job][2]:
            out.append(
                f"job {job}'s claims hold {n} devices on {node}, Slurm gave it {slurm.jobs[job][2]}"
            )
    for (node, d), who in holders.items():
        if len(who) > 1:
            out.append(f"{node}/{d} is held by {sorted(map(str, who))}")
    return out


@settings(max_examples=150, deadline=None)
@given(st.lists(tenants, min_size=1, max_size=6), st.integers(0, 2))
def test_no_device_is_ever_held_by_two_jobs(world: list[Tenant], native: int) -> None:
    assert asyncio.run(run(world, native)) == []
