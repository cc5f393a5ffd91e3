"""List-then-watch that never loses an event.

A :class:`Watcher` delivers an ordered stream of :class:`WatchEvent` (ADDED / MODIFIED /
DELETED + the object dict as the server sent it) such that a consumer applying them to a
dict keyed by ``namespace/name`` holds exactly the server's state:

* it lists, then watches from the list's resourceVersion, and resumes each following
  watch call from the last version it delivered (events or BOOKMARKs), so nothing is
  replayed and nothing is skipped;
* a 410 (an ``ERROR`` event carrying a 410 ``Status``, or a 410 answer) means the version
  is too old: it re-lists and *synthesizes* the difference against what it delivered
  before: objects gone during the gap -> DELETED, changed -> MODIFIED, new -> ADDED
  (a name reused by a new object -> DELETED then ADDED);
* dropped connections, timeouts and 5xx/429 reconnect from the last version after a
  jittered exponential backoff (on the injected clock);
* each watch call asks ``timeoutSeconds`` of the server (it closes the stream; that is a
  normal resume point) and ``allowWatchBookmarks=true``.

kubernetes_asyncio's own ``Watch`` is not used: it retries a 410 once with the same stale
version before raising, reconnects silently without a timeout, and owns a hidden session.
Here the stream is read line by line from the adapter's transport; the Watcher owns its
own session (:meth:`KubeClient.new_session`) and closes it on :meth:`Watcher.close`.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp
import structlog

from bridge import fastjson
from bridge.clock import Clock, SystemClock, backoff_delay
from bridge.errors import KubeError, KubeGone, KubeNotFound, KubeUnavailable
from bridge.kube.api import error_for_status
from bridge.kube.client import KubeClient
from bridge.kube.resources import KubeObject, Resource, object_key, resource_version, uid
from bridge.loops import LoopGuard

log = structlog.get_logger("bridge.kube.watch")

EventType = Literal["ADDED", "MODIFIED", "DELETED"]


@dataclass(frozen=True)
class WatchEvent:
    type: EventType
    object: KubeObject
    # True when made up by a re-list diff rather than sent by the server.
    synthetic: bool = False

    @property
    def key(self) -> str:
        return object_key(self.object)


@dataclass(frozen=True)
class Backoff:
    """Jittered exponential backoff: ``min(max, base * 2**n) * uniform(0.5, 1)``."""

    base: float = 0.5
    maximum: float = 30.0

    def delay(self, failures: int, rng: random.Random) -> float:
        raw = backoff_delay(self.base, max(failures - 1, 0), self.maximum)
        return float(raw * rng.uniform(0.5, 1.0))


class Watcher:
    """Watch one resource (optionally one namespace / selectors) into an exact event stream.

    Use ``async for ev in watcher.events(): ...`` or ``await watcher.run(handler)``; stop
    with :meth:`stop` and always :meth:`close` (or ``async with``) to release the session.
    Testable pieces: :meth:`relist` and :meth:`watch_once`.
    """

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
        backoff: Backoff | None = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        keep: Callable[[KubeObject], KubeObject] | None = None,
    ) -> None:
        """``keep``: what of each object is held and delivered (a consumer that reads a
        few fields of tens of thousands of objects keeps only those; it must keep
        ``metadata`` name, namespace, uid and resourceVersion). Default: all of it. A
        DELETED event's object is delivered as it came (nothing holds it)."""
        self._session = client.new_session()
        self._keep = keep
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.timeout_seconds = timeout_seconds
        self.backoff = backoff or Backoff()
        self.clock: Clock = clock or SystemClock()
        self._rng = rng or random.Random()
        # What the consumer has been told: key -> last delivered object.
        self.known: dict[str, KubeObject] = {}
        # Where the next watch call resumes; "" = list first.
        self.resource_version = ""
        self.failures = 0
        self._stopped = False
        self._resp: aiohttp.ClientResponse | None = None
        # Counters, for metrics and tests.
        self.relists = 0
        self.reconnects = 0

    # -- lifecycle --------------------------------------------------------------------
    def stop(self) -> None:
        """Ask the stream to end; an in-flight read is interrupted."""
        self._stopped = True
        if self._resp is not None:
            self._resp.close()

    async def close(self) -> None:
        self.stop()
        await self._session.close()

    async def __aenter__(self) -> Watcher:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def stopped(self) -> bool:
        return self._stopped

    # -- pieces -----------------------------------------------------------------------
    def _record(self, ev: WatchEvent) -> WatchEvent:
        if ev.type == "DELETED":
            self.known.pop(ev.key, None)
        else:
            self.known[ev.key] = ev.object
        return ev

    async def relist(self) -> list[WatchEvent]:
        """List, and return the events that turn what was delivered into the listed state."""
        # A page at a time, each object reduced to what is kept before the next page.
        fresh: dict[str, KubeObject] = {}
        listed_rv = ""
        async for page, page_rv in self._session.pages(
            self.resource,
            self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
        ):
            if page_rv is None:  # the continue token expired: listed again from the start
                fresh.clear()
                listed_rv = ""
                continue
            listed_rv = listed_rv or page_rv
            for o in page:
                kept = self._keep(o) if self._keep is not None else o
                fresh[object_key(kept)] = kept
        self.relists += 1
        events: list[WatchEvent] = []
        for key, gone in list(self.known.items()):
            now = fresh.get(key)
            if now is None or uid(now) != uid(gone):
                events.append(WatchEvent("DELETED", gone, synthetic=True))
        for key, new in fresh.items():
            old = self.known.get(key)
            if old is None or uid(new) != uid(old):
                events.append(WatchEvent("ADDED", new, synthetic=True))
            elif resource_version(new) != resource_version(old):
                events.append(WatchEvent("MODIFIED", new, synthetic=True))
        for ev in events:
            self._record(ev)
        self.resource_version = listed_rv
        return events

    def _query(self) -> list[tuple[str, Any]]:
        query: list[tuple[str, Any]] = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", self.timeout_seconds),
        ]
        if self.resource_version:
            query.append(("resourceVersion", self.resource_version))
        if self.label_selector:
            query.append(("labelSelector", self.label_selector))
        if self.field_selector:
            query.append(("fieldSelector", self.field_selector))
        return query

    async def watch_once(self) -> AsyncGenerator[WatchEvent, None]:
        """One watch call from :attr:`resource_version` until the server closes it.

        Raises :class:`KubeGone` on a 410, :class:`KubeUnavailable` on a dropped connection
        or a read timeout; returns normally when the server ends the stream cleanly.
        """
        what = f"watch {self.resource.plural}"
        resp = await self._session.open_stream(
            self.resource.path(self.namespace),
            self._query(),
            read_timeout=self.timeout_seconds + self._session.request_timeout,
            what=what,
        )
        self._resp = resp
        try:
            while not self._stopped:
                try:
                    line = await resp.content.readline()
                except (TimeoutError, aiohttp.ClientError, OSError) as e:
                    if self._stopped:
                        return
                    raise KubeUnavailable(f"{what}: stream broken: {type(e).__name__}") from e
                if not line:
                    return
                if not line.endswith(b"\n"):
                    # A truncated last line: the connection dropped mid-event.
                    raise KubeUnavailable(f"{what}: stream ended inside an event")
                ev = self._decode(line, what)
                if ev is not None:
                    yield ev
        finally:
            self._resp = None
            resp.release()

    def _decode(self, line: bytes, what: str) -> WatchEvent | None:
        text = line.strip()
        if not text:
            return None
        try:
            data = fastjson.loads(text)
        except ValueError:
            raise KubeUnavailable(f"{what}: undecodable watch line") from None
        etype = data.get("type")
        obj = data.get("object") or {}
        if etype == "ERROR":
            code = int(obj.get("code") or 500)
            raise error_for_status(code, fastjson.dumps(obj), what)
        rv = resource_version(obj)
        if etype == "BOOKMARK":
            if rv:
                self.resource_version = rv
            return None
        if etype not in ("ADDED", "MODIFIED", "DELETED"):
            raise KubeUnavailable(f"{what}: unknown watch event type {etype!r}")
        if self._keep is not None and etype != "DELETED":
            # a deleted object leaves every cache at once: nothing to slim it for
            obj = self._keep(obj)
        ev = self._record(WatchEvent(etype, obj))
        if rv:
            self.resource_version = rv
        return ev

    # -- the loop ---------------------------------------------------------------------
    async def events(self) -> AsyncIterator[WatchEvent]:
        """The endless ordered stream, until :meth:`stop`."""
        while not self._stopped:
            try:
                if not self.resource_version:
                    for ev in await self.relist():
                        yield ev
                async with aclosing(self.watch_once()) as stream:
                    async for ev in stream:
                        self.failures = 0
                        yield ev
                if not self._stopped:
                    self.reconnects += 1
            except KubeGone:
                log.info("watch_expired", resource=self.resource.plural)
                self.resource_version = ""
            except KubeError as e:
                if self._stopped:
                    return
                self.failures += 1
                self.reconnects += 1
                delay = self.backoff.delay(self.failures, self._rng)
                log.warning(
                    "watch_error", resource=self.resource.plural, error=str(e), retry_in=delay
                )
                await self.clock.sleep(delay)
            except Exception as e:  # a bug or an unforeseen answer: list afresh, backed off
                if self._stopped:
                    return
                self.failures += 1
                self.reconnects += 1
                self.resource_version = ""
                delay = self.backoff.delay(self.failures, self._rng)
                log.error(
                    "watch_failed",
                    resource=self.resource.plural,
                    kind=type(e).__name__,
                    error=str(e)[:500],
                    retry_in=delay,
                    exc_info=e,
                )
                await self.clock.sleep(delay)

    async def run(self, handler: Callable[[WatchEvent], Awaitable[None]]) -> None:
        """Feed every event to ``handler`` in order until :meth:`stop`."""
        async for ev in self.events():
            await handler(ev)


