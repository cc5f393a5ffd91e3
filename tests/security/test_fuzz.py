"""Property-based fuzz (hypothesis, bounded examples) of what an attacker controls:

- the translate layer's annotation parsing: any map of keys and values either parses or
  fails with InvalidInput naming one of the given annotations, never anything else;
- the webhook's review handling, over real HTTP against the real handler: any body (valid
  reviews with fields replaced by arbitrary JSON, or raw bytes mangled) gets 200, 400, 413
  or 415, never a 500; every 400 names the field at fault, every denial names its fields.
"""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from admission.policy import AdmissionContext
from admission.server import WebhookDeps, build_webhook_app
from bridge import wellknown
from bridge.config import parse_config
from bridge.errors import InvalidInput
from bridge.translate.annotations import annotation_errors, parse_slurmjob_annotations
from tests.admission_helpers import make_pod, make_review

FUZZ = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
MAX_BYTES = 64 * 1024

# ----------------------------------------------------------------- strategies
slurmjob_keys = st.one_of(
    st.sampled_from([wellknown.slurmjob_annotation(k) for k in wellknown.SLURMJOB_KEYS]),
    st.text(max_size=16).map(lambda s: wellknown.SLURMJOB_PREFIX + s),
    st.just(wellknown.LEGACY_ANNOTATION_JOB_NAME),
)
annotation_values = st.one_of(
    st.text(max_size=40),
    st.from_regex(
        r"[+-]?[0-9]{0,25}(\.[0-9]{0,4})?([eE][+-]?[0-9]{1,4})?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|m)?",
        fullmatch=True,
    ),
    st.sampled_from(
        ["true", "false", "0", "-1", "1:00:00", "UNLIMITED", "1-00:00", "\u202e", "a\u2028b"]
    ),
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=25,
)
# where a replaced value goes in a review: a path of keys from the envelope down
REVIEW_PATHS = [
    ("apiVersion",),
    ("kind",),
    ("request",),
    ("request", "uid"),
    ("request", "kind"),
    ("request", "kind", "kind"),
    ("request", "kind", "group"),
    ("request", "operation"),
    ("request", "namespace"),
    ("request", "userInfo"),
    ("request", "userInfo", "username"),
    ("request", "object"),
    ("request", "object", "metadata"),
    ("request", "object", "metadata", "annotations"),
    ("request", "object", "metadata", "labels"),
    ("request", "object", "spec"),
    ("request", "object", "spec", "schedulerName"),
    ("request", "object", "spec", "tolerations"),
    ("request", "oldObject"),
    ("request", "dryRun"),
]


def _set(doc: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        nxt = doc.get(key)
        if not isinstance(nxt, dict):
            nxt = doc[key] = {}
        doc = nxt
    doc[path[-1]] = value


@st.composite
def review_bodies(draw: st.DrawFn) -> bytes:
    annotations = draw(st.dictionaries(slurmjob_keys, annotation_values, max_size=6))
    kind = draw(st.sampled_from(["Pod", "Pod", "Job", "JobSet", "PodGroup", "Weird"]))
    group = {"Job": "batch", "JobSet": "jobset.x-k8s.io", "PodGroup": "scheduling.x-k8s.io"}
    pod = make_pod(annotations=annotations, node=draw(st.sampled_from([None, "n1"])))
    operation = draw(st.sampled_from(["CREATE", "UPDATE"]))
    old = make_pod(node="n1") if operation == "UPDATE" else None
    # a fixed uid: make_review's default counts, which changes the body's length between
    # runs of one example (hypothesis: "inconsistent data generation")
    review = make_review(
        pod, kind=kind, group=group.get(kind, ""), operation=operation, old=old, uid="uid-fuzz"
    )
    for path in draw(st.lists(st.sampled_from(REVIEW_PATHS), max_size=3)):
        _set(review, path, draw(json_values))
    return json.dumps(review).encode()


@st.composite
def mangled_bodies(draw: st.DrawFn) -> bytes:
    body = bytearray(draw(review_bodies()))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, max(0, len(body) - 1)))
        op = draw(st.sampled_from(["flip", "cut", "insert", "nest"]))
        if op == "flip" and body:
            body[at] = draw(st.integers(0, 255))
        elif op == "cut":
            del body[at:]
        elif op == "insert":
            body[at:at] = draw(st.binary(max_size=8))
        else:
            depth = draw(st.integers(1, 2000))
            body[at:at] = b"[" * depth + b"]" * depth
    return bytes(body)


