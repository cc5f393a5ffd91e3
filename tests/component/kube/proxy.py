"""A TCP proxy whose live connections a test can cut at any moment.

It puts real dropped connections in the middle of a watch stream (the server side keeps
running; the client sees its socket die), which no server-side fault hook can do.
"""

from __future__ import annotations

import asyncio
import contextlib


class CuttableProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self._server: asyncio.Server | None = None
        self._conns: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.cuts = 0
        self.blocked = False
        self.url = ""

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.blocked:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        self._conns.update({writer, up_writer})
        a = asyncio.ensure_future(self._pipe(reader, up_writer))
        b = asyncio.ensure_future(self._pipe(up_reader, writer))
        self._tasks.update({a, b})
        try:
            await asyncio.gather(a, b, return_exceptions=True)
        finally:
            self._conns.discard(writer)
            self._conns.discard(up_writer)
            self._tasks.difference_update({a, b})

    def cut(self) -> int:
        """Abort every live connection (both sides); returns how many were cut."""
        n = 0
        for w in list(self._conns):
            transport = w.transport
            if not transport.is_closing():
                transport.abort()
                n += 1
        self.cuts += 1
        return n

    def block(self) -> None:
        """Cut everything and refuse new connections (the client is cut off)."""
        self.blocked = True
        self.cut()

    def unblock(self) -> None:
        self.blocked = False

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        self.cut()
        for t in list(self._tasks):
            t.cancel()
        for t in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if self._server is not None:
            await self._server.wait_closed()
