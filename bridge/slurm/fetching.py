"""Reading from Slurm: jobs (one, some, streamed whole-table scans), job states, nodes,
partitions and ``ping``. Every read is a GET, retried on SlurmUnavailable.

The whole-table reads (``GET /jobs/``, ``GET /jobs/state/``) are streamed
(:meth:`bridge.slurm.api.SlurmApi._scan`): memory follows what the caller keeps, not
Slurm's table.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from bridge.errors import SlurmNotFound
from bridge.slurm.api import SlurmApi
from bridge.slurm.codec import Codec, codec_for
from bridge.slurm.models import (
    JobState,
    JobStateItem,
    NodeResources,
    PingResult,
    SlurmAssociation,
    SlurmJob,
    SlurmNode,
    SlurmPartition,
    SlurmQos,
    SlurmReservation,
)

# job ids per GET /jobs/state/ request (repeated job_id=..., ~15 bytes each): slurmrestd
# 26.05 answered 5,000 in 0.1 s and refused 10,000 ("Insane message length")
STATE_IDS_PER_URL = 4000

T = TypeVar("T")


def state_requests(ids: int) -> int:
    """How many requests :meth:`SlurmFetching.list_job_states` makes for ``ids`` job ids."""
    return max(1, -(-ids // STATE_IDS_PER_URL))


class SlurmFetching(SlurmApi):
    """The reads."""

    async def _get(
        self,
        path: str,
        endpoint: str,
        *,
        params: Sequence[tuple[str, str]] | None = None,
        version: str | None = None,
    ) -> tuple[Codec, Any]:
        """One retried ``GET`` of ``path`` (under the negotiated version's prefix, or
        ``version``'s): the codec that decodes the answer, and the answer's body."""
        c = await self.codec()
        url = (codec_for(version) if version else c).path(path)
        resp = await self.request("GET", url, endpoint=endpoint, idempotent=True, params=params)
        return c, resp.body

    async def ping(self) -> tuple[PingResult, ...]:
        """slurmctld reachability. NOT an auth check (a bad token still gets HTTP 200)."""
        c, body = await self._get("ping/", "ping")
        return c.decode_ping(body)

    # ------------------------------------------------------------------ jobs
    async def get_job(self, job_id: int) -> SlurmJob:
        c, body = await self._get(f"job/{int(job_id)}", "job_get")
        job = c.decode_job_record(body, int(job_id))
        if job is None:
            raise SlurmNotFound(f"job_get: job {job_id} not found", endpoint="job_get")
        return job

    async def get_job_resources(self, job_id: int) -> tuple[NodeResources, ...]:
        """What Slurm allocated to a running job, per node: core bitmap and GRES indices
        (``GET /resources/{job_id}``; v0.0.43 has no such endpoint: v0.0.44's is used)."""
        c = await self.codec()
        version = "v0.0.44" if c.version == "v0.0.43" else None
        c, body = await self._get(f"resources/{int(job_id)}", "resources_get", version=version)
        return c.decode_resources(body)

    async def get_jobs(self, job_ids: Iterable[int], *, concurrency: int = 16) -> list[SlurmJob]:
        """``GET /job/{id}`` of each, ``concurrency`` at a time; the jobs Slurm no longer
        has are left out."""
        sem = asyncio.Semaphore(concurrency)

        async def one(job_id: int) -> SlurmJob | None:
            async with sem:
                try:
                    return await self.get_job(job_id)
                except SlurmNotFound:
                    return None

        return [j for j in await asyncio.gather(*(one(i) for i in job_ids)) if j is not None]

    async def list_job_states(
        self, job_ids: Sequence[int] | None = None
    ) -> tuple[JobStateItem, ...]:
        """``GET /jobs/state/``: id and state of every job (or of ``job_ids``).

        ``job_ids`` are asked :data:`STATE_IDS_PER_URL` at a time (one request each,
        :func:`state_requests`): never the whole table for them, whose answer takes
        slurmrestd ~10 s at 68,000 jobs (4,000 listed ids: ~0.1 s, measured)."""
        if not job_ids:
            c, body = await self._get("jobs/state/", "jobs_state")
            return c.decode_job_states(body)
        wanted = sorted({int(j) for j in job_ids})
        out: list[JobStateItem] = []
        for i in range(0, len(wanted), STATE_IDS_PER_URL):
            # Repeated job_id parameters: slurmrestd 26.05 answers a CSV list with HTTP 500.
            params = [("job_id", str(j)) for j in wanted[i : i + STATE_IDS_PER_URL]]
            c, body = await self._get("jobs/state/", "jobs_state", params=params)
            out += c.decode_job_states(body)
        return tuple(out)

    async def scan_job_states(
        self,
        keep: Callable[[JobStateItem], bool] | None = None,
        *,
        state: Callable[[JobState], bool] | None = None,
    ) -> tuple[JobStateItem, ...]:
        """The rows of ``GET /jobs/state/`` (every job, finished ones too) whose state
        ``state`` accepts and that ``keep`` accepts (None: any), read as a stream: memory
        follows the kept rows (the active jobs, say), not Slurm's table (100,000 rows
        decoded at once were ~100 MB).

        ``state`` is asked once per distinct state, and a row it refuses is dropped before
        it is built (:meth:`~bridge.slurm.codec.base.Codec.decode_job_state_row`): most
        rows are finished jobs, and not building them takes 44% off the scan's CPU (9,000
        rows, 90% finished: 52 -> 29 ms, docs/benchmarks.md)."""
        c = await self.codec()
        states: dict[tuple[str, ...], tuple[JobState, bool]] = {}

        def pick(item: Any) -> JobStateItem | None:
            row = c.decode_job_state_row(item, states, state)
            return row if row is not None and (keep is None or keep(row)) else None

        return await self._scan_jobs_array(c.path("jobs/state/"), "jobs_state", pick)

    async def find_jobs_by_admin_comment(
        self, admin_comment: str, *, name: str | None = None, active_only: bool = True
    ) -> tuple[SlurmJob, ...]:
        """Jobs whose ``admin_comment`` equals (or, if it is JSON, contains as a substring
        of the raw text) ``admin_comment``, optionally also matching ``name``.

        The submit-timeout rule: call this before submitting again after a lost answer.
        """
        return await self.scan_jobs(
            lambda j: (
                (
                    j.admin_comment == admin_comment
                    or bool(admin_comment and admin_comment in j.admin_comment)
                )
                and (name is None or j.name == name)
                and (not active_only or j.state.active)
            )
        )

    async def scan_jobs(
        self,
        keep: Callable[[SlurmJob], bool],
        *,
        job_ids: Container[int] | None = None,
        states: frozenset[str] = frozenset(),
    ) -> tuple[SlurmJob, ...]:
        """The jobs of ``GET /jobs/`` that ``keep`` accepts, read as a stream: one job is
        decoded at a time and only the kept ones are held, so memory does not grow with
        Slurm's job table (finished jobs included), only with what the caller keeps.
        ``job_ids``: only these jobs are decoded at all (the others cost a dict lookup),
        and the jobs in one of ``states`` (``PENDING``, ``RUNNING`` ...: the raw record's
        ``job_state``, read before decoding)."""
        c = await self.codec()

        def pick(item: Any) -> SlurmJob | None:
            if not isinstance(item, Mapping) or (
                job_ids is not None
                and item.get("job_id") not in job_ids
                and not (states and _in_states(item.get("job_state"), states))
            ):
                return None
            job = c.decode_job(item)
            return job if job is not None and keep(job) else None

        return await self._scan_jobs_array(c.path("jobs/"), "jobs_get", pick)

    async def _scan_jobs_array(
        self, path: str, endpoint: str, pick: Callable[[Any], T | None]
    ) -> tuple[T, ...]:
        """The picked items of the ``jobs`` array of one streamed, retried GET."""
        kept, _ = await self._retried(
            functools.partial(self._scan, path, endpoint=endpoint, key="jobs", pick=pick),
            endpoint,
        )
        return tuple(kept)

    # ------------------------------------------------------------------ nodes
    async def list_nodes(self) -> tuple[SlurmNode, ...]:
        c, body = await self._get("nodes/", "nodes_get")
        return c.decode_nodes(body)

    async def get_node(self, name: str) -> SlurmNode:
        c, body = await self._get(f"node/{name}", "node_get")
        for node in c.decode_nodes(body):
            if node.name == name:
                return node
        raise SlurmNotFound(f"node_get: node {name!r} not found", endpoint="node_get")

    # ------------------------------------------------------------------ partitions
    async def list_partitions(self) -> tuple[SlurmPartition, ...]:
        c, body = await self._get("partitions/", "partitions_get")
        return c.decode_partitions(body)

    async def get_partition(self, name: str) -> SlurmPartition:
        """One partition; SlurmNotFound when absent (Slurm says so with a 200 + warning)."""
        c, body = await self._get(f"partition/{name}", "partition_get")
        for part in c.decode_partitions(body):
            if part.name == name:
                return part
        raise SlurmNotFound(
            f"partition_get: partition {name!r} not found", endpoint="partition_get"
        )

    # ------------------------------------------------------------------ reservations
    async def list_reservations(self) -> tuple[SlurmReservation, ...]:
        c, body = await self._get("reservations/", "reservations_get")
        return c.decode_reservations(body)

    # ------------------------------------------------------------------ accounting
    async def list_qos(self) -> tuple[SlurmQos, ...]:
        """slurmdbd's QOS (``GET /slurmdb/<v>/qos/``). SlurmNotFound (HTTP 404) when
        slurmrestd runs without its ``openapi/slurmdbd`` plugin (no accounting)."""
        c = await self.codec()
        resp = await self.request("GET", c.db_path("qos/"), endpoint="qos_get", idempotent=True)
        return c.decode_qos(resp.body)

    async def list_associations(self, **match: str) -> tuple[SlurmAssociation, ...]:
        """slurmdbd's associations (``GET /slurmdb/<v>/associations/``), those ``match``
        selects (``account=...``, ``user=...``: slurmdbd filters); errors as :meth:`list_qos`."""
        c = await self.codec()
        resp = await self.request(
            "GET",
            c.db_path("associations/"),
            endpoint="associations_get",
            idempotent=True,
            params=sorted(match.items()) or None,
        )
        return c.decode_associations(resp.body)


def _in_states(raw: Any, states: frozenset[str]) -> bool:
    """A raw job record's ``job_state`` (a list, or a string in older versions) names
    one of ``states``."""
    if isinstance(raw, str):
        return raw in states
    return isinstance(raw, list) and any(s in states for s in raw)


__all__ = ["STATE_IDS_PER_URL", "SlurmFetching", "state_requests"]
