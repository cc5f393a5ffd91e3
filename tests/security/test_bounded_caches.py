"""Issue #30, findings 2, 3, 8 and 11: no cache fed by what a tenant can name grows with
what tenants send. Each cache is fed 100,000 distinct keys through the path a tenant
reaches and stays at its bound; and the class stays shut: every dict or set a class of
the product keeps is either a bounded map (named in docs/security.md) or listed here
with why it cannot grow with tenant input."""

from __future__ import annotations

import ast
import asyncio
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from admission.app import MAX_NODES, kube_node_kinds
from bridge.config import parse_config
from bridge.errors import KubeNotFound, SlurmNotFound
from bridge.kube.client import KubeClient
from bridge.kube.events import EventRecorder
from bridge.kube.namespaces import MAX_NAMESPACES, CachedNamespaceLabels
from bridge.kube.watch import WatchEvent
from bridge.models import GroupId
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import JobState, SlurmJob
from bridge.translate import (
    NodeSet,
    PodTemplates,
    TranslateSettings,
    admin_comment,
    translate_group,
)
from bridge.translate.dra import DeviceKind
from bridge.translate.job import TEMPLATES_MAX
from bridge.translate.placement import PLACEMENT_MEMO_MAX
from bridge.wellknown import LABEL_JOB_ID, LABEL_POD_GROUP
from controller.caches import DEPARTED_JOBS_MAX, DEPARTED_PODS_PER_JOB_MAX
from controller.model import Action, JobKind, SlurmJobStatus
from controller.runtime import Controller
from scheduler.cycle import Scheduler
from scheduler.dra import DEVICE_CLASSES, KINDS_MAX, RESOURCE_SLICES, DraAllocator
from scheduler.report import PENDING_REASONS_MAX, REASON_LABEL_MAX, pending_reason_labels
from scheduler.slurm_state import GONE_MAX
from scheduler.state import BOUND_UIDS_MAX, GroupState, KubeState
from tests.fake_clock import FakeClock

MANY = 100_000
ROOT = Path(__file__).resolve().parents[2]
CFG = parse_config({"managedNamespaces": ["team"], "mcsLabel": "k8s"}, env={})


# ---------------------------------------------------------------- the controller (finding 2)
def _labelled(ns: str, name: str, job: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": f"uid-{ns}-{name}",
            "labels": {LABEL_JOB_ID: str(job)},
        },
        "status": {"phase": "Running"},
    }


class _Slurm:
    def __init__(self, comment: str) -> None:
        self.comment = comment

    async def get_job(self, job_id: int) -> SlurmJob:
        return SlurmJob(
            job_id=job_id, name="j", state=JobState(primary="RUNNING"), admin_comment=self.comment
        )


class _NoActions:
    async def apply(self, actions: Sequence[Action]) -> None:
        pass


def _controller(comment: str = "") -> Controller:
    ctl = Controller(CFG, cast(SlurmClient, _Slurm(comment)), cast(KubeClient, None))
    ctl.applier = cast(Any, _NoActions())
    return ctl


async def _churn(ctl: Controller, job: int, n: int, *, ns: str = "elsewhere") -> None:
    for i in range(n):
        p = _labelled(ns, f"forged-{i}", job)
        await ctl.on_pod(WatchEvent("ADDED", p))
        await ctl.on_pod(WatchEvent("DELETED", p))


async def test_forged_pods_churned_through_a_job_keep_at_most_its_bound_of_departed_pods() -> None:
    # 20,000 forged pods created and deleted while one stays used to keep 20,000 entries.
    ctl = _controller()
    await ctl.on_pod(WatchEvent("ADDED", _labelled("elsewhere", "stays", 7)))
    await _churn(ctl, 7, MANY)
    assert len(ctl.caches.departed[7]) == DEPARTED_PODS_PER_JOB_MAX


async def test_once_a_job_is_known_not_ours_its_forged_pods_leave_no_trace() -> None:
    ctl = _controller(comment="")  # a native job: no back-link
    await ctl.on_pod(WatchEvent("ADDED", _labelled("elsewhere", "stays", 7)))
    ctl.poller.views[7] = SlurmJobStatus(JobKind.ACTIVE, "RUNNING")
    await _churn(ctl, 7, 1)
    assert len(ctl.caches.departed[7]) == 1
    await ctl.reconcile(("job", "7"))  # a pod left: the job is read once, not ours
    assert 7 not in ctl.caches.departed
    await _churn(ctl, 7, 1000)
    assert 7 not in ctl.caches.departed


