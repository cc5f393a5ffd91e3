"""A loopback TLS terminator: real TLS on 127.0.0.1, plain TCP to an upstream (the real
slurmrestd of the sandbox). Bytes are relayed unchanged both ways."""

from __future__ import annotations

import asyncio
import contextlib
import ssl


class TlsProxy:
    """Accepts TLS with ``server_ctx`` and relays each connection to ``upstream`` (host,
    port). :attr:`url` is ``https://localhost:<port>`` once started."""

    def __init__(self, server_ctx: ssl.SSLContext, upstream: tuple[str, int]) -> None:
        self.server_ctx = server_ctx
        self.upstream = upstream
        self.url = ""
        self.connections = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.server_ctx)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"https://localhost:{port}"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        except (OSError, ssl.SSLError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()


async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    try:
        while data := await src.read(1 << 16):
            dst.write(data)
            await dst.drain()
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            dst.write_eof() if dst.can_write_eof() else dst.close()
