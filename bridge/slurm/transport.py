"""An aiohttp connector that survives slurmrestd 26.05's doubled error responses.

slurmrestd 26.05.5 answers every error (HTTP 4xx/5xx) with ``Connection: Close``, a
``Content-Length`` JSON body, and then a SECOND response on the same connection
(``HTTP/1.1 422 ...`` + a plain-text copy of the error). curl and Go ignore the trailing
bytes; aiohttp's parser rejects them ("Data after `Connection: close`", HTTP 400) and the
real answer (status + ``errors[]``) is lost.

:class:`SlurmConnector` installs a protocol that, once a response's headers say
``Connection: close`` with a ``Content-Length``, passes exactly that response to
aiohttp and drops whatever follows it (the server closes the connection next anyway).
Keep-alive responses are counted through unchanged; a response without a length
(chunked) turns the filter off for that connection.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler

_CONTENT_LENGTH = re.compile(rb"^content-length:\s*(\d+)\s*$", re.I | re.M)
_CONN_CLOSE = re.compile(rb"^connection:\s*close\s*$", re.I | re.M)
_HEADERS_END = b"\r\n\r\n"


class _TrailingDataFilter(ResponseHandler):
    """ResponseHandler that discards bytes after a complete ``Connection: close`` response."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head = b""  # header bytes of the response being read
        self._body_left: int | None = None  # body bytes still expected (None: in headers)
        self._closing = False
        self._done = False  # a close-response is complete: drop everything after it
        self._passthrough = False

    def data_received(self, data: bytes) -> None:
        if self._passthrough or not data:
            # b"": aiohttp resuming its parser after a flow-control pause
            # (BaseProtocol.resume_reading); swallowing it left a paused streamed read
            # waiting until its timeout (seen on uvloop, whose reads are larger).
            super().data_received(data)
            return
        out = bytearray()
        while data and not self._done:
            if self._body_left is None:
                self._head += data
                end = self._head.find(_HEADERS_END)
                if end < 0:
                    out += data
                    data = b""
                    break
                head_len = end + len(_HEADERS_END)
                consumed = len(data) - (len(self._head) - head_len)
                out += data[:consumed]
                data = data[consumed:]
                head = self._head[:head_len]
                self._head = b""
                m = _CONTENT_LENGTH.search(head)
                if m is None:
                    self._passthrough = True
                    out += data
                    data = b""
                    break
                self._body_left = int(m.group(1))
                self._closing = bool(_CONN_CLOSE.search(head))
            take = min(self._body_left, len(data))
            out += data[:take]
            data = data[take:]
            self._body_left -= take
            if self._body_left == 0:
                self._body_left = None
                if self._closing:
                    self._done = True
        if out:
            super().data_received(bytes(out))


class SlurmConnector(aiohttp.TCPConnector):
    """TCPConnector whose connections use :class:`_TrailingDataFilter`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        factory: Any = functools.partial(_TrailingDataFilter, loop=self._loop)
        self._factory = factory