async def served(kube: KubeClient, res: Resource) -> bool:
    """Whether to watch ``res``: discovery lists it. When discovery cannot be read, True
    (the watch's own 404 then ends it quietly: ``list_then_watch(absent_ok=True)``)."""
    try:
        return await kube.serves(res)
    except KubeError as e:
        log.warning("discovery_failed", resource=res.plural, error=str(e))
        return True


async def list_then_watch(
    watcher: Watcher,
    handler: Callable[[WatchEvent], Awaitable[None] | None],
    *,
    listed: Callable[[], None] | None = None,
    synced: asyncio.Event | None = None,
    keep_on_list_error: bool = False,
    absent_ok: bool = False,
    guard: LoopGuard | None = None,
) -> None:
    """Feed ``watcher``'s initial list, then its events, to ``handler`` in order until it
    is stopped; the watcher is closed at the end. The list-then-watch of the scheduler's
    and the controller's caches.

    With a ``guard`` (:class:`~bridge.loops.LoopGuard`), an event whose handling raises
    anything else (a bug, an input nobody foresaw) is logged, counted and skipped, and
    the watch goes on: the periodic resync heals what it missed.

    ``listed()`` is called once the initial list was delivered whole. A
    :class:`~bridge.errors.KubeError` while listing (or from ``handler`` on the initial
    list) is raised, or with ``keep_on_list_error`` logged, and the watch goes on (its
    :meth:`~Watcher.events` list again before they watch). ``synced`` is set once the
    initial list was delivered, or failed and was let go. With ``absent_ok`` a 404 on the
    initial list (a resource this cluster does not serve, e.g. DRA before Kubernetes 1.34)
    ends it quietly.
    """

    async def deliver(ev: WatchEvent, *, listing: bool = False) -> None:
        try:
            result = handler(ev)
            if result is not None:
                await result
        except Exception as e:  # not cancellation (a BaseException)
            if guard is None or (listing and isinstance(e, KubeError)):
                raise
            guard.failed(e, resource=watcher.resource.plural, key=ev.key)

    async with watcher:
        try:
            for ev in await watcher.relist():
                await deliver(ev, listing=True)
        except KubeError as e:
            if absent_ok and isinstance(e, KubeNotFound):
                log.info("resource_not_served", resource=watcher.resource.plural)
                return
            if not keep_on_list_error:
                raise
            log.warning("initial_list_failed", resource=watcher.resource.plural, error=str(e))
        else:
            if listed is not None:
                listed()
        if synced is not None:
            synced.set()
        async for ev in watcher.events():
            await deliver(ev)
