"""The Slurm JWT, read from its file whenever the file changed, so rotation needs no
restart: each request stats the file (inode, size, mtime, ctime) and reads it again when
that changed or the last read is :data:`MAX_AGE_SECONDS` old (file times are coarse: a
same-size rewrite within one tick keeps its stamp). A stat is far cheaper than an
open + read at hundreds of requests/s.

The token lives only in the headers this module builds. ``repr``/``str`` of the
provider name the file, never its content; every error names the file and the OS
reason, never the content (tests/unit/test_secrets.py proves it).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from bridge.clock import Clock, SystemClock
from bridge.errors import ConfigError, SlurmUnauthorized

HEADER_TOKEN = "X-SLURM-USER-TOKEN"
HEADER_USER = "X-SLURM-USER-NAME"
ENDPOINT = "auth"
MAX_AGE_SECONDS = 1.0
# What a token may hold: printable ASCII, no space (a JWT is base64url and dots).
_HEADER_SAFE = re.compile(r"[\x21-\x7e]+")


class TokenProvider:
    """Builds the auth headers for one request from the JWT file's current content."""

    __slots__ = ("_cached", "_clock", "_path", "_read_at", "_stamp", "_user_name")

    def __init__(
        self, path: str | Path, user_name: str | None = None, *, clock: Clock | None = None
    ) -> None:
        if user_name and not _HEADER_SAFE.fullmatch(user_name):
            raise ConfigError("slurmUserName", "must be printable ASCII without spaces")
        self._path = Path(path)
        self._user_name = user_name or None
        self._clock = clock or SystemClock()
        self._stamp: tuple[int, int, int, int] | None = None
        self._cached: dict[str, str] | None = None
        self._read_at = 0.0

    def headers(self) -> dict[str, str]:
        """Fresh headers: a rotated (rewritten or replaced) token is picked up at once."""
        try:
            st = os.stat(self._path)
        except OSError:
            st = None
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns) if st else None
        now = self._clock.monotonic()
        if (
            stamp is not None
            and stamp == self._stamp
            and self._cached is not None
            and now - self._read_at < MAX_AGE_SECONDS
        ):
            return dict(self._cached)
        out = self._read()
        self._stamp, self._cached, self._read_at = stamp, dict(out), now
        return out

    def _read(self) -> dict[str, str]:
        try:
            raw = self._path.read_text(encoding="utf-8")
        except OSError as e:
            raise SlurmUnauthorized(
                f"cannot read the Slurm token file {self._path}: {e.strerror or type(e).__name__}",
                endpoint=ENDPOINT,
            ) from None
        except UnicodeDecodeError:
            raise SlurmUnauthorized(
                f"the Slurm token file {self._path} is not UTF-8 text", endpoint=ENDPOINT
            ) from None
        token = raw.strip()
        if token.startswith("SLURM_JWT="):  # `scontrol token` output written as-is
            token = token.removeprefix("SLURM_JWT=").strip()
        if not token or any(c.isspace() for c in token):
            raise SlurmUnauthorized(
                f"the Slurm token file {self._path} does not hold one token", endpoint=ENDPOINT
            )
        if not _HEADER_SAFE.fullmatch(token):
            # A control or non-ASCII character would make the HTTP library raise a plain
            # ValueError on every request, which no loop expected (issue #30, finding 12).
            raise SlurmUnauthorized(
                f"the Slurm token file {self._path} holds characters a token cannot have "
                "(control or non-ASCII characters)",
                endpoint=ENDPOINT,
            )
        out = {HEADER_TOKEN: token}
        if self._user_name:
            out[HEADER_USER] = self._user_name
        return out

    def __repr__(self) -> str:
        return f"TokenProvider(path={str(self._path)!r}, user_name={self._user_name!r})"

    __str__ = __repr__
