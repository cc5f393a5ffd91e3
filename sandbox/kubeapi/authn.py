"""Authentication as kube-apiserver does it: bearer tokens, ServiceAccount tokens from the
TokenRequest API, and anonymous requests.

- ``Authorization: Bearer <token>`` with a token nobody issued, or an empty one: 401
  ``Unauthorized`` (kube's bearer-token authenticator fails, and a failed authenticator is
  never replaced by the anonymous user).
- No ``Authorization`` header, or one that is not ``Bearer`` (e.g. ``Basic``): the user
  ``system:anonymous`` in the group ``system:unauthenticated`` (``--anonymous-auth=true``);
  RBAC then grants it what the bootstrap policy gives (``system:public-info-viewer``).
  Except with ``SandboxApiServer(insecure_port=True)`` (plain HTTP only; what
  ``slurm-bridge sandbox kube-api up`` without ``--tls-cert`` serves): like kube-apiserver's
  former ``--insecure-port``, a request without credentials is the admin. Go clients
  (kubectl, helm) never send a token over plain HTTP, so this keeps them working there;
  requests with a token are still authenticated and authorized.
- Static tokens (``SandboxApiServer.add_token``, ``/sandbox/tokens``): like kube-apiserver's
  ``--token-auth-file``. The admin kubeconfig's token ``sandbox-token`` is the user
  ``sandbox`` in ``system:masters``.
- ``POST /api/v1/namespaces/<ns>/serviceaccounts/<name>/token`` (TokenRequest): a token for
  ``system:serviceaccount:<ns>:<name>`` with groups ``system:serviceaccounts``,
  ``system:serviceaccounts:<ns>`` and ``system:authenticated``, the ServiceAccount's uid,
  bound to that ServiceAccount object: it stops authenticating once the object is gone (or
  recreated with another uid) or ``spec.expirationSeconds`` (default 3600, at least 600)
  have passed. Deviation: the token is an opaque random string, not a signed JWT.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bridge.clock import Clock
from sandbox.kubeapi.errors import ApiError, invalid
from sandbox.kubeapi.identity import ADMIN, SANDBOX_TOKEN, UserInfo, service_account
from sandbox.kubeapi.store import Obj, Store

ANONYMOUS = UserInfo("system:anonymous", ("system:unauthenticated",))
SA_KEY = ("", "serviceaccounts")
DEFAULT_EXPIRATION_S = 3600
MIN_EXPIRATION_S = 600  # kube's minimum for spec.expirationSeconds


def unauthorized() -> ApiError:
    """kube's 401 body: message and reason ``Unauthorized``, no details."""
    return ApiError(401, "Unauthorized", "Unauthorized")


@dataclass(frozen=True)
class _BoundToken:
    """A TokenRequest token: valid while its ServiceAccount (same uid) exists and until
    ``expires``."""

    namespace: str
    name: str
    uid: str
    expires: datetime


def _fmt(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


class Authenticator:
    """Bearer token -> user, as kube-apiserver's authenticator chain."""

    def __init__(self, store: Store, clock: Clock, *, anonymous: UserInfo | None = None) -> None:
        self._store = store
        self._clock = clock
        self._anonymous = anonymous or ANONYMOUS
        self._static: dict[str, UserInfo] = {SANDBOX_TOKEN: ADMIN}
        self._bound: dict[str, _BoundToken] = {}

    def add(self, token: str, info: UserInfo) -> None:
        """A static token (a line of ``--token-auth-file``)."""
        self._static[token] = info

    def mint(self, info: UserInfo) -> str:
        """A new static token for ``info``."""
        token = secrets.token_urlsafe(24)
        self._static[token] = info
        return token

    def authenticate(self, authorization: str | None) -> UserInfo:
        """The user of an ``Authorization`` header value; :func:`unauthorized` when a bearer
        token is empty or unknown."""
        auth = (authorization or "").strip()
        parts = auth.split(" ", 2)
        if not auth or len(parts) < 2 or parts[0].lower() != "bearer":
            return self._anonymous
        token = parts[1]
        info = self._static.get(token) if token else None
        if info is None and token:
            info = self._service_account_user(token)
        if info is None:
            raise unauthorized()
        return info

    def _service_account_user(self, token: str) -> UserInfo | None:
        bound = self._bound.get(token)
        if bound is None:
            return None
        sa = self._store.peek(SA_KEY, bound.namespace, bound.name)
        alive = sa is not None and sa["metadata"].get("uid") == bound.uid
        if not alive or self._clock.now() >= bound.expires:
            del self._bound[token]
            return None
        base = service_account(bound.namespace, bound.name)
        return UserInfo(base.username, base.groups, bound.uid)

    def token_request(self, namespace: str, name: str, body: Any) -> Obj:
        """The TokenRequest answer for ``serviceaccounts/<name>/token`` (the caller checked
        the ServiceAccount exists and that the requester may ``create`` it)."""
        sa = self._store.peek(SA_KEY, namespace, name)
        if sa is None:  # the handler resolved it; a race with a delete
            raise ApiError(404, "NotFound", f'serviceaccounts "{name}" not found')
        spec = dict((body or {}).get("spec") or {}) if isinstance(body, dict) else {}
        seconds = spec.get("expirationSeconds", DEFAULT_EXPIRATION_S)
        if not isinstance(seconds, int) or seconds < MIN_EXPIRATION_S:
            raise invalid(
                "TokenRequest",
                name,
                "spec.expirationSeconds",
                f"may not specify a duration less than {MIN_EXPIRATION_S // 60} minutes",
                "authentication.k8s.io",
            )
        expires = self._clock.now() + timedelta(seconds=seconds)
        token = secrets.token_urlsafe(32)
        self._bound[token] = _BoundToken(namespace, name, sa["metadata"]["uid"], expires)
        spec["expirationSeconds"] = seconds
        spec.setdefault("audiences", ["https://kubernetes.default.svc.cluster.local"])
        spec.setdefault("boundObjectRef", None)
        return {
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "creationTimestamp": _fmt(self._clock.now()),
            },
            "spec": spec,
            "status": {"token": token, "expirationTimestamp": _fmt(expires)},
        }
