"""A fake kubelet on every existing Node (except stopped ones): runs bound pods,
finishes them on demand, and tears pods down as kubelet 1.36 does (pod_workers.go): a pod
with a ``deletionTimestamp``, or whose API phase is terminal (Succeeded/Failed) while its
containers still run, has its containers stopped. They stop on SIGTERM at once (pause
does), unless the pod carries the sandbox-only annotation :data:`IGNORE_SIGTERM` ("true"):
then they are killed when the grace period ends (exit 137). The kubelet then writes the
terminal phase and the containers' terminated states, and, for a deleted pod, sends the
final DELETE (grace 0, uid precondition). "Node gone" = stop its kubelet.

It watches the store directly (no HTTP) and writes through the admission path
(:class:`~sandbox.kubeapi.admission_chain.Writes`) as the node's kubelet (``system:node:<node>``,
group ``system:nodes``): its ``pods/status`` UPDATEs and its final DELETE (grace 0, uid
precondition) reach the webhooks that match them. ``finish_pod`` (a test hook standing in for
a container exiting) writes the status directly, without admission.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime, timedelta
from typing import Any

from bridge.fastjson import clone
from sandbox.annotations import IGNORE_SIGTERM
from sandbox.kubeapi import identity
from sandbox.kubeapi.admission_chain import Writes
from sandbox.kubeapi.errors import ApiError
from sandbox.kubeapi.store import Obj, ns_name
from sandbox.kubeapi.verbs import NODE_KEY, POD_KEY, ObjectApi

_TERMINAL = ("Succeeded", "Failed")
DEFAULT_GRACE_SECONDS = 30
SIGKILL_EXIT = 137  # 128 + 9: killed at the end of the grace period


def containers_running(pod: Obj) -> bool:
    """Some container of ``pod`` is not terminated (running, or waiting to run)."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return any("terminated" not in (c.get("state") or {}) for c in statuses)


def tearing_down(pod: Obj) -> bool:
    """The kubelet stops this pod's containers: it is being deleted, or its API phase is
    terminal while some container still runs."""
    if pod["metadata"].get("deletionTimestamp"):
        return True
    return (pod.get("status") or {}).get("phase") in _TERMINAL and containers_running(pod)


