"""Server TLS from cert/key files, reloaded on rotation without a restart.

The listening socket keeps one outer SSLContext whose SNI callback (called on every
ClientHello, with or without SNI) points the new connection at the CURRENT inner context.
:meth:`CertReloader.reload_if_changed` builds a fresh inner context when the files' stat
signature (mtime, size, inode: a Secret volume swaps a symlink) changes; a pair that does
not load (half-written rotation, key not matching) is logged and skipped, and the old pair
keeps serving until the next check. Established connections keep their session.

Protocols: TLS 1.3 (its suites are all AEAD) and TLS 1.2 with :data:`TLS12_CIPHERS` only:
forward-secret ECDHE key exchange with AES-GCM or ChaCha20-Poly1305. CBC suites, static
RSA key exchange and finite-field DHE are refused at the handshake.
"""

from __future__ import annotations

import os
import ssl
from pathlib import Path
from typing import Any

from bridge.clock import Clock
from bridge.errors import ConfigError
from bridge.logging import get_logger
from bridge.loops import LoopCounter, LoopGuard

_Signature = tuple[tuple[int, int, int], tuple[int, int, int]]
# OpenSSL cipher string for TLS 1.2 (TLS 1.3 suites are configured apart and all AEAD).
TLS12_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL:!SHA1"


def server_tls_context() -> ssl.SSLContext:
    """A server context: TLS 1.2+ with :data:`TLS12_CIPHERS`, no compression or
    renegotiation; the caller loads the certificate."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(TLS12_CIPHERS)
    ctx.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_RENEGOTIATION | ssl.OP_CIPHER_SERVER_PREFERENCE
    return ctx


def _stat(path: Path) -> tuple[int, int, int]:
    st = os.stat(path)
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class CertReloader:
    def __init__(self, cert_file: Path, key_file: Path) -> None:
        self._cert = cert_file
        self._key = key_file
        self._log = get_logger("admission.tls")
        try:
            self._sig: _Signature | None = self._signature()
            self._inner = self._load()
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(
                "admission.tlsCertFile", f"cannot load {cert_file} / {key_file}: {e}"
            ) from None
        self.reloads = 0

    def _signature(self) -> _Signature:
        return (_stat(self._cert), _stat(self._key))

    def _load(self) -> ssl.SSLContext:
        ctx = server_tls_context()
        ctx.load_cert_chain(self._cert, self._key)
        return ctx

    def server_context(self) -> ssl.SSLContext:
        """The context to listen with; every new handshake picks up the current pair."""
        outer = self._load()
        outer.sni_callback = self._on_client_hello
        return outer

    def _on_client_hello(self, conn: Any, _server_name: str | None, _ctx: ssl.SSLContext) -> None:
        conn.context = self._inner

    def reload_if_changed(self) -> bool:
        """Check the files once; True when a new pair was loaded."""
        try:
            sig = self._signature()
        except OSError as e:
            self._log.warning("admission_tls_stat_failed", error=str(e))
            return False
        if sig == self._sig:
            return False
        try:
            inner = self._load()
        except (OSError, ssl.SSLError) as e:
            # keep serving the old pair; retried on the next check
            self._log.warning("admission_tls_reload_failed", error=str(e))
            return False
        self._inner, self._sig = inner, sig
        self.reloads += 1
        self._log.info("admission_tls_reloaded", cert=str(self._cert), reloads=self.reloads)
        return True

    async def run(
        self, clock: Clock, interval_seconds: float, count: LoopCounter | None = None
    ) -> None:
        """Forever: check every ``interval_seconds``; a check that raises is logged,
        counted (``count``) and backed off, and the old pair keeps serving."""
        guard = LoopGuard("admission-cert-reload", clock, count)
        while True:
            await clock.sleep(interval_seconds)
            async with guard:
                self.reload_if_changed()