async def test_a_job_of_ours_keeps_only_the_departed_pods_its_back_link_names() -> None:
    group = GroupId(kind="Pod", namespace="team", name="a", uid="uid-team-a")
    link = admin_comment(group, ["team/a"], "k8s")
    ctl = _controller(comment=link)
    mine = _labelled("team", "a", 7)
    await ctl.on_pod(WatchEvent("ADDED", mine))
    await ctl.on_pod(WatchEvent("ADDED", _labelled("elsewhere", "stays", 7)))
    ctl.poller.views[7] = SlurmJobStatus(JobKind.ACTIVE, "RUNNING")
    await _churn(ctl, 7, 1)
    await ctl.reconcile(("job", "7"))  # a pod left: the job is read once, ours
    await _churn(ctl, 7, 1000)
    assert 7 not in ctl.caches.departed
    await ctl.on_pod(WatchEvent("DELETED", mine))
    assert list(ctl.caches.departed[7]) == ["team/a"]


async def test_forged_labels_naming_a_hundred_thousand_jobs_keep_the_departed_map_bounded() -> None:
    ctl = _controller()
    await ctl.on_pod(WatchEvent("ADDED", _labelled("elsewhere", "stays", 1)))
    for job in range(2, MANY + 2):
        p = _labelled("elsewhere", f"f{job}", job)
        await ctl.on_pod(WatchEvent("ADDED", p))
        await ctl.on_pod(WatchEvent("DELETED", p))
    assert len(ctl.caches.departed) == DEPARTED_JOBS_MAX


# ---------------------------------------------------------------- the scheduler
def _state() -> KubeState:
    clock = FakeClock()
    return KubeState(
        CFG,
        TranslateSettings.from_config(CFG),
        clock,
    )


def _member(name: str, group: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "team",
            "uid": f"uid-{name}",
            "labels": {LABEL_POD_GROUP: group},
        },
        "spec": {"schedulerName": CFG.scheduler_name},
    }


async def test_pods_churned_through_a_pod_group_that_never_fills_leave_no_first_seen() -> None:
    # finding 11: first_seen was popped only at binding (20,000 pods kept 20,001 entries)
    state = _state()
    await state.on_pod_event("ADDED", _member("stays", "never-full"))
    for i in range(MANY):
        p = _member(f"p{i}", "never-full")
        await state.on_pod_event("ADDED", p)
        await state.on_pod_event("DELETED", p)
    (g,) = state.groups.values()
    assert set(g.first_seen) == {"team/stays"} == g.pods


async def test_a_hundred_thousand_unseen_bindings_keep_the_bound_uids_bounded() -> None:
    state = _state()
    for i in range(MANY):
        state.bound(_member(f"p{i}", "g"))
    assert len(state._bound_uids) == BOUND_UIDS_MAX


class _Purged:
    async def get_job(self, job_id: int) -> SlurmJob:
        raise SlurmNotFound(f"job {job_id}", endpoint="job_get", status=404)


async def test_a_hundred_thousand_job_ids_slurm_does_not_know_keep_gone_bounded() -> None:
    # finding 11 (suspected): the scheduler's gone job ids were never pruned; pod labels
    # name them (read by the snapshot, kept by the cycle)
    sched = Scheduler(CFG, cast(KubeClient, None), cast(SlurmClient, _Purged()), FakeClock())
    g = GroupState(ref=cast(Any, None))
    for job_id in range(1, MANY + 1):
        sched._keep(g, await sched.snapshots.read_job(g, job_id))
    assert len(sched.slurm_state.gone) == GONE_MAX
    assert MANY in sched.slurm_state.gone


def test_a_hundred_thousand_distinct_placements_keep_the_memo_at_its_bound() -> None:
    # finding 3: a placement is tenant text (tolerations, nodeSelector, affinity); 4,000
    # over 2,000 nodes kept 4,000 entries (+50 MB) until a node changed
    def node(name: str, taints: list[Any]) -> dict[str, Any]:
        return {"metadata": {"name": name, "labels": {}}, "spec": {"taints": taints}}

    taint = {"key": "dedicated", "value": "x", "effect": "NoSchedule"}
    ns = NodeSet([node("a", []), node("b", [taint])])
    for i in range(MANY):
        tolerating = {"metadata": {"name": "p"}, "spec": {"tolerations": [{"key": f"t{i}"}]}}
        assert ns.excluded([tolerating], obj="x") == ("b",)
    assert ns.memo_size() == PLACEMENT_MEMO_MAX


