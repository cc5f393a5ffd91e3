"""Expand workload manifests into the pods their controllers would create (sandbox tooling).

Pure and deterministic (uids are uuid5 of kind/namespace/name unless the manifest already
has one), following KUBE.md for the labels and owner references of Job, JobSet and
LeaderWorkerSet pods. Not production code: in a cluster the Job, JobSet and LWS controllers
create these pods. Used by the translation tests and by the demo, which stands in for those
controllers on the sandbox API server (it has none).
"""

from __future__ import annotations

import copy
import hashlib
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

Obj = dict[str, Any]
EXAMPLES = Path(__file__).resolve().parent.parent.parent / "deploy" / "examples"


def uid_for(kind: str, namespace: str, name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{kind}/{namespace}/{name}"))


@dataclass
class Expanded:
    """What a cluster would hold: pods, and every other object by uid (the owners)."""

    pods: list[Obj] = field(default_factory=list)
    objects: dict[str, Obj] = field(default_factory=dict)

    def find(self, kind: str, namespace: str, name: str) -> Obj | None:
        for obj in self.objects.values():
            meta = obj["metadata"]
            if obj["kind"] == kind and meta["namespace"] == namespace and meta["name"] == name:
                return obj
        return None


def _with_identity(obj: Obj, namespace: str) -> Obj:
    obj = copy.deepcopy(obj)
    meta = obj.setdefault("metadata", {})
    meta.setdefault("namespace", namespace)
    if not meta.get("uid"):
        meta["uid"] = uid_for(obj["kind"], meta["namespace"], meta["name"])
    return obj


def _owner(obj: Obj) -> Obj:
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _pod(template: Obj, namespace: str, name: str, labels: dict[str, str], owner: Obj) -> Obj:
    tmeta = template.get("metadata", {})
    pod: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {**tmeta.get("labels", {}), **labels},
            "annotations": dict(tmeta.get("annotations", {})),
            "ownerReferences": [_owner(owner)],
        },
        "spec": copy.deepcopy(template.get("spec", {})),
    }
    pod["metadata"]["uid"] = uid_for("Pod", namespace, name)
    return pod


def _job_pods(job: Obj, out: Expanded, extra_labels: dict[str, str]) -> None:
    ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
    spec = job["spec"]
    parallelism = spec.get("parallelism", 1)
    count = min(parallelism, spec.get("completions", parallelism))
    indexed = spec.get("completionMode") == "Indexed"
    for i in range(count):
        labels = {
            **extra_labels,
            "batch.kubernetes.io/job-name": name,
            "job-name": name,
            "batch.kubernetes.io/controller-uid": job["metadata"]["uid"],
        }
        pod_name = f"{name}-{i}-x{i}" if indexed else f"{name}-x{i}"
        if indexed:
            labels["batch.kubernetes.io/job-completion-index"] = str(i)
        pod = _pod(spec["template"], ns, pod_name, labels, job)
        if indexed:
            pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] = str(i)
        pod["metadata"]["finalizers"] = ["batch.kubernetes.io/job-tracking"]
        out.pods.append(pod)


def _jobset(js: Obj, out: Expanded) -> None:
    ns, name = js["metadata"]["namespace"], js["metadata"]["name"]
    for rj in js["spec"]["replicatedJobs"]:
        for j in range(rj.get("replicas", 1)):
            labels = {
                "jobset.sigs.k8s.io/jobset-name": name,
                "jobset.sigs.k8s.io/replicatedjob-name": rj["name"],
                "jobset.sigs.k8s.io/job-index": str(j),
            }
            job = _with_identity(
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "metadata": {
                        "name": f"{name}-{rj['name']}-{j}",
                        "namespace": ns,
                        "labels": labels,
                        "ownerReferences": [_owner(js)],
                    },
                    "spec": copy.deepcopy(rj["template"]["spec"]),
                },
                ns,
            )
            out.objects[job["metadata"]["uid"]] = job
            _job_pods(job, out, labels)


def _lws(lws: Obj, out: Expanded) -> None:
    ns, name = lws["metadata"]["namespace"], lws["metadata"]["name"]
    lwt = lws["spec"]["leaderWorkerTemplate"]
    size = lwt.get("size", 1)
    leader_template = lwt.get("leaderTemplate", lwt["workerTemplate"])
    leader_sts = _with_identity(
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": ns, "ownerReferences": [_owner(lws)]},
        },
        ns,
    )
    out.objects[leader_sts["metadata"]["uid"]] = leader_sts
    for g in range(lws["spec"].get("replicas", 1)):
        key = hashlib.sha1(f"{ns}/{name}-{g}".encode()).hexdigest()
        base = {
            "leaderworkerset.sigs.k8s.io/name": name,
            "leaderworkerset.sigs.k8s.io/group-index": str(g),
            "leaderworkerset.sigs.k8s.io/group-key": key,
        }
        leader = _pod(
            leader_template,
            ns,
            f"{name}-{g}",
            {**base, "leaderworkerset.sigs.k8s.io/worker-index": "0"},
            leader_sts,
        )
        leader["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/size"] = str(size)
        out.pods.append(leader)
        out.objects[leader["metadata"]["uid"]] = leader
        worker_sts = _with_identity(
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": {
                    "name": f"{name}-{g}",
                    "namespace": ns,
                    "ownerReferences": [_owner(leader)],
                },
            },
            ns,
        )
        out.objects[worker_sts["metadata"]["uid"]] = worker_sts
        for w in range(1, size):
            worker = _pod(
                lwt["workerTemplate"],
                ns,
                f"{name}-{g}-{w}",
                {**base, "leaderworkerset.sigs.k8s.io/worker-index": str(w)},
                worker_sts,
            )
            worker["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/size"] = str(size)
            out.pods.append(worker)


def expand(manifests: list[Obj], namespace: str = "default") -> Expanded:
    """The cluster state after the controllers of these manifests created their pods."""
    out = Expanded()
    for raw in manifests:
        obj = _with_identity(raw, namespace)
        kind = obj["kind"]
        if kind == "Pod":
            out.pods.append(obj)
            continue
        out.objects[obj["metadata"]["uid"]] = obj
        if kind == "Job":
            _job_pods(obj, out, {})
        elif kind == "JobSet":
            _jobset(obj, out)
        elif kind == "LeaderWorkerSet":
            _lws(obj, out)
    return out


def load_example(name: str) -> list[Obj]:
    """The documents of ``deploy/examples/<name>.yaml``."""
    text = (EXAMPLES / f"{name}.yaml").read_text()
    return [d for d in yaml.safe_load_all(text) if d]
