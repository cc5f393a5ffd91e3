"""The Job/JobSet/LWS controllers' stand-in (``slurm-bridge sandbox workloads``) against the
sandbox API server: objects applied by hand get the pods their controllers would create,
ended pods lose the job-tracking finalizer, and deleting the object deletes what was made."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

from sandbox.controllers import workload_controller
from sandbox.controllers.workload_pods import load_example
from sandbox.kubeapi import SandboxApiServer

NS = "slurm-bridge"


async def tick(s: workload_controller.StandIn) -> None:
    await asyncio.to_thread(s.tick)  # urllib is blocking; the server runs on this loop


def stand_in(srv: SandboxApiServer, tmp_path: Path) -> workload_controller.StandIn:
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
    async with SandboxApiServer(port=0) as srv:
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
    async with SandboxApiServer(port=0) as srv:
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
    async with SandboxApiServer(port=0, nodes=["kube-node-0"], kubelet=True) as srv:
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