class FakeKubelet:
    def __init__(self, api: ObjectApi, writes: Writes, *, poll_interval: float = 0.2) -> None:
        self.api = api
        self.writes = writes
        self.poll_interval = poll_interval
        self.enabled = False
        self._stopped_nodes: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        self._ip = 0
        self._wake = asyncio.Event()
        self._terminating: set[tuple[str, str]] = set()  # pods being torn down
        self._teardown_since: dict[str, datetime] = {}  # uid -> teardown began (no deletion)

    # --- control -----------------------------------------------------------------------

    def start(self) -> None:
        self.enabled = True
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())
        self._wake.set()

    async def stop(self) -> None:
        self.enabled = False
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def stop_node(self, node: str) -> None:
        """Node gone: its kubelet stops (pods there keep their last status)."""
        self._stopped_nodes.add(node)

    def start_node(self, node: str) -> None:
        self._stopped_nodes.discard(node)
        self._wake.set()

    def node_running(self, node: str) -> bool:
        return self.enabled and node not in self._stopped_nodes

    # --- actions -----------------------------------------------------------------------

    def finish_pod(
        self, namespace: str, name: str, *, exit_code: int = 0, reason: str | None = None
    ) -> Obj:
        """Terminate a pod's containers: phase Succeeded (exit 0) or Failed."""
        pod = self.api.store.get(POD_KEY, namespace, name)
        if pod is None:
            rd = self.api.resolve("", "v1", "pods")
            self.api.get(rd, namespace, name)  # raises the 404
            raise AssertionError("unreachable")
        now = self.api.now()
        phase = "Succeeded" if exit_code == 0 else "Failed"
        term_reason = reason or ("Completed" if exit_code == 0 else "Error")
        self._terminated(pod, phase, exit_code, term_reason, now)
        rd = self.api.resolve("", "v1", "pods")
        md = pod["metadata"]
        return self.api.update(rd, md["namespace"], md["name"], pod, subresource="status")

    def _terminated(self, pod: Obj, phase: str, exit_code: int, reason: str, now: str) -> None:
        """Write ``phase`` and every container terminated with ``exit_code``/``reason``
        (``startedAt`` kept from the running state) into ``pod``'s status."""
        status = pod.setdefault("status", {})
        status["phase"] = phase
        started = {
            c.get("name"): ((c.get("state") or {}).get("running") or {}).get("startedAt")
            for c in status.get("containerStatuses") or []
        }
        status["containerStatuses"] = [
            {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": "",
                "ready": False,
                "started": False,
                "restartCount": 0,
                "state": {
                    "terminated": {
                        "exitCode": exit_code,
                        "reason": reason,
                        "startedAt": started.get(c["name"]) or now,
                        "finishedAt": now,
                    }
                },
            }
            for c in pod["spec"]["containers"]
        ]
        self._set_cond(status, "Ready", "False", now, "PodCompleted")
        self._set_cond(status, "ContainersReady", "False", now, "PodCompleted")

    @staticmethod
    def _set_cond(
        status: dict[str, Any], type_: str, value: str, now: str, reason: str | None = None
    ) -> None:
        conds = [c for c in status.get("conditions") or [] if c.get("type") != type_]
        c: dict[str, Any] = {
            "type": type_,
            "status": value,
            "lastProbeTime": None,
            "lastTransitionTime": now,
        }
        if reason:
            c["reason"] = reason
        conds.append(c)
        status["conditions"] = conds

    async def _start_pod(self, pod: Obj) -> None:
        now = self.api.now()
        self._ip += 1
        ip = f"10.244.{(self._ip // 250) % 250}.{self._ip % 250 + 1}"
        status = pod.setdefault("status", {})
        status["phase"] = "Running"
        status["podIP"] = ip
        status["podIPs"] = [{"ip": ip}]
        status["hostIP"] = "192.168.0.1"
        status["startTime"] = now
        status["containerStatuses"] = [
            {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": "",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
            }
            for c in pod["spec"]["containers"]
        ]
        for t in ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready"):
            self._set_cond(status, t, "True", now)
        md = pod["metadata"]
        await self.writes.update(
            self.api.resolve("", "v1", "pods"),
            md["namespace"],
            md["name"],
            pod,
            subresource="status",
            user=identity.node(pod["spec"]["nodeName"]),
        )

    async def _remove(self, pod: Obj) -> None:
        """The kubelet's final DELETE of a terminated pod: grace 0, uid precondition."""
        md = pod["metadata"]
        await self.writes.delete(
            self.api.resolve("", "v1", "pods"),
            md["namespace"],
            md["name"],
            {"gracePeriodSeconds": 0, "preconditions": {"uid": md["uid"]}},
            user=identity.node(pod["spec"]["nodeName"]),
        )

    def _kill_due(self, pod: Obj, now: datetime) -> datetime:
        """When a container that ignores SIGTERM is killed: the end of the grace period
        (a deleted pod's ``deletionTimestamp``; else the pod's own grace from when its
        teardown began)."""
        md = pod["metadata"]
        if md.get("deletionTimestamp"):
            due = datetime.strptime(md["deletionTimestamp"], "%Y-%m-%dT%H:%M:%SZ")
            return due.replace(tzinfo=now.tzinfo)
        since = self._teardown_since.setdefault(md["uid"], now)
        grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
        return since + timedelta(seconds=DEFAULT_GRACE_SECONDS if grace is None else grace)

    async def _stop_containers(self, pod: Obj, *, killed: bool) -> Obj:
        """The containers have exited (0 on SIGTERM, 137 when killed): write the terminal
        phase (kept when the API already says one) and their terminated states."""
        status = pod.get("status") or {}
        phase = status.get("phase")
        if phase not in _TERMINAL:
            phase = "Failed" if killed else "Succeeded"
        exit_code, reason = (SIGKILL_EXIT, "Error") if killed else (0, "Completed")
        self._terminated(pod, str(phase), exit_code, reason, self.api.now())
        md = pod["metadata"]
        self._teardown_since.pop(md["uid"], None)
        return await self.writes.update(
            self.api.resolve("", "v1", "pods"),
            md["namespace"],
            md["name"],
            pod,
            subresource="status",
            user=identity.node(pod["spec"]["nodeName"]),
        )

    async def _teardown(self, pod: Obj, now: datetime) -> None:
        """Stop the containers (at once, or at the end of the grace period for a pod that
        ignores SIGTERM), then, for a deleted pod, send the final DELETE."""
        md = pod["metadata"]
        if containers_running(pod):
            stubborn = (md.get("annotations") or {}).get(IGNORE_SIGTERM) == "true"
            if stubborn and now < self._kill_due(pod, now):
                return  # the next pass looks again
            pod = await self._stop_containers(pod, killed=stubborn)
        if md.get("deletionTimestamp") and md.get("deletionGracePeriodSeconds") != 0:
            await self._remove(pod)  # a finalizer may keep it; grace 0 says "stopped"

    async def sync_once(self, keys: set[tuple[str, str]] | None = None) -> None:
        """One pass over all pods, or only over ``keys`` (namespace, name) and the pods
        being torn down (the loop's passes between events; tests may call it directly).
        Only pods it acts on are copied: a running pod costs nothing."""
        now = self.api.clock.now()
        nodes = self.api.store.names(NODE_KEY)

        def needs_kubelet(p: Obj) -> bool:
            return (p.get("spec") or {}).get("nodeName") in nodes and (
                (p.get("status") or {}).get("phase") == "Pending" or tearing_down(p)
            )

        if keys is None:
            pods = self.api.store.list(POD_KEY, where=needs_kubelet)
        else:
            stored = (self.api.store.peek(POD_KEY, *k) for k in sorted(keys | self._terminating))
            pods = [clone(p) for p in stored if p is not None and needs_kubelet(p)]
        self._terminating = {ns_name(p) for p in pods if tearing_down(p)}
        if keys is None:  # forget the teardowns of pods gone meanwhile
            uids = {p["metadata"]["uid"] for p in pods}
            self._teardown_since = {u: t for u, t in self._teardown_since.items() if u in uids}
        for pod in pods:
            node = pod["spec"]["nodeName"]
            if not self.node_running(node):
                continue
            if tearing_down(pod):
                with contextlib.suppress(ApiError):  # refused or raced: the next pass
                    await self._teardown(pod, now)
                continue
            phase = (pod.get("status") or {}).get("phase")
            if phase == "Pending":
                with contextlib.suppress(ApiError):
                    await self._start_pod(pod)

    async def _run(self) -> None:
        """A full pass when woken (a node changed) or idle for ``poll_interval``; between,
        only the pods the store's events name (a burst of bindings costs per binding,
        not per pod in the store)."""
        sub = self.api.store.subscribe(POD_KEY)
        keys: set[tuple[str, str]] | None = None  # None: a full pass
        try:
            while self.enabled:
                with contextlib.suppress(ApiError):  # a racing delete; the next pass catches up
                    await self.sync_once(keys)
                self._wake.clear()
                event = asyncio.ensure_future(sub.queue.get())
                woken = asyncio.ensure_future(self._wake.wait())
                try:
                    done, _ = await asyncio.wait(
                        (event, woken),
                        timeout=self.poll_interval,
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                finally:
                    event.cancel()
                    woken.cancel()
                keys = set()
                if event in done:
                    keys.add(ns_name(event.result().obj))
                while not sub.queue.empty():
                    keys.add(ns_name(sub.queue.get_nowait().obj))
                if not done or woken in done:
                    keys = None
        finally:
            self.api.store.unsubscribe(sub)
