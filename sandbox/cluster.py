"""A sandbox Kubernetes cluster in process: the API server (:mod:`sandbox.kubeapi`) with what
kube-controller-manager and the kubelets would do beside it.

:class:`SandboxCluster` is the one place that wires them: the namespace controller and the
garbage collector (always), the ResourceClaim controller (unless
``resourceclaim_controller=False``: nobody then stands in for kube-controller-manager's),
and the fake kubelet (:mod:`sandbox.kubelet`; running with ``kubelet=True``, or after
``kubelet.start()``). Each of them writes through the server's admission path, as the
identity the real one has. The other keywords are :class:`SandboxApiServer`'s.

In-process use (stable API for other components' tests)::

    from sandbox.cluster import SandboxCluster

    async with SandboxCluster(port=0, nodes=["kube-node-0"], kubelet=True) as srv:
        srv.url                          # "http://127.0.0.1:<port>"
        srv.write_kubeconfig(path)       # the admin "sandbox" (system:masters)
        srv.write_kubeconfig(path, username="system:serviceaccount:ns:sa")  # a new token
        srv.kubeconfig(username="alice", groups=["devs"])   # the same as a dict
        srv.add_token("tok", "alice", groups=("devs",), uid="u1")   # static token file
        # unknown tokens: 401; no token: system:anonymous; RBAC decides the rest

    # Kubernetes 1.37's API set (default "1.36"): v1beta1/v1alpha3 Workload API,
    # CompositePodGroup, DeviceTaintRule (docs/sandbox-kube-api.md)
    async with SandboxCluster(port=0, kube_version="1.37") as srv: ...

        # test hooks
        srv.compact()                    # drop event history: older versions -> 410
        f = srv.inject_fault(r"/pods/.*/binding$", method="POST", status=500, count=1)
        srv.inject_fault(r"/pods$", drop=True)          # close the connection instead
        srv.inject_fault(r"/leases/", status=0, delay=2.0, count=None)   # only slow down
        srv.inject_fault(r"/pods$", drop=True, user="watcher")  # only that user's requests
        srv.clear_faults()
        srv.request_log.entries(method="POST", path=r"/binding$")  # [LoggedRequest]
        srv.request_log.clear()
        srv.set_node_ready("kube-node-1")        # create/heartbeat a node: Ready, untainted
        srv.set_node_ready("kube-node-1", False) # heartbeats stop: Ready=Unknown and
                                                 # unreachable NoSchedule/NoExecute taints

        # writes through admission as a given user (what the HTTP handlers do)
        await srv.writes.delete(rd, "default", "web-0", {}, user=identity.node("n1"))

        # fake kubelet (off unless kubelet=True or srv.kubelet.start()); it writes as
        # system:node:<node>; the namespace controller and garbage collector always run
        # (as kube-system:namespace-controller / generic-garbage-collector)
        srv.kubelet.start(); await srv.kubelet.stop()
        srv.kubelet.stop_node("kube-node-0")     # node gone: its pods freeze
        srv.kubelet.start_node("kube-node-0")
        srv.finish_pod("default", "web-0", exit_code=0)   # Succeeded; != 0 -> Failed

        # direct object access (no HTTP), e.g. for fixtures
        srv.api.create(srv.api.resolve("", "v1", "pods"), "default", {...})
        srv.api.install_crd(crd_manifest_dict)
"""

from __future__ import annotations

from typing import Any

from sandbox.controllers.namespace_gc import GarbageCollector, NamespaceController
from sandbox.controllers.resourceclaim import ResourceClaimController
from sandbox.kubeapi.handlers import KubeletHooks
from sandbox.kubeapi.server import SandboxApiServer
from sandbox.kubeapi.store import Obj
from sandbox.kubelet import FakeKubelet

__all__ = ["SandboxCluster"]


class SandboxCluster(SandboxApiServer):
    """The API server with its controllers and the fake kubelet (see the module docstring)."""

    def __init__(
        self, *, kubelet: bool = False, resourceclaim_controller: bool = True, **server: Any
    ) -> None:
        super().__init__(**server)
        self.namespace_controller = NamespaceController(self.api, self.writes)
        self.garbage_collector = GarbageCollector(self.api, self.writes)
        self.resourceclaim_controller = ResourceClaimController(self.api, self.writes)
        self.kubelet = FakeKubelet(self.api, self.writes)
        self._kubelet_on = kubelet
        self._resourceclaim_controller_on = resourceclaim_controller

    def kubelet_hooks(self) -> KubeletHooks:
        return self.kubelet

    async def start(self) -> None:
        await super().start()
        self.namespace_controller.start()
        self.garbage_collector.start()
        if self._resourceclaim_controller_on:
            self.resourceclaim_controller.start()
        if self._kubelet_on:
            self.kubelet.start()

    async def close(self) -> None:
        await self.kubelet.stop()
        await self.namespace_controller.stop()
        await self.garbage_collector.stop()
        await self.resourceclaim_controller.stop()
        await super().close()

    def finish_pod(
        self, namespace: str, name: str, *, exit_code: int = 0, reason: str | None = None
    ) -> Obj:
        """The pod's containers exit (the kubelet's part): Succeeded, or Failed when
        ``exit_code`` is not 0."""
        return self.kubelet.finish_pod(namespace, name, exit_code=exit_code, reason=reason)
