"""The sandbox Kubernetes API server: an in-memory kube-apiserver for tests and the demo.

It behaves like a real kube-apiserver (v1.36) on everything slurm-bridge uses; every
known deviation is listed in docs/sandbox-kube-api.md (identity, admission webhooks,
WatchList, the namespace controller and garbage collector) and the README.

Every write (HTTP, the namespace controller, the garbage collector, the fake kubelet)
takes one admission path (``admission_chain.Writes``): mutating and validating webhooks are called
for CREATE, UPDATE (PUT, every PATCH type), DELETE and pods/binding, by URL or Service
reference, with matchConditions (CEL), reinvocation and kube's failure wording (see
``webhook_client``). Requests carry a user (``identity``): bearer tokens map to users like a
static token file; unknown tokens are the admin ``sandbox`` (a real server answers 401).

In-process use (stable API for other components' tests)::

    from sandbox.kubeapi import SandboxApiServer

    async with SandboxApiServer(port=0, nodes=["kube-node-0"], kubelet=True) as srv:
        srv.url                          # "http://127.0.0.1:<port>"
        srv.write_kubeconfig(path)       # the admin "sandbox" (system:masters)
        srv.write_kubeconfig(path, username="system:serviceaccount:ns:sa")  # a new token
        srv.kubeconfig(username="alice", groups=["devs"])   # the same as a dict
        srv.add_token("tok", "alice", groups=("devs",), uid="u1")   # static token file
        # unknown tokens are the admin (a deviation: a real server answers 401)

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

Constructor keywords: ``host``, ``port`` (0 = pick), ``nodes`` (created Ready),
``kubelet`` (start the fake kubelet), ``bookmark_interval`` (seconds, default 5; a real
server ~60), ``watch_timeout`` (default when a watch has no timeoutSeconds),
``history_size`` (events kept; older ones are compacted), ``serviceaccount_delay``
(how long after a namespace its ``default`` ServiceAccount appears), ``tls_cert`` /
``tls_key`` (serve https), ``clock``, ``install_crds`` (PodGroup, JobSet, LWS).

The fake kubelet (one per existing Node object) moves bound pods on running nodes
Pending -> Running (podIP, containerStatuses, Ready) and tears down deleted pods (and pods
set terminal from outside) as a kubelet does: containers stopped on SIGTERM at once (or at
the end of the grace period, with ``sandbox.slurm-bridge.dev/ignore-sigterm``), terminal
status written, then the final DELETE (:mod:`sandbox.kubelet`).
``GET ...?watch=1&sendInitialEvents=true&...`` is a WatchList (initial ADDED events, one
``k8s.io/initial-events-end`` bookmark, then the watch).

Out of process: ``slurm-bridge sandbox kube-api up|down|status`` (see ``cli``) and the
same hooks over HTTP under ``/sandbox/``::

    POST   /sandbox/tokens    {"username": "...", "groups": [...]}  -> {"token": "..."}
    POST   /sandbox/compact
    POST   /sandbox/faults    {"path": re, "method": "*", "status": 500, "count": 1,
                               "drop": false, "delay": 0, "user": null}
                                                                 DELETE /sandbox/faults
    GET    /sandbox/requests?method=POST&path=re                  DELETE /sandbox/requests
    POST   /sandbox/kubelet   {"enabled": true|false}
    POST   /sandbox/kubelet/nodes/{node}/stop | /start
    POST   /sandbox/pods/{ns}/{name}/finish  {"exitCode": 0, "reason": "Completed"}
    POST   /sandbox/nodes/{name}/ready       {"ready": true}
"""

from __future__ import annotations

from sandbox.kubeapi.faults import Fault, LoggedRequest
from sandbox.kubeapi.server import SANDBOX_TOKEN, SandboxApiServer

__all__ = ["SANDBOX_TOKEN", "Fault", "LoggedRequest", "SandboxApiServer"]
