"""Node reconcile: one node key, planned (:mod:`controller.nodes`) and applied.

It holds what the plans need beside the Kubernetes node: the Slurm nodes as last read
(the sweep lists them all; a node is read again at once after an action that changes it,
not at the next sweep), the partitions the bridge's jobs were seen in, and the node
policy built from both (cached, dropped when its inputs change).
"""

from __future__ import annotations

from collections.abc import Iterable

from bridge.config import BridgeConfig
from bridge.devices.node_gres import GresTable
from bridge.devices.taints import with_rules
from bridge.errors import SlurmError, SlurmNotFound
from bridge.logging import get_logger
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import SlurmNode
from bridge.translate import TranslateSettings, kobj
from bridge.translate.dra import DRA_CPU
from controller import nodes
from controller.apply import Applier
from controller.caches import WatchCaches
from controller.model import (
    NO_NEXT,
    DeleteSlurmNode,
    DrainSlurmNode,
    JoinPartition,
    KubeObject,
    MarkExternalNode,
    Next,
    RegisterExternalNode,
    ResumeSlurmNode,
    SetNodeTopology,
    node_key,
)

log = get_logger("controller")

# Actions after which the controller reads the Slurm node again (not waiting for a sweep).
SLURM_NODE_CHANGES = (
    DrainSlurmNode,
    ResumeSlurmNode,
    RegisterExternalNode,
    MarkExternalNode,
    JoinPartition,
    SetNodeTopology,
    DeleteSlurmNode,
)


class NodeReconcile:
    def __init__(
        self,
        cfg: BridgeConfig,
        slurm: SlurmClient,
        applier: Applier,
        caches: WatchCaches,
    ) -> None:
        self.cfg = cfg
        self.slurm = slurm
        self.applier = applier
        self.caches = caches
        self.slurm_nodes: dict[str, SlurmNode] = {}
        self.slurm_nodes_known = False  # the node list was read at least once
        # Partitions the bridge's jobs were seen in (managed-node taints); only grows.
        self.job_partitions: set[str] = set()
        self._policy: nodes.NodePolicy | None = None  # cached; dropped when inputs change
        # node -> (its slices' and the DeviceTaintRules' names and resourceVersions, their
        # devices): read again only when a slice or rule changed (a GPU's placements are
        # many devices with many counters)
        self._inventories: dict[str, tuple[tuple[tuple[str, str], ...], nodes.NodeDevices]] = {}

    def bridge_partitions(self) -> frozenset[str]:
        """The partitions of the bridge: ``partition``, its jobs', its external nodes'."""
        return nodes.bridge_partitions(
            self.cfg.partition, self.job_partitions, self.caches.nodes.values()
        )

    def policy(self) -> nodes.NodePolicy:
        if self._policy is not None:
            return self._policy
        c = self.cfg
        self._policy = nodes.NodePolicy(
            scheduler_name=c.scheduler_name,
            mcs_label=c.mcs_label,
            default_partition=c.partition,
            bridge_partitions=self.bridge_partitions(),
            sync_state=c.controller.sync_node_state,
            cordon_on_slurm_drain=c.controller.cordon_on_slurm_drain,
            topology=TranslateSettings.from_config(c).topology,
            gpu_drivers={d: g for d, g in c.scheduler.device_class_gres.items() if d != DRA_CPU},
            gres_table=GresTable.of(c.scheduler.gres_table()),
        )
        return self._policy

    def _devices(self, name: str, node: KubeObject) -> nodes.NodeDevices | None:
        """The node's devices, tainted ones apart (None while its slices are not known
        yet)."""
        slices = self.caches.node_slices(name)
        if slices is None:
            return None
        if not slices:
            self._inventories.pop(name, None)
            every = nodes.node_devices(node, slices, self.policy())  # allocatable: cheap
            return nodes.NodeDevices(every, every)
        rules = self.caches.taint_rules_of()
        key = tuple(
            sorted(
                (kobj.name(s), kobj.text(s, "metadata", "resourceVersion"))
                for s in [*slices, *rules]
            )
        )
        hit = self._inventories.get(name)
        if hit is not None and hit[0] == key:
            return hit[1]
        devices = nodes.read_devices(node, with_rules(slices, rules), self.policy())
        self._inventories[name] = (key, devices)
        return devices

    def forget(self, name: str) -> None:
        """The Kubernetes node was deleted."""
        self._inventories.pop(name, None)

    def external_nodes_changed(self) -> None:
        """The partitions external nodes name may have changed: build the policy again."""
        self._policy = None

    def job_partitions_seen(self, partitions: Iterable[str]) -> None:
        """A job of the bridge's runs in ``partitions``."""
        new = set(partitions) - self.job_partitions
        if new:
            self.job_partitions |= new
            self._policy = None

    def slurm_nodes_listed(self, listed: Iterable[SlurmNode]) -> None:
        """The sweep read every Slurm node."""
        self.slurm_nodes = {n.name: n for n in listed}
        self.slurm_nodes_known = True

    async def reconcile(self, name: str) -> Next:
        """Plan and apply the node's actions; what to queue next: the node again when
        Slurm's side of it changed (the next step should not wait for the sweep)."""
        node = self.caches.nodes.get(name)
        if node is None:
            self._inventories.pop(name, None)
            return NO_NEXT
        sname = nodes.slurm_name(node)
        before = self.slurm_nodes.get(sname)
        devices = self._devices(name, node)
        actions = nodes.plan(node, before, self.policy(), self.slurm_nodes_known, devices)
        changed = False
        try:
            await self.applier.apply(actions)
        finally:
            if any(isinstance(a, SLURM_NODE_CHANGES) for a in actions):
                # Read the node again now: the next step (mark, join, delete, taint)
                # should not wait for the next sweep.
                await self._refresh_slurm_node(sname)
                changed = self.slurm_nodes.get(sname) != before
        return Next((node_key(name),)) if changed else NO_NEXT

    async def _refresh_slurm_node(self, sname: str) -> None:
        try:
            self.slurm_nodes[sname] = await self.slurm.get_node(sname)
        except SlurmNotFound:
            self.slurm_nodes.pop(sname, None)
        except SlurmError as e:
            log.warning("slurm_node_get_failed", node=sname, error=str(e))
