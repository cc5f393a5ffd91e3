"""Who is calling: bearer tokens mapped to users, like kube-apiserver's static token file.

Every authenticated user also gets the group ``system:authenticated`` (kube-apiserver adds
it). ServiceAccount usernames ``system:serviceaccount:<ns>:<name>`` get the groups
``system:serviceaccounts`` and ``system:serviceaccounts:<ns>``, as the ServiceAccount token
authenticator gives them. Deviation: an unknown (or missing) token is the admin user
``sandbox`` (groups ``system:masters``, ``system:authenticated``); a real server answers 401.
There is no authorization: every user may do everything.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

AUTHENTICATED = "system:authenticated"
SA_PREFIX = "system:serviceaccount:"
SANDBOX_TOKEN = "sandbox-token"  # the admin's token; unknown tokens are the admin too


@dataclass(frozen=True)
class UserInfo:
    """An authenticated user (``authentication.k8s.io/v1`` UserInfo)."""

    username: str
    groups: tuple[str, ...] = ()
    uid: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The ``userInfo`` of an AdmissionReview (uid omitted when empty, like kube)."""
        out: dict[str, Any] = {"username": self.username}
        if self.uid:
            out["uid"] = self.uid
        out["groups"] = list(self.groups)
        return out


def user(username: str, groups: tuple[str, ...] | list[str] = (), uid: str = "") -> UserInfo:
    """A user as the authenticators build it: ServiceAccount groups and
    ``system:authenticated`` added, order kept, no duplicates."""
    out = list(groups)
    if username.startswith(SA_PREFIX):
        ns = username[len(SA_PREFIX) :].split(":", 1)[0]
        out += ["system:serviceaccounts", f"system:serviceaccounts:{ns}"]
    out.append(AUTHENTICATED)
    return UserInfo(username, tuple(dict.fromkeys(out)), uid)


def service_account(namespace: str, name: str) -> UserInfo:
    return user(f"{SA_PREFIX}{namespace}:{name}")


def node(name: str) -> UserInfo:
    """The kubelet of ``name``."""
    return user(f"system:node:{name}", ("system:nodes",))


ADMIN = user("sandbox", ("system:masters",))
# the identities of kube-controller-manager's controllers the sandbox stands in for
NAMESPACE_CONTROLLER = service_account("kube-system", "namespace-controller")
GARBAGE_COLLECTOR = service_account("kube-system", "generic-garbage-collector")
JOB_CONTROLLER = service_account("kube-system", "job-controller")


class Tokens:
    """Bearer token -> user. Unknown tokens (and none) are :data:`ADMIN` (a deviation)."""

    def __init__(self) -> None:
        self._users: dict[str, UserInfo] = {SANDBOX_TOKEN: ADMIN}

    def add(self, token: str, info: UserInfo) -> None:
        self._users[token] = info

    def mint(self, info: UserInfo) -> str:
        """A new token for ``info``."""
        token = secrets.token_urlsafe(24)
        self._users[token] = info
        return token

    def authenticate(self, authorization: str | None) -> UserInfo:
        """The user of an ``Authorization`` header value."""
        if authorization and authorization.lower().startswith("bearer "):
            return self._users.get(authorization[7:].strip(), ADMIN)
        return ADMIN