def test_a_hundred_thousand_distinct_pod_templates_keep_the_template_memo_at_its_bound() -> None:
    # a lone pod's template (its slurmjob annotations, its resources) is tenant text
    templates = PodTemplates()
    settings = TranslateSettings()
    for i in range(MANY):
        pod = {
            "metadata": {"name": "p", "namespace": "team", "uid": "u"},
            "spec": {"containers": [{"resources": {"requests": {"cpu": f"{i + 1}m"}}}]},
        }
        assert translate_group([pod], None, [], settings, templates=templates)
    assert len(templates) == TEMPLATES_MAX


def test_a_hundred_thousand_distinct_selectors_keep_the_dra_memo_at_its_bound() -> None:
    # a request's CEL selector is tenant text: each distinct one is resolved and kept
    dra = DraAllocator(
        cast(KubeClient, object()),
        cast(SlurmClient, object()),
        device_class_gres={},
        gres_mapping={},
    )
    for res in (DEVICE_CLASSES, RESOURCE_SLICES):
        dra.cache.listed(res)
    for i in range(MANY):
        memo = dra._kind_memo(frozenset())
        assert memo is not None
        memo[("mig.nvidia.com", (f"device.attributes['x'].n == {i}",))] = DeviceKind(
            "gpu:1g.10gb", "1g.10gb", ()
        )
    assert len(dra._kinds) == KINDS_MAX


