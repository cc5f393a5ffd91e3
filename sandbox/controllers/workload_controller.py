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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml

from sandbox.controllers import workload_pods

Obj = dict[str, Any]
# kind -> the cluster-wide list path of the objects the stand-in acts on
LISTS = {
    "Job": "/apis/batch/v1/jobs",
    "JobSet": "/apis/jobset.x-k8s.io/v1alpha2/jobsets",
    "LeaderWorkerSet": "/apis/leaderworkerset.x-k8s.io/v1/leaderworkersets",
}
DEFAULT_INTERVAL = 0.5
JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
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

    def release_finalizers(self) -> None:
        """The Job controller's part: pods that ended or are being deleted lose the
        job-tracking finalizer (merge patch with the resourceVersion: a 409 waits a tick)."""
        for pod in self.api.call("GET", PODS).get("items") or []:
            meta = pod["metadata"]
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
        for kind, path in LISTS.items():
            listed = self.api.call("GET", path)
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
        self.release_finalizers()
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