# ----------------------------------------------------------------- translate
@FUZZ
@given(st.dictionaries(slurmjob_keys | st.text(max_size=20), annotation_values, max_size=10))
def test_annotation_parsing_never_crashes_and_every_error_names_a_given_annotation(
    annotations: dict[str, str],
) -> None:
    errors = annotation_errors(annotations, obj="Pod ns/p")
    for e in errors:
        assert isinstance(e, InvalidInput)
        assert e.field in annotations, e.field
        assert e.reason
    if errors:
        with pytest.raises(InvalidInput) as info:
            parse_slurmjob_annotations(annotations, obj="Pod ns/p")
        assert info.value.field == errors[0].field
    else:
        parse_slurmjob_annotations(annotations, obj="Pod ns/p")


# ----------------------------------------------------------------- the webhook over HTTP
@pytest.fixture(scope="module")
def webhook_url() -> Iterator[str]:
    """The real webhook app (plain HTTP: the TLS layer is tested apart), served from a
    thread of its own so that hypothesis drives it with blocking requests."""
    cfg = parse_config(
        {"managedNamespaces": ["slurm-bridge"], "admission": {"maxRequestBytes": MAX_BYTES}},
        env={},
    )
    app = build_webhook_app(WebhookDeps(ctx=AdmissionContext(cfg)))
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app, access_log=None)
    ready = threading.Event()
    port: list[int] = []

    async def serve() -> None:
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port.append(runner.addresses[0][1])
        ready.set()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(serve(), loop).result()
    ready.wait()
    yield f"http://127.0.0.1:{port[0]}"
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result()
    loop.call_soon_threadsafe(loop.stop)
    thread.join()
    loop.close()


