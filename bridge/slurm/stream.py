"""Incremental decoding of one big JSON answer: ``{"jobs": [ {...}, {...}, ... ], ...}``.

``GET /jobs/`` returns every job Slurm remembers, finished ones included: 100+ MB of JSON on
a busy cluster, several hundred MB once decoded as a whole. :class:`ArrayStream` is fed the
body chunk by chunk and hands back the items of one top-level array as each is complete,
so the caller keeps only what it needs (the active jobs of the bridge) and memory stays
bounded by one chunk plus one item. The other top-level keys (``errors``, ``warnings``,
``last_update``: small) are collected whole.

Each value is decoded by the C scanner of :mod:`json` (``raw_decode``); a value cut by a
chunk boundary fails to decode and is tried again once more text has arrived.
"""

from __future__ import annotations

import codecs
import json
import re
from typing import Any

from bridge.errors import InvalidInput

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()

# Parser states: where the next token is expected.
_OPEN, _KEY, _COLON, _VALUE, _AFTER_VALUE, _ITEM, _AFTER_ITEM, _DONE = range(8)


class ArrayStream:
    """Push decoder of a JSON object whose ``key`` holds a (long) array.

    ``feed(bytes)`` returns the array items completed by that chunk; ``close()`` returns
    the last ones and checks the document is complete; :attr:`rest` then holds the
    object's other keys.
    """

    def __init__(self, key: str) -> None:
        self._key = key
        self._text = codecs.getincrementaldecoder("utf-8")()
        self._buf = ""
        self._pos = 0
        self._state = _OPEN
        self._current_key = ""
        self.rest: dict[str, Any] = {}

    def feed(self, chunk: bytes) -> list[Any]:
        self._buf = self._buf[self._pos :] + self._decode(chunk, final=False)
        self._pos = 0
        return self._run(final=False)

    def close(self) -> list[Any]:
        self._buf = self._buf[self._pos :] + self._decode(b"", final=True)
        self._pos = 0
        items = self._run(final=True)
        if self._state != _DONE:
            raise InvalidInput("response", "the JSON document ends before it is complete")
        if self._buf[self._pos :].strip():
            raise InvalidInput("response", "text after the end of the JSON document")
        return items

    # ------------------------------------------------------------------ internals
    def _decode(self, chunk: bytes, *, final: bool) -> str:
        try:
            return self._text.decode(chunk, final=final)
        except UnicodeDecodeError as e:
            raise InvalidInput("response", f"not UTF-8: {e.reason} in the answer") from None

    def _skip_ws(self) -> bool:
        """Skip whitespace; True when a character follows in the buffer."""
        m = _WS.match(self._buf, self._pos)
        self._pos = m.end() if m else self._pos
        return self._pos < len(self._buf)

    def _value(self, final: bool) -> tuple[bool, Any]:
        """Decode the value at the cursor: (False, None) when more text is needed."""
        try:
            value, end = _DECODER.raw_decode(self._buf, self._pos)
        except json.JSONDecodeError as e:
            if final:
                raise InvalidInput("response", f"not valid JSON: {e.msg} at {e.pos}") from None
            return False, None
        except RecursionError:
            raise InvalidInput(
                "response", f"a value nested deeper than the decoder goes at {self._pos}"
            ) from None
        # A number (or literal) at the very end of the buffer may continue in the next chunk.
        if end == len(self._buf) and not final and not isinstance(value, (dict, list, str)):
            return False, None
        self._pos = end
        return True, value

    def _expect(self, chars: str) -> str:
        c = self._buf[self._pos]
        if c not in chars:
            raise InvalidInput(
                "response", f"expected one of {chars!r} at offset {self._pos}, got {c!r}"
            )
        self._pos += 1
        return c

    def _run(self, final: bool) -> list[Any]:
        items: list[Any] = []
        while self._state != _DONE and self._skip_ws():
            state = self._state
            if state == _OPEN:
                self._expect("{")
                self._state = _KEY
            elif state == _KEY:
                if self._buf[self._pos] == "}":
                    self._pos += 1
                    self._state = _DONE
                    continue
                ok, key = self._value(final)
                if not ok:
                    break
                if not isinstance(key, str):
                    raise InvalidInput("response", f"object key is not a string: {key!r}")
                self._current_key = key
                self._state = _COLON
            elif state == _COLON:
                self._expect(":")
                self._state = _VALUE
            elif state == _VALUE:
                if self._current_key == self._key and self._buf[self._pos] == "[":
                    self._pos += 1
                    self._state = _ITEM
                    continue
                ok, value = self._value(final)
                if not ok:
                    break
                self.rest[self._current_key] = value
                self._state = _AFTER_VALUE
            elif state == _AFTER_VALUE:
                self._state = _KEY if self._expect(",}") == "," else _DONE
            elif state == _ITEM:
                if self._buf[self._pos] == "]":
                    self._pos += 1
                    self._state = _AFTER_VALUE
                    continue
                ok, value = self._value(final)
                if not ok:
                    break
                items.append(value)
                self._state = _AFTER_ITEM
            else:  # _AFTER_ITEM
                self._state = _ITEM if self._expect(",]") == "," else _AFTER_VALUE
        return items
