"""Leader election on a coordination.k8s.io/v1 Lease.

Safety comes from the API server's optimistic concurrency: every acquire or renew is a PUT
carrying the resourceVersion that was read, so of two candidates racing for the same Lease
exactly one wins (the other gets 409 and stays a follower).

Expiry is judged the way client-go does, on the *observer's* clock: a candidate records
when it last saw the Lease record change and takes over only when it has seen no change for
``leaseDurationSeconds``; clocks of different machines are never compared. A leader that
cannot renew for ``renewDeadlineSeconds`` (< the lease duration) stops its work before any
other candidate can take over, so there are never two leaders at once.

kubernetes_asyncio's ``leaderelection`` helper is not used: it writes naive local times
(MicroTime must be ``%Y-%m-%dT%H:%M:%S.%fZ``; ``+00:00`` is a 400), never increments
``leaseTransitions`` and returns from ``run()`` when leadership is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from bridge.clock import Clock, SystemClock
from bridge.config import BridgeConfig, lease_timing_problems
from bridge.errors import ConfigError, KubeConflict, KubeError, KubeNotFound
from bridge.kube.client import KubeClient
from bridge.kube.resources import LEASES, KubeObject, format_micro_time
from bridge.loops import LoopGuard

log = structlog.get_logger("bridge.kube.leader")


class LeaderElector:
    """Acquire/renew one Lease as ``identity``; :meth:`run` work only while leading."""

    def __init__(
        self,
        client: KubeClient,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Clock | None = None,
    ) -> None:
        if not identity:
            raise ConfigError("leaderElection", "identity must not be empty")
        if problems := lease_timing_problems(lease_duration, renew_deadline, retry_period):
            raise ConfigError(*problems[0], also=problems[1:])
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.clock: Clock = clock or SystemClock()
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._last_renew: float | None = None
        self._other_holder = False
        # Counters, for metrics and tests.
        self.transitions_seen = 0

    @classmethod
    def from_config(
        cls,
        client: KubeClient,
        cfg: BridgeConfig,
        *,
        name: str,
        identity: str,
        clock: Clock | None = None,
    ) -> LeaderElector:
        return cls(
            client,
            namespace=cfg.leader_election_namespace,
            name=name,
            identity=identity,
            lease_duration=cfg.lease_duration_seconds,
            renew_deadline=cfg.renew_deadline_seconds,
            retry_period=cfg.retry_period_seconds,
            clock=clock,
        )

    @property
    def is_leader(self) -> bool:
        """Leading, and the last successful renew is younger than the renew deadline."""
        return (
            self._last_renew is not None
            and self.clock.monotonic() - self._last_renew < self.renew_deadline
        )

    # -- one attempt ------------------------------------------------------------------
    def _spec(self, old: dict[str, Any]) -> dict[str, Any]:
        now = format_micro_time(self.clock.now())
        mine = old.get("holderIdentity") == self.identity
        return {
            **old,
            "holderIdentity": self.identity,
            "leaseDurationSeconds": math.ceil(self.lease_duration),
            "acquireTime": old.get("acquireTime") if mine and old.get("acquireTime") else now,
            "renewTime": now,
            "leaseTransitions": int(old.get("leaseTransitions") or 0) + (0 if mine else 1),
        }

    def _observe(self, spec: dict[str, Any], rv: str) -> None:
        record = (spec.get("holderIdentity"), spec.get("renewTime"), rv)
        if record != self._observed:
            self._observed = record
            self._observed_at = self.clock.monotonic()

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this candidate holds the Lease afterwards."""
        self._other_holder = False
        started = self.clock.monotonic()
        try:
            try:
                lease = await self.client.get(LEASES, self.name, self.namespace)
            except KubeNotFound:
                body: KubeObject = {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": {**self._spec({}), "leaseTransitions": 0},
                }
                created = await self.client.create(LEASES, body, self.namespace)
                self._renewed(created, started)
                return True
            spec = dict(lease.get("spec") or {})
            meta = lease.get("metadata") or {}
            self._observe(spec, str(meta.get("resourceVersion") or ""))
            holder = spec.get("holderIdentity") or ""
            if holder and holder != self.identity:
                duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
                if self.clock.monotonic() < self._observed_at + duration:
                    self._other_holder = True
                    return False
            new = {**lease, "spec": self._spec(spec)}
            updated = await self.client.replace(LEASES, self.name, new, self.namespace)
            if holder != self.identity:
                self.transitions_seen += 1
                log.info(
                    "leader_acquired", lease=self.name, identity=self.identity, previous=holder
                )
            self._renewed(updated, started)
            return True
        except KubeConflict:
            return False  # lost a race: someone else wrote first
        except KubeError as e:
            log.warning("leader_attempt_failed", lease=self.name, error=str(e))
            return False

    def _renewed(self, lease: KubeObject, started: float) -> None:
        spec = lease.get("spec") or {}
        self._observe(spec, str((lease.get("metadata") or {}).get("resourceVersion") or ""))
        # Count from when the attempt started: the server may have taken a while.
        self._last_renew = started

    async def release(self) -> bool:
        """Give the Lease up (clean shutdown), so a follower takes over at once."""
        was = self._last_renew is not None
        self._last_renew = None
        if not was:
            return False
        try:
            lease = await self.client.get(LEASES, self.name, self.namespace)
            spec = dict(lease.get("spec") or {})
            if spec.get("holderIdentity") != self.identity:
                return False
            spec.pop("holderIdentity", None)
            spec["leaseDurationSeconds"] = 1
            spec["renewTime"] = format_micro_time(self.clock.now())
            await self.client.replace(LEASES, self.name, {**lease, "spec": spec}, self.namespace)
        except KubeError as e:
            log.warning("leader_release_failed", lease=self.name, error=str(e))
            return False
        log.info("leader_released", lease=self.name, identity=self.identity)
        return True

    # -- the loop ---------------------------------------------------------------------
    async def _acquire(self) -> None:
        guard = LoopGuard("leader-acquire", self.clock)
        while True:
            async with guard:  # anything but a KubeError: logged, backed off
                if await self.try_acquire_or_renew():
                    return
            await self.clock.sleep(self.retry_period)

    async def _hold(self, task: asyncio.Task[None]) -> bool:
        """Renew until ``task`` ends (False) or leadership is lost (True)."""
        renew = LoopGuard("leader-renew", self.clock)
        while True:
            assert self._last_renew is not None
            left = self._last_renew + self.renew_deadline - self.clock.monotonic()
            sleeper = asyncio.ensure_future(
                self.clock.sleep(max(0.0, min(self.retry_period, left)))
            )
            done, _ = await asyncio.wait({task, sleeper}, return_when=asyncio.FIRST_COMPLETED)
            if task in done:
                sleeper.cancel()
                return False
            ok = False
            left = self._last_renew + self.renew_deadline - self.clock.monotonic()
            if left > 0:
                try:
                    ok = await asyncio.wait_for(self.try_acquire_or_renew(), timeout=left)
                except TimeoutError:
                    ok = False
                except Exception as e:  # unforeseen: this renewal failed, the next may not
                    renew.failed(e)
                    ok = False
            if ok:
                continue
            if self._other_holder or not self.is_leader:
                log.warning("leader_lost", lease=self.name, identity=self.identity)
                self._last_renew = None
                return True

    async def run(self, work: Callable[[], Awaitable[None]]) -> None:
        """Run ``work()`` while leading; cancel it when leadership is lost, then stand by
        and start it afresh on re-election. Returns when ``work`` returns (the Lease is
        released); cancelling ``run`` cancels ``work`` and releases the Lease.
        """
        task: asyncio.Task[None] | None = None
        try:
            while True:
                await self._acquire()

                async def wrapped() -> None:
                    await work()

                task = asyncio.create_task(wrapped())
                lost = await self._hold(task)
                if not lost:
                    task.result()  # re-raise what work raised
                    return
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                task = None
        finally:
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await asyncio.shield(self.release())
