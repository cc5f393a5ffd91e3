"""TLS to slurmrestd: the verified context for an ``https://`` URL, and the warning for a
token that would travel in clear.

An ``https://`` URL is always verified (certificate and host name, against ``slurmCaFile``
or the system trust store; there is no "skip verify"). ``http://`` to a host that is not
loopback is logged as ``slurm_plaintext_url`` when the client is built from the
configuration (:meth:`bridge.slurm.api.SlurmApi.from_config`). The credentials themselves
(the JWT) come from :mod:`bridge.slurm.token`.
"""

from __future__ import annotations

import ipaddress
import ssl
from pathlib import Path
from urllib.parse import urlsplit

from bridge.errors import ConfigError
from bridge.logging import get_logger

_log = get_logger("bridge.slurm")


def client_tls_context(ca_file: str | Path | None) -> ssl.SSLContext:
    """The context to reach an ``https://`` slurmrestd: the certificate and host name are
    always verified (there is no "skip verify"), against ``ca_file`` when given, else the
    system's trust store; TLS 1.2 or newer."""
    try:
        ctx = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
    except (OSError, ssl.SSLError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise ConfigError("slurmCaFile", f"cannot load CA file {ca_file}: {reason}") from None
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


def is_loopback_url(url: str) -> bool:
    """True when ``url``'s host is ``localhost`` or a loopback address."""
    host = urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def warn_if_plaintext(url: str, ca_file: Path | None = None) -> bool:
    """Log ``slurm_plaintext_url`` (a warning) when ``url`` sends the Slurm token in clear
    over a network (``http://`` to a host that is not loopback); True when it did."""
    if url.startswith("https://"):
        return False
    if ca_file is not None:
        _log.warning("slurm_ca_file_unused", url=url, ca_file=str(ca_file), reason="not https")
    if is_loopback_url(url):
        return False
    _log.warning(
        "slurm_plaintext_url",
        url=url,
        reason="the Slurm token travels in clear: use https:// (and slurmCaFile)",
    )
    return True


__all__ = ["client_tls_context", "is_loopback_url", "warn_if_plaintext"]