def test_a_hundred_thousand_distinct_expressions_and_patterns_keep_the_cel_caches_at_bound() -> (
    None
):
    # a claim's CEL selector (and a matches() pattern in it) is tenant text
    from bridge import cel

    for i in range(MANY // 10):  # a compile is ~50 us: 10,000 still overflow both
        expr = cel.compile_expression(f'device.driver.matches("^d{i}$") || {i} == 0')
        expr.evaluate_bool({"device": {"driver": f"d{i}"}})
    assert len(cel._expressions) == cel.EXPRESSIONS_MAX
    assert len(cel._regexes) == cel.REGEXES_MAX


def test_a_hundred_thousand_pending_reasons_keep_the_metric_label_set_bounded() -> None:
    counts = {f"{i} {'x' * 100}": 1 for i in range(MANY)}
    counts["Priority"] = 5
    labels = pending_reason_labels(counts)
    assert len(labels) == PENDING_REASONS_MAX
    assert labels["Priority"] == 5
    assert sum(labels.values()) == MANY + 5
    assert max(map(len, labels)) <= REASON_LABEL_MAX


# ---------------------------------------------------------------- the webhook, events (finding 8)
class _Kube:
    """What EventRecorder uses of a KubeClient: create and patch Events."""

    def __init__(self) -> None:
        self.clock = FakeClock()
        self.created = 0

    async def create(self, res: Any, body: Mapping[str, Any], namespace: str) -> dict[str, Any]:
        self.created += 1
        return {"metadata": {"name": body["metadata"]["name"], "namespace": namespace}}


async def test_a_hundred_thousand_objects_spoken_of_keep_the_event_memory_bounded() -> None:
    kube = _Kube()
    rec = EventRecorder(cast(KubeClient, kube), "c", max_entries=1000)
    for i in range(MANY):
        pod = {"kind": "Pod", "metadata": {"namespace": "team", "name": f"p{i}", "uid": str(i)}}
        assert await rec.record_change(pod, "Warning", "R", "m")
    assert len(rec._seen) == len(rec._last_said) == 1000
    assert kube.created == MANY


async def test_a_hundred_thousand_namespaces_in_reviews_keep_the_label_cache_bounded() -> None:
    fetched: list[str] = []

    async def fetch(name: str) -> Mapping[str, str] | None:
        fetched.append(name)
        return None

    cache = CachedNamespaceLabels(fetch, FakeClock(), 30)
    for i in range(MANY):
        await cache.labels(f"ns-{i}")
    assert cache.stats().size == MAX_NAMESPACES
    # the same namespaces again, concurrently: one lookup each, shared
    before = len(fetched)
    await asyncio.gather(*(cache.labels(f"again-{i % 10}") for i in range(1000)))
    assert len(fetched) == before + 10


async def test_a_hundred_thousand_node_names_in_pods_keep_the_node_kind_cache_bounded() -> None:
    """A new pod may name any node in spec.nodeName; the Slurm-node guard looks each up."""
    fetched: list[str] = []

    class Nodes:
        async def get(self, resource: Any, name: str) -> dict[str, Any]:
            fetched.append(name)
            raise KubeNotFound(f"node {name}")

    kinds = kube_node_kinds(cast(KubeClient, Nodes()), FakeClock(), 30)
    for i in range(MANY):
        assert await kinds.get(f"node-{i}") == ""
    assert cast(Any, kinds).stats().size == MAX_NODES
    before = len(fetched)
    await asyncio.gather(*(kinds.get(f"again-{i % 10}") for i in range(1000)))
    assert len(fetched) == before + 10


# ---------------------------------------------------------------- the class stays shut
# Every dict/set attribute of a product class that is not a BoundedMap/BoundedSet, and why
# it cannot grow with what tenants send. A new one fails test_every_growing_map_is_bounded_or_known
# until it is bounded (bridge.bounded) or listed here with its reason.
MIRROR = "a mirror of live API objects the bridge watches: an entry leaves with its object"
SLURM = "keyed by Slurm's own job, node or partition ids: pruned with what Slurm lists"
QUEUE = "keys of live groups, jobs or nodes, forgotten when processed or gone"
FIXED = "fixed keys (code or the admins' config)"
VALUE = "a value object built per call or per answer, never kept across requests"
KNOWN: dict[str, str] = {
    "BoundedMap._data": "the bounded map itself",
    "BoundedMap._written": "the bounded map itself (same keys as _data)",
    "Explanation.short": "one `why` answer (a CLI run): a key per resource kind the job asks "
    "(cpu, memory, each GRES type of its own request), never tenant-chosen keys",
    "Expression._costs": "one entry per variables' shapes the code passes (DRA's `device`)",
    "Expression.paths": "the expression's own: at most one entry per variable it names",
    "_Tolerations.any_key": "one pod's tolerations, indexed while its placement is tested",
    "_Tolerations.exists": "one pod's tolerations, indexed while its placement is tested",
    "_Tolerations.equal": "one pod's tolerations, indexed while its placement is tested",
    "Selectors.seen": "one request's: what its devices (the cluster's) read, alike ones once",
    "_Parser._PRECEDENCE": FIXED,
    "LabelSelector.match_labels": FIXED,
    "SchedulerSettings.gres_mapping": FIXED,
    "SchedulerSettings.device_class_gres": FIXED,
    "TopologySettings.levels": FIXED,
    "TranslateSettings.gres_mapping": FIXED,
    "TopologyPolicy.levels": FIXED,
    "DraAllocator.device_class_gres": FIXED,
    "DraAllocator.gres_mapping": FIXED,
    "SlurmCollector._read": FIXED,
    "CachedLookup._inflight": "lookups in flight, each removed when it ends",
    "AdmissionContext.slurm_nodes": "one review's: the server puts in the one node a pod names",
    "Watcher.known": MIRROR,
    "ArrayStream.rest": "the other top-level keys of one Slurm answer (its size is capped)",
    "Answer.headers": VALUE + " (one HTTP answer's headers: at most MAX_HEAD_BYTES)",
    "_Connection._headers": VALUE + " (one HTTP answer's headers: at most MAX_HEAD_BYTES)",
    "_Group.jobs": VALUE + " (the status CLI)",
    "SlurmNodeView.gres": VALUE,
    "SlurmNodeView.counts": VALUE,
    "_Ours.uids": VALUE + " (the pods of one allocation)",
    "_Ours.picked": VALUE + " (the claims of one allocation)",
    "Device.capacity": VALUE,
    "Device.raw": VALUE + " (one device of a ResourceSlice)",
    "Ledger.sets": VALUE + " (one node's counter sets, per allocation)",
    "Ledger.used": VALUE + " (one node's counter sets, per allocation)",
    "Ledger.whole": VALUE + " (one node's GPUs, per allocation)",
    "Ledger.sliced": VALUE + " (one node's GPUs, per allocation)",
    "DraInputs.gres_mapping": VALUE,
    "DraAllocator.profiles": FIXED,
    "KubeDevice.consumes": MIRROR + " (a device's counters in a node's ResourceSlice)",
    "Unit.consumes": MIRROR + " (a device's counters in a node's ResourceSlice, for the packer)",
    "KubeInventory.counters": MIRROR + " (the counter sets of a node's ResourceSlices)",
    "DraInputs.classes": VALUE,
    "DraInputs.claims": VALUE,
    "DraInputs.templates": VALUE,
    "DraInputs.device_class_gres": VALUE,
    "PodResources.gres": VALUE,
    "NodesSummary.cpus": VALUE,
    "NodesSummary.memory_bytes": VALUE,
    "NodesSummary.gpus": VALUE,
    "JobTally._by_state": VALUE,
    "JobTally._pending": VALUE,
    "JobTally._placeholders": VALUE,
    "NodeSet._nodes": MIRROR,
    "NodeSet._prints": MIRROR,
    "NodeSet._to_kube": MIRROR,
    "WorkQueue._queued": QUEUE,
    "WorkQueue._processing": QUEUE,
    "WorkQueue._dirty": QUEUE,
    "WorkQueue._idle_keys": QUEUE + " (the idle lane's queued keys)",
    "WorkQueue._failures": QUEUE,
    "DraCache.classes": MIRROR,
    "DraCache.claims": MIRROR,
    "DraCache.templates": MIRROR,
    "DraCache._slices": MIRROR,
    "DraCache._slice_node": MIRROR,
    "DraCache.taint_rules": MIRROR + " (DeviceTaintRules: cluster-scoped, admins write them)",
    "DraCache.synced": FIXED + " (the DRA resources watched)",
    "BindFailures._jobs": SLURM + " (jobs of ours failing to bind, dropped on give-back)",
    "SlurmState.jobs_by_group_uid": SLURM + " (the start-up sweep's jobs of ours, taken once)",
    "SlurmState.after_sweep": QUEUE + " (cleared when the start-up sweep ends)",
    "SlurmState.restored_held": QUEUE
    + " (groups of the initial pod list; cleared when the start-up sweep ends)",
    "SlurmState._job_group": SLURM + " (pending jobs of ours the poller follows)",
    "SlurmState.pending_in": SLURM + " (pending jobs of ours, by their partition)",
    "SlurmState._job_partition": SLURM + " (pending jobs of ours)",
    "SlurmState.queue_plans": SLURM
    + " (the bridge's plan of the pending jobs of ours the poller follows, replaced whole"
    " at each refresh)",
    "SlurmState._awaiting": SLURM + " (pending jobs of ours awaiting the bridge's plan)",
    "SlurmLimits.tres": VALUE + " (one QOS's or association's TRES limits, read by `why`)",
    "SlurmLimits.counts": VALUE + " (one QOS's or association's other limits, read by `why`)",
    "_Use.gres": VALUE + " (one job's GRES on one node, within one plan of the queue)",
    "_Map.nodes": VALUE + " (the partition's nodes, within one plan of the queue)",
    "_Map.profiles": VALUE + " (each node's use over time, within one plan of the queue)",
    "_Map.ends_on": VALUE + " (the ends of the uses, within one plan of the queue)",
    "_Map.starts": VALUE + " (the starts of the jobs planned, within one plan of the queue)",
    "SlurmState.partition_size": SLURM,
    "SlurmState.node_cpus": SLURM + " (Slurm's node list, replaced whole on each read)",
    "JobPoller._watched": SLURM + " (pending jobs of ours)",
    "Reporter._background": "status writes in flight, each removed when it ends",
    "GroupState.pods": MIRROR,
    "GroupState.first_seen": MIRROR + " (the group's pods: popped with them)",
    "GroupState.device_excluded": VALUE
    + " (nodes of the cluster whose devices disagreed with Slurm for the group: at most the"
    " nodes, dropped when their slices change or the group ends)",
    "KubeState.pods": MIRROR,
    "KubeState.pod_group": MIRROR,
    "KubeState.groups": MIRROR + " (a group is dropped once no pod of it is left)",
    "KubeState.nodes": MIRROR,
    "KubeState.namespace_labels": MIRROR + " (namespaces: created by admins)",
    "KubeState._listed_uids": "the pods of the first list, cleared when the start-up sweep ends",
    "RelatedObjects._objects": VALUE + " (a fixed set of objects, for tools and tests)",
    "RelatedCache._objects": MIRROR + " (the objects of the workload kinds' APIs)",
    "RelatedCache._by_uid": MIRROR + " (the same objects, by namespace and uid)",
    "RelatedCache.served": FIXED + " (the workload kinds' APIs)",
    "WatchCaches.pods": MIRROR,
    "WatchCaches.by_job": MIRROR + " (the labelled pods, by job)",
    "WatchCaches.by_node": MIRROR,
    "WatchCaches.deleted": "pods deleted with claims unreleased: dropped at the job's next plan",
    "WatchCaches.released": MIRROR + " (uids of existing pods)",
    "Applier._served": FIXED + " (the built-in PodGroup and CompositePodGroup APIs)",
    "WatchCaches.disrupted": "jobs of ours Slurm preempted (ownership proven before a write), "
    "each with the PodGroups its named pods name: dropped with the job, as by_job",
    "WatchCaches.nodes": MIRROR,
    "WatchCaches.slices": MIRROR + " (ResourceSlices, by node)",
    "WatchCaches._slice_node": MIRROR,
    "WatchCaches.taint_rules": MIRROR + " (DeviceTaintRules: cluster-scoped, admins write them)",
    "NodeReconcile.slurm_nodes": SLURM,
    "NodeReconcile.job_partitions": SLURM + " (partitions jobs of ours ran in)",
    "NodeReconcile._inventories": MIRROR + " (nodes with slices: dropped with the node)",
    "SlurmPoller.views": MIRROR + " (jobs labelled pods name: dropped with them)",
    "SlurmPoller.het": MIRROR + " (hetjob leaders labelled pods name: dropped with them)",
    "Ownership.links": MIRROR + " (jobs labelled pods name: dropped with them)",
    "Sweeper._job_pods": SLURM + " (active jobs)",
    "JobFactsTable._by_id": SLURM,
    "JobFactsTable._shared": SLURM + " (partition x reason x ours)",
}
_PRODUCT = ("bridge", "scheduler", "controller", "admission")
_GROWING = {"dict", "set", "OrderedDict", "defaultdict", "Counter", "MutableMapping", "MutableSet"}


def _head(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def _container(value: ast.expr | None) -> str | None:
    if isinstance(value, ast.Dict | ast.DictComp):
        return "dict"
    if isinstance(value, ast.Set | ast.SetComp):
        return "set"
    if isinstance(value, ast.Call):
        head = _head(value.func)
        if head == "field":
            factory = (k.value for k in value.keywords if k.arg == "default_factory")
            return _head(next(factory, None))
        if head == "Counter" and value.args:
            return None  # prometheus_client's Counter(name, doc, ...), not collections'
        return head
    return None


def _growing_attributes() -> dict[str, str]:
    """``Class.attr`` -> where, for every dict/set-like attribute a product class keeps."""
    found: dict[str, str] = {}
    for package in _PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
                for node in ast.walk(cls):
                    targets: list[tuple[ast.expr, ast.expr | None, ast.expr | None]] = []
                    if isinstance(node, ast.AnnAssign):
                        targets.append((node.target, node.annotation, node.value))
                    elif isinstance(node, ast.Assign):
                        targets += [(t, None, node.value) for t in node.targets]
                    for target, annotation, value in targets:
                        if isinstance(target, ast.Attribute) and _head(target.value) == "self":
                            name = target.attr
                        elif isinstance(target, ast.Name) and node in cls.body:
                            name = target.id  # a dataclass or pydantic field
                        else:
                            continue
                        kind = _head(annotation) if annotation is not None else None
                        if kind not in _GROWING:
                            kind = _container(value)
                        if kind in _GROWING:
                            where = f"{path.relative_to(ROOT)}:{node.lineno}"
                            found.setdefault(f"{cls.name}.{name}", where)
    return found


def test_every_growing_map_is_bounded_or_known() -> None:
    found = _growing_attributes()
    unknown = {k: v for k, v in found.items() if k not in KNOWN}
    assert not unknown, (
        "a dict or set that may grow: make it a bridge.bounded.BoundedMap/BoundedSet (and "
        "list it in docs/security.md), or add it to KNOWN in this file with why tenants "
        f"cannot grow it: {unknown}"
    )
    stale = sorted(set(KNOWN) - set(found))
    assert not stale, f"KNOWN lists attributes that are gone or bounded now: {stale}"


_BOUNDED_NAME = re.compile(
    r"(?:Bounded(?:Map|Set)|CachedLookup)(?:\[[^\]]*\])*\(\s*\"([a-z0-9-]+)\"", re.S
)


def test_every_bounded_cache_is_listed_in_the_security_docs() -> None:
    names: set[str] = set()
    for package in _PRODUCT:
        for path in (ROOT / package).rglob("*.py"):
            names |= set(_BOUNDED_NAME.findall(path.read_text(encoding="utf-8")))
    assert names >= {"placement-memo", "controller-departed", "namespace-labels"}
    docs = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    missing = sorted(n for n in names if f"`{n}`" not in docs)
    assert not missing, f"bounded caches missing from docs/security.md: {missing}"
