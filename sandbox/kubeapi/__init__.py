"""The sandbox Kubernetes API server: an in-memory kube-apiserver for tests and the demo.

It behaves like a real kube-apiserver (v1.36, or v1.37 with ``kube_version="1.37"``) on
everything slurm-bridge uses; every known deviation is listed in docs/sandbox-kube-api.md
(identity, admission webhooks, WatchList, the namespace controller and garbage collector)
and the README.

Every write (HTTP, the namespace controller, the garbage collector, the fake kubelet)
takes one admission path (``admission_chain.Writes``): mutating and validating webhooks are called
for CREATE, UPDATE (PUT, every PATCH type), DELETE and pods/binding, by URL or Service
reference, with matchConditions (CEL), reinvocation and kube's failure wording (see
``webhook_client``). Requests are authenticated (``authn``: static and TokenRequest tokens, 401
on an unknown one, ``system:anonymous`` without one) and authorized by RBAC (``rbac``).

In process: :class:`SandboxApiServer` is the API server alone; with the namespace
controller, the garbage collector, the ResourceClaim controller and the fake kubelet beside
it, it is a :class:`sandbox.cluster.SandboxCluster` (whose docstring shows the in-process
API the tests use).

Constructor keywords: ``host``, ``port`` (0 = pick), ``nodes`` (created Ready),
``bookmark_interval`` (seconds, default 5; a real
server ~60), ``watch_timeout`` (default when a watch has no timeoutSeconds),
``history_size`` (events kept; older ones are compacted), ``serviceaccount_delay``
(how long after a namespace its ``default`` ServiceAccount appears), ``tls_cert`` /
``tls_key`` (serve https), ``clock``, ``install_crds`` (PodGroup, JobSet, LWS),
``insecure_port`` (plain HTTP: no credentials is the admin, like kube-apiserver's former
insecure port; kubectl sends no token over HTTP).

The fake kubelet (one per existing Node object) moves bound pods on running nodes
Pending -> Running (podIP, containerStatuses, Ready) and tears down deleted pods (and pods
set terminal from outside) as a kubelet does: containers stopped on SIGTERM at once (or at
the end of the grace period, with ``sandbox.slurm-bridge.dev/ignore-sigterm``), terminal
status written, then the final DELETE (:mod:`sandbox.kubelet`).
``GET ...?watch=1&sendInitialEvents=true&...`` is a WatchList (initial ADDED events, one
``k8s.io/initial-events-end`` bookmark, then the watch).

Out of process: ``slurm-bridge sandbox kube-api up|down|status`` (a cluster,
:mod:`sandbox.cluster_cli`) and the
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
