"""Changing what Slurm holds: a pending job's spec, cancelling a job, node state, comment
and topology, dynamic (external) nodes and partition membership.

Idempotent ones (cancel, node state updates, node deletion, partition update) are retried
on SlurmUnavailable; a job update and a node creation are sent once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from bridge.errors import classify_slurm_error
from bridge.models import JobSpec
from bridge.slurm.codec import Codec, codec_for
from bridge.slurm.fetching import SlurmFetching

# ESLURM_ALREADY_DONE: "Job/step already completing or completed".
ALREADY_DONE = 2021
# ESLURM_NODE_ALREADY_EXISTS: "Node already exists in the node table" (POST /new/node/).
NODE_ALREADY_EXISTS = 2168


class SlurmUpdating(SlurmFetching):
    """The writes other than submit (adding a node to a partition reads it first)."""

    # ------------------------------------------------------------------ jobs
    async def update_job(self, job_id: int, spec: JobSpec) -> None:
        """Update a pending job from ``spec`` (size, resources, time, comments, ...)."""
        c = await self.codec()
        resp = await self.request(
            "POST",
            c.path(f"job/{int(job_id)}"),
            endpoint="job_update",
            idempotent=False,
            body=c.encode_update(spec),
        )
        for err in c.decode_update_results(resp.body):
            raise classify_slurm_error(
                endpoint="job_update",
                status=resp.status,
                error_number=err.error_number,
                slurm_message=err.text,
            )

    async def cancel(self, job_id: int) -> bool:
        """Cancel a job. True: cancelled now; False: it had already ended (success too).

        Unknown id: SlurmNotFound. DELETE reports failures in ``status[]`` with HTTP 200.
        """
        c = await self.codec()
        resp = await self.request(
            "DELETE", c.path(f"job/{int(job_id)}"), endpoint="job_cancel", idempotent=True
        )
        for st in c.decode_cancel(resp.body):
            if st.error is None:
                continue
            if st.error.error_number == ALREADY_DONE:
                return False
            raise classify_slurm_error(
                endpoint="job_cancel",
                status=resp.status,
                error_number=st.error.error_number,
                slurm_message=st.error.text,
            )
        return True

    # ------------------------------------------------------------------ nodes
    async def _update_node(self, name: str, body: Callable[[Codec], Any]) -> None:
        c = await self.codec()
        await self.request(
            "POST", c.path(f"node/{name}"), endpoint="node_update", idempotent=True, body=body(c)
        )

    async def _node_state(self, name: str, state: str, reason: str | None) -> None:
        await self._update_node(name, lambda c: c.encode_node_update(state, reason))

    async def drain_node(self, name: str, reason: str) -> None:
        await self._node_state(name, "DRAIN", reason)

    async def resume_node(self, name: str) -> None:
        """Undo DRAIN/DOWN (Slurm's RESUME)."""
        await self._node_state(name, "RESUME", None)

    async def create_external_node(
        self,
        name: str,
        *,
        cpus: int,
        memory_mib: int,
        features: Sequence[str] = (),
        gres: str | None = None,
    ) -> None:
        """Register a ``State=EXTERNAL`` node (needs MaxNodeCount headroom; v0.0.44+).

        Slurm 26.05 refuses ``Gres=gpu:N`` on a dynamic node (no ``File=``; gres.conf is
        not consulted for nodes created at run time): the answer is a SlurmRejected.
        """
        c = await self.codec()
        body = c.encode_new_node(
            name, cpus=cpus, memory_mib=memory_mib, features=features, gres=gres
        )
        path = c.path("new/node/")
        if not c.supports_new_node:
            # v0.0.43 has no /new/node/: the same body is valid for the next version up.
            path = codec_for("v0.0.44").path("new/node/")
        await self.request("POST", path, endpoint="node_create", idempotent=False, body=body)

    async def set_node_comment(self, name: str, comment: str) -> None:
        """Set a node's comment (the bridge marks the external nodes it registered)."""
        await self._update_node(name, lambda c: c.encode_node_comment(comment))

    async def set_node_topology(self, name: str, topology: str) -> None:
        """Set a node's ``Topology=`` (``topology_str``: ``net:block-0``, tree
        ``net:spine:leaf-1``). Slurm refuses a block or topology that topology.yaml lacks
        (2178, "Requested topology configuration is not available")."""
        await self._update_node(name, lambda c: c.encode_node_topology(topology))

    async def add_node_to_partition(self, partition: str, node: str) -> bool:
        """Add ``node`` to the EXISTING ``partition`` (``scontrol update nodes+=``).

        False when the API version has no partition update (before v0.0.45); the node
        then joins partitions only through its features (``NodeSet=... Feature=...``).
        Raises SlurmNotFound when the partition does not exist: Slurm's ``POST
        /partitions/`` would silently create it.
        """
        c = await self.codec()
        if not c.supports_partition_update:
            return False
        await self.get_partition(partition)
        await self.request(
            "POST",
            c.path("partitions/"),
            endpoint="partition_update",
            idempotent=True,
            body=c.encode_partition_nodes(partition, f"+{node}"),
        )
        return True

    async def delete_node(self, name: str) -> None:
        c = await self.codec()
        await self.request(
            "DELETE", c.path(f"node/{name}"), endpoint="node_delete", idempotent=True
        )


__all__ = ["ALREADY_DONE", "NODE_ALREADY_EXISTS", "SlurmUpdating"]
