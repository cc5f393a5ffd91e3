"""What only the tests need of the clients: a Kubernetes client for a plain URL, and the
Slurm reads the product does not make (the whole job table decoded at once, ``/diag/``)."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio.client import Configuration

from bridge.clock import Clock
from bridge.kube.client import KubeClient
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import JobList


def kube_for_host(
    host: str,
    *,
    request_timeout: float,
    token: str | None = None,
    clock: Clock | None = None,
) -> KubeClient:
    """A client for a plain URL (sandbox server, loopback test servers)."""
    conf = Configuration(host=host.rstrip("/"))
    if token:
        conf.api_key = {"BearerToken": token}
        conf.api_key_prefix = {"BearerToken": "Bearer"}
    return KubeClient(conf, request_timeout=request_timeout, clock=clock)


async def list_jobs(slurm: SlurmClient) -> JobList:
    """``GET /jobs/``, decoded whole (the product streams it: ``SlurmClient.scan_jobs``)."""
    c = await slurm.codec()
    resp = await slurm.request(
        "GET", c.path("jobs/"), endpoint="jobs_get", idempotent=True, bulk=True
    )
    return c.decode_jobs(resp.body)


async def slurm_diag(slurm: SlurmClient) -> dict[str, Any]:
    """slurmctld statistics (``GET /diag/``): needs a valid token."""
    c = await slurm.codec()
    resp = await slurm.request("GET", c.path("diag/"), endpoint="diag", idempotent=True)
    stats = resp.body.get("statistics") if isinstance(resp.body, dict) else None
    return dict(stats) if isinstance(stats, dict) else {}


async def api_version(slurm: SlurmClient) -> str:
    """The API version the client speaks (negotiated on first use with ``auto``)."""
    return (await slurm.codec()).version
