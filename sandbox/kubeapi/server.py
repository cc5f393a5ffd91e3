"""``SandboxApiServer``: the sandbox Kubernetes API server as an async context manager.

The API server alone: the store, authentication, RBAC, the admission path, the HTTP
handlers and the test hooks. What runs beside it in a cluster (the namespace controller, the
garbage collector, the ResourceClaim controller, the kubelet) is wired in
:mod:`sandbox.cluster`."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from importlib import resources as importlib_resources
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import yaml
from aiohttp import web

from bridge.clock import Clock, SystemClock
from sandbox.kubeapi.admission_chain import Writes
from sandbox.kubeapi.authn import Authenticator
from sandbox.kubeapi.faults import Fault, Faults, RequestLog
from sandbox.kubeapi.handlers import Handlers, KubeletHooks, WatchSettings
from sandbox.kubeapi.identity import ADMIN, SANDBOX_TOKEN, UserInfo, user
from sandbox.kubeapi.rbac import Authorizer, bootstrap_policy
from sandbox.kubeapi.registry import DEFAULT_KUBE_VERSION, Registry
from sandbox.kubeapi.store import Obj, Store
from sandbox.kubeapi.verbs import NS_KEY, ObjectApi
from sandbox.kubeapi.webhook_client import WebhookCaller

DEFAULT_NAMESPACES = ("default", "kube-system", "slurm-bridge")
__all__ = ["SANDBOX_TOKEN", "SandboxApiServer", "bundled_crds"]


def bundled_crds() -> list[Obj]:
    """The CRDs the sandbox installs at start: PodGroup, JobSet, LeaderWorkerSet."""
    out: list[Obj] = []
    folder = importlib_resources.files("sandbox.kubeapi") / "crds"
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".yaml"):
            out.append(yaml.safe_load(entry.read_text()))
    return out


def kubeconfig_for(cluster: Obj, token: str, username: str, namespace: str = "default") -> Obj:
    """A kubeconfig with one cluster, one token user and one current context."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "sandbox", "cluster": cluster}],
        "users": [{"name": username, "user": {"token": token}}],
        "contexts": [
            {
                "name": "sandbox",
                "context": {"cluster": "sandbox", "user": username, "namespace": namespace},
            }
        ],
        "current-context": "sandbox",
    }


