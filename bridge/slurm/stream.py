"""Incremental decoding of one big JSON answer: ``{"jobs": [ {...}, {...}, ... ], ...}``.

``GET /jobs/`` returns every job Slurm remembers, finished ones included: 100+ MB of JSON on
a busy cluster, several hundred MB once decoded as a whole. :class:`ArrayStream` is fed the
body chunk by chunk and hands back the items of one top-level array as each is complete,
so the caller keeps only what it needs (the active jobs of the bridge) and memory stays
bounded by one chunk plus one item. The other top-level keys (``errors``, ``warnings``,
``last_update``: small) are collected whole.

Each value is decoded by the C scanner of :mod:`json` (``raw_decode``); a value cut by a
chunk boundary fails to decode and is tried again once the text after its start has at
least doubled, so a big item costs a few decodes, not one per chunk (the parse is linear
in the body: one 8 MiB item used to be decoded again on each of its 128 chunks, 1.2 s).
An item longer than ``max_item_chars`` is refused (the memory a stream may hold), and a
value nested deeper than the decoder goes is refused (``RecursionError``), each naming
``source``.
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

    def __init__(
        self, key: str, *, max_item_chars: int | None = None, source: str = "response"
    ) -> None:
        self._key = key
        self._max = max_item_chars
        self._source = source
        self._text = codecs.getincrementaldecoder("utf-8")()
        self._buf = ""
        self._pos = 0
        # Text arrived since the buffer was last joined; tried once it makes the text from
        # the cursor at least _need long (0: at once).
        self._pending: list[str] = []
        self._pending_len = 0
        self._need = 0
        self._state = _OPEN
        self._current_key = ""
        self.rest: dict[str, Any] = {}

    def feed(self, chunk: bytes) -> list[Any]:
        text = self._decode(chunk, final=False)
        self._pending.append(text)
        self._pending_len += len(text)
        held = len(self._buf) - self._pos + self._pending_len
        if self._max is not None and held > self._max:
            raise InvalidInput(
                self._source, f"an item of the answer is longer than {self._max} characters"
            )
        if held < self._need:
            return []
        self._join()
        return self._run(final=False)

    def close(self) -> list[Any]:
        self._pending.append(self._decode(b"", final=True))
        self._join()
        items = self._run(final=True)
        if self._state != _DONE:
            raise InvalidInput(self._source, "the JSON document ends before it is complete")
        if self._buf[self._pos :].strip():
            raise InvalidInput(self._source, "text after the end of the JSON document")
        return items

    # ------------------------------------------------------------------ internals
    def _join(self) -> None:
        self._buf = self._buf[self._pos :] + "".join(self._pending)
        self._pos = 0
        self._pending.clear()
        self._pending_len = 0
        self._need = 0

    def _decode(self, chunk: bytes, *, final: bool) -> str:
        try:
            return self._text.decode(chunk, final=final)
        except UnicodeDecodeError as e:
            raise InvalidInput(self._source, f"not UTF-8: {e.reason} in the answer") from None

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
                raise InvalidInput(self._source, f"not valid JSON: {e.msg} at {e.pos}") from None
            return self._wait()
        except RecursionError:
            raise InvalidInput(
                self._source, f"a value nested deeper than the decoder goes at {self._pos}"
            ) from None
        except ValueError as e:  # e.g. an integer of more digits than int() converts
            raise InvalidInput(self._source, f"not a usable JSON value: {e}"[:300]) from None
        # A number (or literal) at the very end of the buffer may continue in the next chunk.
        if end == len(self._buf) and not final and not isinstance(value, (dict, list, str)):
            return self._wait()
        self._pos = end
        return True, value

    def _wait(self) -> tuple[bool, Any]:
        """The value at the cursor is not complete yet: try again once the text from the
        cursor has doubled (a few decodes per item, however many chunks it spans)."""
        self._need = 2 * (len(self._buf) - self._pos)
        return False, None

    def _expect(self, chars: str) -> str:
        c = self._buf[self._pos]
        if c not in chars:
            raise InvalidInput(
                self._source, f"expected one of {chars!r} at offset {self._pos}, got {c!r}"
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
                    raise InvalidInput(self._source, f"object key is not a string: {key!r}")
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
