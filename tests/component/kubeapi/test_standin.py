"""The Job/JobSet/LWS controllers' stand-in (``slurm-bridge sandbox workloads``) against the
sandbox API server: objects applied by hand get the pods their controllers would create,
ended pods lose the job-tracking finalizer, and deleting the object deletes what was made."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

from sandbox.cluster import SandboxCluster
from sandbox.controllers import workload_controller
from sandbox.controllers.workload_pods import load_example

NS = "slurm-bridge"


async def tick(s: workload_controller.StandIn) -> None:
    await asyncio.to_thread(s.tick)  # urllib is blocking; the server runs on this loop


def stand_in(srv: SandboxCluster, tmp_path: Path) -> workload_controller.StandIn:
    api = workload_controller.Api.from_kubeconfig(srv.write_kubeconfig(tmp_path / "kubeconfig"))
    return workload_controller.StandIn(api, out=io.StringIO())


def said(s: workload_controller.StandIn) -> str:
    out = s.out
    assert isinstance(out, io.StringIO)
    return out.getvalue()


async def create(s: workload_controller.StandIn, example: str) -> Any:
    obj = load_example(example)[0]
    group, _, version = obj["apiVersion"].rpartition("/")
    plural = {"Job": "jobs", "JobSet": "jobsets", "LeaderWorkerSet": "leaderworkersets"}
    path = f"/apis/{group}/{version}/namespaces/{NS}/{plural[obj['kind']]}"
    return await asyncio.to_thread(s.api.call, "POST", path, obj)


async def pods(s: workload_controller.StandIn) -> dict[str, Any]:
    listed = await asyncio.to_thread(s.api.call, "GET", f"/api/v1/namespaces/{NS}/pods")
    return {p["metadata"]["name"]: p for p in listed["items"]}


async def test_an_applied_indexed_job_gets_its_pods_once_owned_by_the_job(
    tmp_path: Path,
) -> None:
    async with SandboxCluster(port=0) as srv:
        s = stand_in(srv, tmp_path)
        job = await create(s, "indexed-job")
        await tick(s)
        await tick(s)  # a second look creates nothing more
        got = await pods(s)
        assert sorted(got) == [f"indexed-1-{i}-x{i}" for i in range(4)]
        for p in got.values():
            (ref,) = p["metadata"]["ownerReferences"]
            assert (ref["kind"], ref["uid"]) == ("Job", job["metadata"]["uid"])
        assert "created the pods of Job slurm-bridge/indexed-1" in said(s)


async def test_a_jobset_gets_its_jobs_and_pods_and_an_lws_its_leader_and_workers(
    tmp_path: Path,
) -> None:
    async with SandboxCluster(port=0) as srv:
        s = stand_in(srv, tmp_path)
        await create(s, "jobset")
        await create(s, "lws")
        await tick(s)
        await tick(s)  # the JobSet's Jobs are listed now: they get no second set of pods
        got = await pods(s)
        assert sorted(got) == [
            "js-1-driver-0-x0",
            "js-1-workers-0-0-x0",
            "js-1-workers-0-1-x1",
            "lws-1-0",
            "lws-1-0-1",
            "lws-1-0-2",
        ]
        jobs = await asyncio.to_thread(s.api.call, "GET", f"/apis/batch/v1/namespaces/{NS}/jobs")
        job_uids = {j["metadata"]["uid"] for j in jobs["items"]}
        assert len(job_uids) == 2
        refs = got["js-1-driver-0-x0"]["metadata"]["ownerReferences"]
        assert refs[0]["uid"] in job_uids


async def test_ended_pods_lose_the_job_tracking_finalizer_and_a_deleted_job_takes_its_pods(
    tmp_path: Path,
) -> None:
    async with SandboxCluster(port=0, nodes=["kube-node-0"], kubelet=True) as srv:
        s = stand_in(srv, tmp_path)
        await create(s, "indexed-job")
        await tick(s)
        srv.finish_pod(NS, "indexed-1-0-x0")
        await tick(s)
        got = await pods(s)
        assert workload_controller.JOB_TRACKING_FINALIZER not in (
            got["indexed-1-0-x0"]["metadata"].get("finalizers") or []
        )
        assert (
            workload_controller.JOB_TRACKING_FINALIZER
            in got["indexed-1-1-x1"]["metadata"]["finalizers"]
        )

        path = f"/apis/batch/v1/namespaces/{NS}/jobs/indexed-1"
        await asyncio.to_thread(s.api.call, "DELETE", path)
        await tick(s)  # deletes the pods; the ones still tracked are terminating
        await tick(s)  # ... and lose the finalizer, so they go
        assert await pods(s) == {}


async def _fail(srv: SandboxCluster, name: str, *, disruption: bool) -> None:
    """The pod Failed as the bridge fails it when Slurm preempted its job (or not)."""
    status: dict[str, Any] = {"phase": "Failed"}
    if disruption:
        status["conditions"] = [
            {"type": "DisruptionTarget", "status": "True", "reason": "SlurmJobPreempted"}
        ]
    rd = srv.api.resolve("", "v1", "pods")
    srv.api.patch(
        rd, NS, name, "application/merge-patch+json", {"status": status}, subresource="status"
    )


async def _job(s: workload_controller.StandIn, name: str) -> Any:
    path = f"/apis/batch/v1/namespaces/{NS}/jobs/{name}"
    return await asyncio.to_thread(s.api.call, "GET", path)


async def test_pod_failure_policy_ignores_a_disruption_and_replaces_the_pod(
    tmp_path: Path,
) -> None:
    async with SandboxCluster(port=0) as srv:
        s = stand_in(srv, tmp_path)
        await create(s, "preemptible-job")
        await tick(s)
        await _fail(srv, "preemptible-1-x0", disruption=True)
        await tick(s)
        got = await pods(s)
        assert sorted(got) == ["preemptible-1-x0", "preemptible-1-x1"]
        assert workload_controller.JOB_TRACKING_FINALIZER not in (
            got["preemptible-1-x0"]["metadata"].get("finalizers") or []
        )  # counted (as ignored): the finalizer goes
        job = await _job(s, "preemptible-1")
        assert job["status"]["failed"] == 0  # backoffLimit 0 is not used up
        assert not job["status"].get("conditions")
        assert "failed pod preemptible-1-x0 ignored" in said(s)
        (ref,) = got["preemptible-1-x1"]["metadata"]["ownerReferences"]
        assert ref["uid"] == job["metadata"]["uid"]


async def test_a_program_failure_counts_against_backoff_limit_and_fails_the_job(
    tmp_path: Path,
) -> None:
    async with SandboxCluster(port=0, nodes=["kube-node-0"], kubelet=True) as srv:
        s = stand_in(srv, tmp_path)
        await create(s, "preemptible-job")
        await tick(s)
        srv.finish_pod(NS, "preemptible-1-x0", exit_code=1)
        await tick(s)
        job = await _job(s, "preemptible-1")
        assert job["status"]["failed"] == 1
        conds = {c["type"]: c for c in job["status"]["conditions"]}
        assert conds["Failed"]["reason"] == "BackoffLimitExceeded"
        assert sorted(await pods(s)) == ["preemptible-1-x0"]  # no replacement


async def test_an_exit_code_matching_a_fail_job_rule_fails_the_job_naming_the_rule(
    tmp_path: Path,
) -> None:
    async with SandboxCluster(port=0, nodes=["kube-node-0"], kubelet=True) as srv:
        s = stand_in(srv, tmp_path)
        await create(s, "preemptible-job")
        await tick(s)
        srv.finish_pod(NS, "preemptible-1-x0", exit_code=42)
        await tick(s)
        job = await _job(s, "preemptible-1")
        failed = next(c for c in job["status"]["conditions"] if c["type"] == "Failed")
        assert failed["reason"] == "PodFailurePolicy"
        assert failed["message"] == (
            f"Container main for pod {NS}/preemptible-1-x0 failed with exit code 42 "
            "matching FailJob rule at index 1"
        )