def _post(url: str, body: bytes, path: str) -> tuple[int, Any]:
    request = urllib.request.Request(
        url + path, data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _check(status: int, out: Any) -> None:
    assert status in (200, 400, 413), (status, out)
    if status == 400:
        prefix = "malformed AdmissionReview: "
        assert out["error"].startswith(prefix), out
        field = out["error"][len(prefix) :].split(": ", 1)[0]
        assert field, out
        return
    if status == 413:
        return
    response = out["response"]
    assert response["uid"]
    if not response["allowed"]:
        denial = response["status"]
        assert denial["code"] == 422, denial  # a denial, not an internal error
        assert denial["message"]
        causes = denial["details"]["causes"]
        assert causes
        assert all(c["field"] and c["message"] for c in causes)


@FUZZ
@given(review_bodies(), st.sampled_from(["/validate", "/mutate"]))
def test_reviews_with_arbitrary_fields_get_a_well_formed_answer_never_a_500(
    webhook_url: str, body: bytes, path: str
) -> None:
    _check(*_post(webhook_url, body, path))


@FUZZ
@given(mangled_bodies(), st.sampled_from(["/validate", "/mutate"]))
def test_mangled_bytes_get_400_naming_the_fault_never_a_500(
    webhook_url: str, body: bytes, path: str
) -> None:
    _check(*_post(webhook_url, body, path))


# ----------------------------------------------------------------- multi-tenant adoption
# Two namespaces sharing object names, pods naming any uid (another namespace's, none, an
# unknown one), Slurm jobs made for real groups before a restart (and a few with no uid
# or another cluster's mcs label): the restarted scheduler's snapshot (the real
# KubeState, SlurmState's sweep and the snapshot's lookup, over a stand-in API and Slurm
# table) adopts a job for a pod only when it was made for a group of the pod's own namespace and its
# real object.
TENANTS = ("team-a", "team-b")
OBJ_NAMES = ("x", "y")
OWNER_KINDS_FUZZ = ("LeaderWorkerSet", "Job", "PodGroup")
MCS = "kubernetes"


def _object(kind: str, ns: str, name: str, uid: str) -> dict[str, Any]:
    meta = {"namespace": ns, "name": name, "uid": uid}
    if kind == "LeaderWorkerSet":
        spec: dict[str, Any] = {"leaderWorkerTemplate": {"size": 1}}
        return {"apiVersion": wellknown.API_LWS, "kind": kind, "metadata": meta, "spec": spec}
    if kind == "Job":
        return {"apiVersion": "batch/v1", "kind": kind, "metadata": meta, "spec": {}}
    return {
        "apiVersion": wellknown.API_POD_GROUP,
        "kind": kind,
        "metadata": meta,
        "spec": {"minMember": 1},
    }


def _group_name(kind: str, name: str, pod: str) -> tuple[str, str]:
    """(group kind, group name) the bridge gives a one-pod group of this object."""
    if kind == "LeaderWorkerSet":
        return kind, f"{name}-0"
    if kind == "Job":
        return "Pod", pod
    return kind, name


@st.composite
def tenant_worlds(draw: st.DrawFn) -> dict[str, Any]:
    objects: dict[tuple[str, str, str], dict[str, Any]] = {}
    for ns in TENANTS:
        for kind in OWNER_KINDS_FUZZ:
            for name in OBJ_NAMES:
                if draw(st.booleans()):
                    uid = f"uid-{len(objects)}"
                    objects[(kind, ns, name)] = _object(kind, ns, name, uid)
    uids = [o["metadata"]["uid"] for o in objects.values()] + ["", "uid-unknown"]
    from bridge.models import GroupId
    from bridge.translate import admin_comment

    jobs: list[str] = []
    for (kind, ns, name), obj in objects.items():  # what a scheduler made before
        gkind, gname = _group_name(kind, name, f"{name}-0-0")
        uid = obj["metadata"]["uid"] if gkind != "Pod" else "pod-uid-old"
        gid = GroupId(kind=gkind, namespace=ns, name=gname, uid=uid)
        jobs.append(admin_comment(gid, [f"{ns}/{name}-0-0"], MCS))
    for _ in range(draw(st.integers(0, 3))):  # odd ones: no uid, a foreign mcs, any uid
        gid = GroupId(
            kind=draw(st.sampled_from(["LeaderWorkerSet", "PodGroup", "Job", "Pod"])),
            namespace=draw(st.sampled_from(TENANTS)),
            name=draw(st.sampled_from(["x", "y", "x-0", "y-0", "x-0-0"])),
            uid=draw(st.sampled_from(uids)),
        )
        mcs = draw(st.sampled_from([MCS, None, "other"]))
        jobs.append(admin_comment(gid, [f"{gid.namespace}/x-0-0"], mcs))
    pods: list[dict[str, Any]] = []
    for i in range(draw(st.integers(1, 4))):
        ns = draw(st.sampled_from(TENANTS))
        kind = draw(st.sampled_from(OWNER_KINDS_FUZZ))
        name = draw(st.sampled_from(OBJ_NAMES))
        labels: dict[str, str] = {}
        if kind == "LeaderWorkerSet":
            labels = {wellknown.LABEL_LWS_NAME: name, wellknown.LABEL_LWS_GROUP_INDEX: "0"}
        elif kind == "PodGroup":
            labels = {wellknown.LABEL_POD_GROUP: name}
        meta: dict[str, Any] = {
            "namespace": ns,
            "name": f"{name}-0-{i}" if i else f"{name}-0-0",
            "uid": f"pod-uid-{i}",
            "labels": labels,
            "annotations": {wellknown.ANNOTATION_LWS_SIZE: "1"},
        }
        if kind == "Job" or draw(st.booleans()):
            meta["ownerReferences"] = [
                {
                    "apiVersion": "v1",
                    "kind": draw(st.sampled_from([kind, *OWNER_KINDS_FUZZ])),
                    "name": draw(st.sampled_from(OBJ_NAMES)),
                    "uid": draw(st.sampled_from(uids)),
                    "controller": True,
                }
            ]
        pods.append(
            {
                "metadata": meta,
                "spec": {
                    "schedulerName": "slurm-bridge-scheduler",
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                },
            }
        )
    return {"objects": objects, "jobs": jobs, "pods": pods}


class _WorldKube:
    """The API's objects by (kind, namespace, name); no pod is labelled with a job."""

    def __init__(self, objects: dict[tuple[str, str, str], dict[str, Any]]) -> None:
        self.objects = objects

    async def get(self, res: Any, name: str, namespace: str | None = None) -> dict[str, Any]:
        from bridge.errors import KubeNotFound

        obj = self.objects.get((res.kind, namespace or "", name))
        if obj is None:
            raise KubeNotFound(f"{res.kind} {namespace}/{name}", status=404)
        return dict(json.loads(json.dumps(obj)))

    async def pages(self, *args: Any, **kw: Any) -> Any:
        yield [], None


class _WorldSlurm:
    """Slurm's job table: active jobs with the given admin_comments."""

    def __init__(self, comments: list[str]) -> None:
        from bridge.slurm.models import JobState, SlurmJob

        self.jobs = {
            i + 1: SlurmJob(
                job_id=i + 1, name="j", state=JobState(primary="PENDING"), admin_comment=c
            )
            for i, c in enumerate(comments)
        }

    async def scan_job_states(self, keep: Any = None, *, state: Any = None) -> list[Any]:
        from bridge.slurm.models import JobStateItem

        items = [JobStateItem(job_id=j.job_id, state=j.state) for j in self.jobs.values()]
        return [s for s in items if (keep is None or keep(s)) and (state is None or state(s.state))]

    async def get_jobs(self, ids: list[int], concurrency: int = 1) -> list[Any]:
        return [self.jobs[i] for i in ids if i in self.jobs]

    async def scan_jobs(self, keep: Any) -> tuple[Any, ...]:
        return tuple(j for j in self.jobs.values() if keep(j))


async def _adopted_after_restart(world: dict[str, Any]) -> list[tuple[Any, Any, Any]]:
    from bridge.clock import SystemClock
    from scheduler.cycle import Scheduler
    from tests.scheduler_caches import hold

    cfg = parse_config({"managedNamespaces": list(TENANTS), "mcsLabel": MCS}, env={})
    sched = Scheduler(
        cfg,
        _WorldKube(world["objects"]),  # type: ignore[arg-type]
        _WorldSlurm(world["jobs"]),  # type: ignore[arg-type]
        SystemClock(),
    )
    await sched.slurm_state.sweep_once()
    hold(sched, world["objects"].values())  # what the kinds' watches hold
    out = []
    for pod in world["pods"]:
        await sched.on_pod_event("ADDED", pod)
        g = sched.groups[
            sched.state.pod_group[f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"]
        ]
        snap = await sched.snapshots.find(g, sched.snapshots.take(g, sched.state.pods_of(g)))
        if snap.lookup is not None:  # what it found becomes the group's (the cycle's step 3)
            sched._keep(g, snap.lookup)
        out.append((pod, g.job, snap.group.group))
    return out


@settings(max_examples=300, deadline=None)
@given(tenant_worlds())
def test_a_restarted_scheduler_adopts_only_jobs_of_the_pods_own_namespace_and_object(
    world: dict[str, Any],
) -> None:
    from bridge.translate import back_link

    objects = world["objects"]
    for pod, job, group in asyncio.run(_adopted_after_restart(world)):
        if job is None:
            continue
        ns = pod["metadata"]["namespace"]
        link = back_link(job.admin_comment)
        assert link is not None
        assert link.group is not None
        assert link.mcs == MCS, job.admin_comment
        assert link.group.key == group.key, (link.group, group)
        if group.uid:  # a group refused for a false ownerReference keeps the job it had
            assert link.group == group, (link.group, group)
        assert link.group.uid, "a job with no uid was adopted"
        assert link.group.namespace == ns, "another namespace's job was adopted"
        real = {o["metadata"]["uid"] for (_, ons, _), o in objects.items() if ons == ns}
        assert link.group.uid in real | {pod["metadata"]["uid"]}, (
            f"adopted by a uid no object of {ns} has: {job.admin_comment}"
        )
