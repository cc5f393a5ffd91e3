"""``slurm-bridge sandbox workloads --kubeconfig FILE``: the sandbox's stand-in for the Job,
JobSet and LeaderWorkerSet controllers (sandbox tooling, not production code).

The sandbox API server has no controllers, so a Job, JobSet or LWS applied to it would
never get pods. This loop watches for them (a list every ``--interval`` seconds) and
creates what the real controllers would: a JobSet's Jobs, and the pods of every Job,
JobSet and LWS, with their labels and owner references (:mod:`sandbox.controllers.workload_pods`
expands them). The demo runs it beside the bridge's components, so an example applied by
hand (``kubectl apply -f deploy/examples/indexed-job.yaml``) gets its pods like in a
cluster. Each object is expanded once per run of the loop (by uid); pods that already
exist are kept. Like the Job controller, it removes its ``batch.kubernetes.io/job-tracking``
finalizer from pods that ended or are being deleted; like the garbage collector, when a
Job, JobSet or LWS it acted on is deleted, it deletes the Jobs and pods it created for it.

Like the Job controller, it handles a Job's failed pods before their job-tracking finalizer
goes (that finalizer marks "not yet counted"): each is decided by the Job's
``podFailurePolicy`` and ``backoffLimit`` (:mod:`sandbox.controllers.pod_failure_policy`),
counted in ``status.failed`` unless ignored, and replaced by a new pod (same completion
index); a Job that fails gets the ``FailureTarget`` and ``Failed`` conditions and its
running pods are deleted. (A JobSet's Jobs are left to the JobSet's own failure policy:
not handled.)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml

from sandbox.controllers import pod_failure_policy, workload_pods

Obj = dict[str, Any]
# kind -> the cluster-wide list path of the objects the stand-in acts on
LISTS = {
    "Job": "/apis/batch/v1/jobs",
    "JobSet": "/apis/jobset.x-k8s.io/v1alpha2/jobsets",
    "LeaderWorkerSet": "/apis/leaderworkerset.x-k8s.io/v1/leaderworkersets",
}
DEFAULT_INTERVAL = 0.5
JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
PODS = "/api/v1/pods"


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


@dataclass
class Api:
    """Just enough of a Kubernetes client: GET a list, POST an object (JSON, bearer token)."""

    server: str
    token: str

    @classmethod
    def from_kubeconfig(cls, path: Path) -> Api:
        doc = yaml.safe_load(path.read_text())
        ctx_name = doc.get("current-context")
        ctx = next(c["context"] for c in doc["contexts"] if c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in doc["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in doc["users"] if u["name"] == ctx["user"])
        return cls(server=cluster["server"].rstrip("/"), token=str(user.get("token", "")))

    def call(self, method: str, path: str, body: Obj | None = None) -> Obj:
        data = json.dumps(body).encode() if body is not None else None
        content_type = "application/merge-patch+json" if method == "PATCH" else "application/json"
        req = urllib.request.Request(
            self.server + path,
            data=data,
            method=method,
            headers={"Content-Type": content_type, "Authorization": f"Bearer {self.token}"},
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                out: Obj = json.loads(resp.read() or b"{}")
                return out
        except urllib.error.HTTPError as e:
            raise ApiError(e.code, e.read().decode(errors="replace")[:300]) from None

    def create(self, obj: Obj) -> tuple[Obj, str]:
        """POST ``obj``; an object of that name that exists already is read back instead.
        Returns the object and its path."""
        ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
        if obj["kind"] == "Pod":
            path = f"/api/v1/namespaces/{ns}/pods"
        else:  # the Jobs of a JobSet
            path = f"/apis/batch/v1/namespaces/{ns}/jobs"
        try:
            return self.call("POST", path, obj), f"{path}/{name}"
        except ApiError as e:
            if e.status != 409:
                raise
            return self.call("GET", f"{path}/{name}"), f"{path}/{name}"

    def delete(self, path: str) -> None:
        try:
            self.call("DELETE", path)
        except ApiError as e:
            if e.status != 404:
                raise


def _owned_by(obj: Obj, kind: str) -> bool:
    return any(r.get("kind") == kind for r in obj["metadata"].get("ownerReferences") or [])


def _without_identity(obj: Obj) -> Obj:
    """What a controller sends: no uid, no status (the server assigns and owns those)."""
    body = {k: v for k, v in obj.items() if k != "status"}
    body["metadata"] = {k: v for k, v in obj["metadata"].items() if k != "uid"}
    return body


def _replacement(job: Obj, failed: Obj, n: int) -> Obj:
    """A new pod for ``job`` in place of ``failed``: from the Job's template, with the same
    completion index; named ``<job>-x<n>`` (``<job>-<index>-x<n>`` for an Indexed Job)."""
    md = job["metadata"]
    fresh = workload_pods.expand(
        [{"apiVersion": "batch/v1", "kind": "Job", **job}], md["namespace"]
    )
    index = (failed["metadata"].get("labels") or {}).get(COMPLETION_INDEX)
    same = [
        p for p in fresh.pods if (p["metadata"].get("labels") or {}).get(COMPLETION_INDEX) == index
    ]
    template = (same or fresh.pods)[0]
    body = _without_identity(template)
    body["metadata"]["name"] = (
        f"{md['name']}-{index}-x{n}" if index is not None else f"{md['name']}-x{n}"
    )
    return body


def pods_for(obj: Obj) -> list[str]:
    """The names of the pods the stand-in creates for ``obj`` (pure)."""
    expanded = workload_pods.expand([obj], obj["metadata"]["namespace"])
    return [p["metadata"]["name"] for p in expanded.pods]


@dataclass
class StandIn:
    api: Api
    out: TextIO = sys.stdout
    done: set[str] = field(default_factory=set)  # uids already expanded
    created: dict[str, list[str]] = field(default_factory=dict)  # uid -> paths it created
    reported: set[str] = field(default_factory=set)  # errors already said (once each)

    def act_on(self, obj: Obj) -> list[str]:
        """Create the Jobs and pods for one Job/JobSet/LWS; returns the pod names."""
        ns = obj["metadata"]["namespace"]
        expanded = workload_pods.expand([obj], ns)
        paths = self.created.setdefault(obj["metadata"]["uid"], [])
        real_uid: dict[str, str] = {}
        for uid, o in expanded.objects.items():
            if o["kind"] == "Job" and uid != obj["metadata"]["uid"]:
                job, path = self.api.create(_without_identity(o))
                real_uid[uid] = job["metadata"]["uid"]
                paths.append(path)
        names: list[str] = []
        for p in expanded.pods:
            body = _without_identity(p)
            for ref in body["metadata"].get("ownerReferences") or []:
                ref["uid"] = real_uid.get(ref["uid"], ref["uid"])
            paths.append(self.api.create(body)[1])
            names.append(p["metadata"]["name"])
        return names

    def settle_failures(self, jobs: list[Obj], pods: list[Obj]) -> set[str]:
        """The Job controller's failure handling for the failed pods not yet counted
        (those still holding the job-tracking finalizer): see the module docstring.
        Returns the uids of the failed pods it could not settle (they keep the finalizer:
        the next tick decides again)."""
        unsettled: set[str] = set()
        by_job: dict[str, list[Obj]] = {}
        for p in pods:
            if uid := (p["metadata"].get("labels") or {}).get(CONTROLLER_UID):
                by_job.setdefault(uid, []).append(p)
        for job in jobs:
            md = job["metadata"]
            if (
                md.get("deletionTimestamp")
                or _owned_by(job, "JobSet")
                or pod_failure_policy.finished(job)
            ):
                continue
            mine = by_job.get(md["uid"], [])
            new = [
                p
                for p in mine
                if (p.get("status") or {}).get("phase") == "Failed"
                and JOB_TRACKING_FINALIZER in (p["metadata"].get("finalizers") or [])
            ]
            if not new:
                continue
            try:
                self._settle(job, mine, new)
            except ApiError as e:  # a conflict or a race
                unsettled |= {p["metadata"]["uid"] for p in new}
                print(
                    f"failed pods of Job {md['name']} not settled: {e}", file=self.out, flush=True
                )
        return unsettled

    def _settle(self, job: Obj, mine: list[Obj], new: list[Obj]) -> None:
        md = job["metadata"]
        failed = int((job.get("status") or {}).get("failed") or 0)
        fail: tuple[str, str] | None = None
        replace: list[Obj] = []
        for p in new:
            d = pod_failure_policy.decide(job, p)
            if d.action != "Ignore":
                failed += 1
            if d.action in ("FailJob", "FailIndex"):
                fail = fail or ("PodFailurePolicy", d.message)
            else:
                replace.append(p)
            verb = "ignored" if d.action == "Ignore" else "counted"
            print(
                f"(controller stand-in) Job {md['namespace']}/{md['name']}: failed pod "
                f"{p['metadata']['name']} {verb} ({d.message or 'no podFailurePolicy rule'})",
                file=self.out,
                flush=True,
            )
        if fail is None and failed > pod_failure_policy.backoff_limit(job):
            fail = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
        status: Obj = {"failed": failed}
        if fail is not None:
            reason, message = fail
            status["conditions"] = [
                {"type": t, "status": "True", "reason": reason, "message": message}
                for t in ("FailureTarget", "Failed")
            ]
        path = f"/apis/batch/v1/namespaces/{md['namespace']}/jobs/{md['name']}"
        self.api.call("PATCH", path + "/status", {"status": status})
        if fail is not None:
            for p in mine:
                if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                    pmd = p["metadata"]
                    self.api.delete(f"/api/v1/namespaces/{pmd['namespace']}/pods/{pmd['name']}")
            return
        n = len(mine)
        for p in replace:
            body = _replacement(job, p, n)
            n += 1
            self.created.setdefault(md["uid"], []).append(self.api.create(body)[1])

    def release_finalizers(self, keep: Collection[str] = ()) -> None:
        """The Job controller's part: pods that ended or are being deleted lose the
        job-tracking finalizer (merge patch with the resourceVersion: a 409 waits a tick),
        except those in ``keep`` (uids of failed pods not yet counted)."""
        for pod in self.api.call("GET", PODS).get("items") or []:
            meta = pod["metadata"]
            if meta.get("uid") in keep:
                continue
            finalizers = meta.get("finalizers") or []
            ended = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
            if JOB_TRACKING_FINALIZER not in finalizers:
                continue
            if not (ended or meta.get("deletionTimestamp")):
                continue
            keep = [f for f in finalizers if f != JOB_TRACKING_FINALIZER]
            patch = {"metadata": {"finalizers": keep, "resourceVersion": meta["resourceVersion"]}}
            path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
            with contextlib.suppress(ApiError):
                self.api.call("PATCH", path, patch)

    def collect(self, listed: set[str]) -> None:
        """The garbage collector's part: what it created for a deleted object goes too."""
        for uid in [u for u in self.created if u not in listed]:
            for path in self.created.pop(uid):
                self.api.delete(path)

    def tick(self) -> None:
        seen: set[str] = set()
        jobs: list[Obj] = []
        for kind, path in LISTS.items():
            listed = self.api.call("GET", path)
            if kind == "Job":
                jobs = list(listed.get("items") or [])
            seen.update(o["metadata"]["uid"] for o in listed.get("items") or [])
            for obj in listed.get("items") or []:
                obj.setdefault("kind", kind)  # a list leaves them out of its items
                obj.setdefault("apiVersion", listed.get("apiVersion"))
                meta = obj["metadata"]
                if meta["uid"] in self.done or meta.get("deletionTimestamp"):
                    continue
                if kind == "Job" and _owned_by(obj, "JobSet"):
                    self.done.add(meta["uid"])  # its pods come with the JobSet's
                    continue
                try:
                    names = self.act_on(obj)
                except (ApiError, KeyError, TypeError, ValueError) as e:
                    said = f"{kind} {meta['namespace']}/{meta['name']}: {e!r}"
                    if said not in self.reported:
                        self.reported.add(said)
                        print(said, file=self.out, flush=True)
                    continue
                self.done.add(meta["uid"])
                print(
                    f"(controller stand-in) created the pods of {kind} "
                    f"{meta['namespace']}/{meta['name']}: {', '.join(names)}",
                    file=self.out,
                    flush=True,
                )
        unsettled = self.settle_failures(jobs, self.api.call("GET", PODS).get("items") or [])
        self.release_finalizers(keep=unsettled)
        self.collect(seen)

    def run(self, interval: float, stop: Callable[[], bool]) -> None:
        while not stop():
            try:
                self.tick()
            except (ApiError, OSError) as e:  # the API server restarting: try again
                print(f"list failed: {e}", file=self.out, flush=True)
            time.sleep(interval)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="slurm-bridge sandbox workloads", description=__doc__)
    p.add_argument("--kubeconfig", required=True, type=Path)
    p.add_argument("--interval", type=float, default=DEFAULT_INTERVAL, help="seconds per list")
    ns = p.parse_args(argv)
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda sig, _frame: stopping.append(sig))
    with contextlib.suppress(KeyboardInterrupt):
        StandIn(Api.from_kubeconfig(ns.kubeconfig)).run(ns.interval, lambda: bool(stopping))
    return 0
