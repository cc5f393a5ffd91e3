"""The Slurm JWT, read from its file on every request so rotation needs no restart.

The token lives only in the headers this module builds. ``repr``/``str`` of the
provider name the file, never its content; every error names the file and the OS
reason, never the content (tests/unit/test_secrets.py proves it).
"""

from __future__ import annotations

from pathlib import Path

from bridge.errors import SlurmUnauthorized

HEADER_TOKEN = "X-SLURM-USER-TOKEN"
HEADER_USER = "X-SLURM-USER-NAME"
ENDPOINT = "auth"


class TokenProvider:
    """Builds the auth headers for one request from the JWT file's current content."""

    __slots__ = ("_path", "_user_name")

    def __init__(self, path: str | Path, user_name: str | None = None) -> None:
        self._path = Path(path)
        self._user_name = user_name or None

    @property
    def path(self) -> Path:
        return self._path

    @property
    def user_name(self) -> str | None:
        return self._user_name

    def headers(self) -> dict[str, str]:
        """Fresh headers: the file is read now (a rotated token is picked up at once)."""
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
        out = {HEADER_TOKEN: token}
        if self._user_name:
            out[HEADER_USER] = self._user_name
        return out

    def __repr__(self) -> str:
        return f"TokenProvider(path={str(self._path)!r}, user_name={self._user_name!r})"

    __str__ = __repr__