class SandboxApiServer:
    """See the package docstring (``sandbox.kubeapi``) for the full API; a server with its
    controllers and kubelet is a :class:`sandbox.cluster.SandboxCluster`."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        nodes: tuple[str, ...] | list[str] = (),
        bookmark_interval: float = 5.0,
        watch_timeout: float = 1800.0,
        history_size: int = 10_000,
        serviceaccount_delay: float = 0.05,
        tls_cert: str | None = None,
        tls_key: str | None = None,
        clock: Clock | None = None,
        install_crds: bool = True,
        insecure_port: bool = False,
        kube_version: str = DEFAULT_KUBE_VERSION,
    ) -> None:
        self.host = host
        self.port = port
        self.bookmark_interval = bookmark_interval
        self.watch_timeout = watch_timeout
        self.tls_cert = tls_cert
        self.tls_key = tls_key
        self.store = Store(history_size=history_size)
        self.registry = Registry(kube_version)
        clock = clock or SystemClock()
        self.api = ObjectApi(
            self.store,
            self.registry,
            clock,
            serviceaccount_delay=serviceaccount_delay,
        )
        self.faults = Faults()
        self.request_log = RequestLog()
        self.webhooks = WebhookCaller(self.store, self.registry)
        self.writes = Writes(self.api, self.webhooks)
        if insecure_port and tls_cert:
            raise ValueError("insecure_port is for plain HTTP only (no tls_cert)")
        self.tokens = Authenticator(self.store, clock, anonymous=ADMIN if insecure_port else None)
        self.authorizer = Authorizer(self.store)
        self._initial_nodes = tuple(nodes)
        self._install_crds = install_crds
        self._runner: web.AppRunner | None = None
        self.watch_tasks: set[asyncio.Task[Any]] = set()  # cancelled on close

    # --- lifecycle ---------------------------------------------------------------------

    @property
    def url(self) -> str:
        scheme = "https" if self.tls_cert else "http"
        return f"{scheme}://{self.host}:{self.port}"

    async def start(self) -> None:
        self._bootstrap()
        handlers = Handlers(
            api=self.api,
            writes=self.writes,
            tokens=self.tokens,
            authorizer=self.authorizer,
            faults=self.faults,
            request_log=self.request_log,
            watch=WatchSettings(self.watch_timeout, self.bookmark_interval),
            watch_tasks=self.watch_tasks,
            kubelet=self.kubelet_hooks(),
        )
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", handlers.dispatch)
        # handler_cancellation: a watch whose client went away ends at once
        self._runner = web.AppRunner(
            app,
            access_log=None,
            handle_signals=False,
            shutdown_timeout=0.5,
            handler_cancellation=True,
        )
        await self._runner.setup()
        ctx = None
        if self.tls_cert:
            ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ctx.load_cert_chain(self.tls_cert, self.tls_key)
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=ctx)
        await site.start()
        server = site._server
        if self.port == 0 and server is not None:
            sockets = getattr(server, "sockets", None) or []
            self.port = sockets[0].getsockname()[1]

    def kubelet_hooks(self) -> KubeletHooks | None:
        """The kubelet the ``/sandbox/kubelet`` hooks drive: none here (a
        :class:`~sandbox.cluster.SandboxCluster` has one)."""
        return None

    def _bootstrap(self) -> None:
        ns_rd = self.api.resolve("", "v1", "namespaces")
        for ns in DEFAULT_NAMESPACES:
            if self.store.get(NS_KEY, "", ns) is None:
                self.api.create(ns_rd, "", {"metadata": {"name": ns}})
            self.api.ensure_default_sa(ns)
        roles, bindings = bootstrap_policy()
        for kind, objs in (("clusterroles", roles), ("clusterrolebindings", bindings)):
            rd = self.api.resolve("rbac.authorization.k8s.io", "v1", kind)
            for obj in objs:
                if self.store.get(rd.key, "", obj["metadata"]["name"]) is None:
                    self.api.create(rd, "", obj)
        if self._install_crds:
            for crd in bundled_crds():
                self.api.install_crd(crd)
        for node in self._initial_nodes:
            self.api.set_node_ready(node)

    async def close(self) -> None:
        await self.webhooks.close()
        for t in list(self.watch_tasks):
            t.cancel()
        self.api.cancel_background()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # --- kubeconfig --------------------------------------------------------------------

    def add_token(
        self,
        token: str,
        username: str,
        groups: tuple[str, ...] | list[str] = (),
        uid: str | None = None,
    ) -> UserInfo:
        """Requests with ``Authorization: Bearer <token>`` are ``username`` (like a line of
        kube-apiserver's static token file); ServiceAccount usernames get their groups."""
        info = user(username, groups, uid or "")
        self.tokens.add(token, info)
        return info

    def mint_token(self, username: str, groups: tuple[str, ...] | list[str] = ()) -> str:
        """A new bearer token for ``username``."""
        return self.tokens.mint(user(username, groups))

    def kubeconfig(
        self,
        *,
        ca_file: str | None = None,
        namespace: str = "default",
        username: str | None = None,
        groups: tuple[str, ...] | list[str] = (),
    ) -> Obj:
        """A kubeconfig for ``username`` (a new token), or for the admin ``sandbox``."""
        cluster: Obj = {"server": self.url}
        if self.tls_cert:
            if ca_file:
                cluster["certificate-authority"] = ca_file
            else:
                cluster["insecure-skip-tls-verify"] = True
        token = self.mint_token(username, groups) if username else SANDBOX_TOKEN
        return kubeconfig_for(cluster, token, username or "sandbox", namespace)

    def write_kubeconfig(
        self,
        path: str | Path,
        *,
        ca_file: str | None = None,
        username: str | None = None,
        groups: tuple[str, ...] | list[str] = (),
    ) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        doc = self.kubeconfig(ca_file=ca_file, username=username, groups=groups)
        p.write_text(yaml.safe_dump(doc, sort_keys=False))
        return p

    # --- test hooks --------------------------------------------------------------------

    def compact(self) -> int:
        """Drop the event history: watching or continuing from an older version -> 410."""
        self.store.compact()
        return self.store.compacted

    def inject_fault(
        self,
        path: str,
        *,
        method: str = "*",
        status: int = 500,
        count: int | None = 1,
        drop: bool = False,
        delay: float = 0.0,
        user: str | None = None,
    ) -> Fault:
        return self.faults.add(
            Fault(
                path=path,
                method=method,
                status=status,
                count=count,
                drop=drop,
                delay=delay,
                user=user,
            )
        )

    def clear_faults(self) -> None:
        self.faults.clear()

    def set_node_ready(self, name: str, ready: bool = True) -> Obj:
        return self.api.set_node_ready(name, ready)

    async def serve_forever(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()
