"""The one exception tree of slurm-bridge.

Every error the project raises on purpose derives from :class:`BridgeError`. This is the
only module that decides what kind an error is: clients classify by HTTP status and by
Slurm error numbers, never by message text.

    BridgeError
    +-- ConfigError              bad configuration: names each key at fault and the reason
    +-- InvalidInput             bad user input (annotation, quantity, field): names it
    +-- DeviceAllocationError    DRA: a node's ResourceSlices do not hold what Slurm allocated
    |    +-- DeviceMismatch       Slurm gave a slice the slices do not show, or not as asked
    +-- CelError                 a CEL expression does not compile or fails to evaluate
    +-- SlurmError               talking to slurmrestd
    |   +-- SlurmUnauthorized    401/403/511, or Slurm auth error numbers
    |   +-- SlurmNotFound        404, or "invalid job id" (2017) and friends
    |   +-- SlurmRejected        Slurm said no: carries error_number and Slurm's text
    |   |   +-- SlurmBusy        "not now" (2013 priority, 2015/2016 busy): queueing may work
    |   +-- SlurmUnavailable     connection refused, 5xx without a Slurm verdict
    |       +-- SlurmTimeout     no answer within the request timeout
    +-- KubeError                talking to the Kubernetes API
        +-- KubeConflict         409 (stale resourceVersion, AlreadyExists, already bound)
        +-- KubeNotFound         404
        +-- KubeGone             410 (watch version too old: re-list)
        +-- KubeForbidden        401/403
        +-- KubeInvalid          400/415/422: the request itself is wrong
        +-- KubeUnavailable      connection errors, 429, 5xx
            +-- KubeTimeout      no answer within the request timeout

Messages never include credentials: the JWT is held only by the token provider and
is never formatted into an exception (tests/unit/test_secrets.py proves it).
"""

from __future__ import annotations

import errno
from collections.abc import Sequence


class BridgeError(Exception):
    """Root of every error slurm-bridge raises on purpose."""


class ConfigError(BridgeError):
    """The configuration is invalid. ``key`` is the dotted config key at fault.

    ``problems`` is every ``(key, reason)`` found, in order: ``(key, reason)`` first, then
    ``also`` (a config file validated as a whole reports each of its errors at once).
    """

    def __init__(self, key: str, reason: str, *, also: Sequence[tuple[str, str]] = ()) -> None:
        self.key = key
        self.reason = reason
        self.problems: tuple[tuple[str, str], ...] = ((key, reason), *also)
        super().__init__("; ".join(f"config key {k!r}: {r}" for k, r in self.problems))


class InvalidInput(BridgeError):
    """User input that cannot be turned into a Slurm job.

    ``field`` names what is wrong the way a user would find it: an annotation key, a
    pod field path (``spec.containers[0].resources.limits.cpu``) or an object field.
    ``obj`` names the object (``Pod default/web-0``) when known.
    """

    def __init__(self, field: str, reason: str, obj: str | None = None) -> None:
        self.field = field
        self.reason = reason
        self.obj = obj
        where = f"{obj}: " if obj else ""
        super().__init__(f"{where}{field}: {reason}")


class DeviceAllocationError(BridgeError):
    """The devices Slurm allocated on a node cannot be matched to its ResourceSlices (no
    slice of the driver, too few free devices, an index no device has)."""

    def __init__(self, node: str, driver: str, reason: str) -> None:
        self.node = node
        self.driver = driver
        self.reason = reason
        super().__init__(f"node {node}, driver {driver}: {reason}")


class DeviceMismatch(DeviceAllocationError):
    """Slurm's allocation and the node's ResourceSlices disagree on a MIG slice (an index
    no device of the type has, a slice of another profile or kind than asked, one that does
    not fit its GPU's counters, no free slice of the profile): retrying cannot help, the
    job is given back."""


class CelError(BridgeError):
    """A CEL expression that does not compile (``phase="compile"``) or whose evaluation
    failed or gave a value of the wrong type (``phase="evaluate"``)."""

    def __init__(self, expression: str, reason: str, phase: str = "compile") -> None:
        self.expression = expression
        self.reason = reason
        self.phase = phase
        super().__init__(f"{phase} of CEL expression {expression!r} failed: {reason}")


class SlurmError(BridgeError):
    """Any failure talking to slurmrestd.

    ``endpoint`` is the operation (``job_submit``, ``job_get`` ...) for metrics and logs;
    ``status`` the HTTP status when there was an answer.
    """

    def __init__(self, message: str, *, endpoint: str = "", status: int | None = None) -> None:
        self.endpoint = endpoint
        self.status = status
        super().__init__(message)


class SlurmUnauthorized(SlurmError):
    """The token was refused (HTTP 401/403/511 or a Slurm authentication error)."""


class SlurmNotFound(SlurmError):
    """The job, node or partition does not exist (any more)."""


class SlurmRejected(SlurmError):
    """Slurm refused the request; ``error_number`` and ``slurm_message`` are Slurm's own."""

    def __init__(
        self,
        message: str,
        *,
        error_number: int,
        slurm_message: str,
        endpoint: str = "",
        status: int | None = None,
    ) -> None:
        self.error_number = error_number
        self.slurm_message = slurm_message
        super().__init__(message, endpoint=endpoint, status=status)


class SlurmBusy(SlurmRejected):
    """Slurm cannot start the job NOW (an immediate allocation was refused): the same
    job queued with ``job/submit`` may still run later. Numbers: :data:`SLURM_NOT_NOW`."""


class SlurmUnavailable(SlurmError):
    """slurmrestd or slurmctld cannot be reached or answered with a server error.

    Unknown is not gone: callers must never treat this as "the job does not exist".
    """


class SlurmTimeout(SlurmUnavailable):
    """No answer within the configured request timeout."""


class KubeError(BridgeError):
    """Any failure talking to the Kubernetes API server."""

    def __init__(self, message: str, *, status: int | None = None, reason: str = "") -> None:
        self.status = status
        self.reason = reason
        super().__init__(message)


class KubeConflict(KubeError):
    """409: stale resourceVersion, AlreadyExists, or a pod already bound."""


class KubeNotFound(KubeError):
    """404: the object does not exist."""


class KubeGone(KubeError):
    """410: the watch's resourceVersion is too old; re-list."""


class KubeForbidden(KubeError):
    """401/403: RBAC or authentication refused the request."""


class KubeInvalid(KubeError):
    """400/415/422: the request was malformed or invalid; retrying will not help."""


class KubeUnavailable(KubeError):
    """Connection failure, 429 or 5xx: worth retrying later."""


class KubeTimeout(KubeUnavailable):
    """No answer within the request timeout."""


# --- Slurm error classification (by HTTP status and Slurm error number only) -----------

# SLURM_PROTOCOL_AUTHENTICATION_ERROR (1007) and the ESLURM_AUTH_* block (6000-6099,
# e.g. 6010 "Rejecting authentication of user nobody").
SLURM_AUTH_ERROR_NUMBERS = frozenset({1007})
SLURM_AUTH_ERROR_RANGE = range(6000, 6100)
# ESLURM_INVALID_JOB_ID (2017) and "Invalid node name specified" (2018, seen from node
# update/delete on 26.05). ESLURM_ALREADY_DONE (2021) is
# NOT here: a finished job exists (callers decide what "already done" means).
SLURM_NOT_FOUND_ERROR_NUMBERS = frozenset({2017, 2018})
HTTP_UNAUTHORIZED = frozenset({401, 403, 511})
# "Not now" answers to an immediate allocation (POST job/allocate, immediate=true), each
# leaving a FAILED job record (measured on 26.05): ESLURM_NOT_TOP_PRIORITY (2013,
# "Immediate execution impossible, insufficient priority": a job pending in the partition
# comes first), ESLURM_REQUESTED_PART_CONFIG_UNAVAILABLE (2015, "Requested partition
# configuration not available now") and ESLURM_NODES_BUSY (2016, "Requested nodes are busy").
SLURM_NOT_NOW = frozenset({2013, 2015, 2016})
# SLURMCTLD_COMMUNICATIONS_* (1800-1899, e.g. 1800 "Unable to contact slurm controller
# (connect failure)", HTTP 502 from slurmrestd while slurmctld restarts): no verdict on the
# request, slurmctld just did not answer.
SLURM_CTLD_UNREACHABLE_RANGE = range(1800, 1900)
# SLURM_ERROR (-1, "Unspecified error"): with a 5xx it is no verdict either (seen as
# HTTP 500 from /jobs/state/ during a slurmctld restart).
SLURM_UNSPECIFIED_ERROR = -1
# Socket errnos Slurm passes through as error numbers (HTTP 500, "Unable to query jobs:
# Connection reset by peer" = 104 while slurmctld restarts): no verdict on the request.
SLURM_SOCKET_ERRNOS = frozenset(
    {
        errno.ECONNRESET,
        errno.ECONNREFUSED,
        errno.ECONNABORTED,
        errno.ETIMEDOUT,
        errno.EPIPE,
        errno.EHOSTUNREACH,
        errno.ENETUNREACH,
    }
)


def classify_slurm_error(
    *,
    endpoint: str,
    status: int | None,
    error_number: int = 0,
    slurm_message: str = "",
) -> SlurmError:
    """The one decision of what a failed slurmrestd answer means.

    ``status`` is the HTTP status (``None``: no answer at all); ``error_number`` the
    first non-zero ``errors[].error_number`` (0: none, e.g. a plain-text body);
    ``slurm_message`` Slurm's own text (never a credential: callers pass the body's
    error text only). Order: auth first (a bad token can look like anything), then
    not-found, then slurmctld unreachable, then a Slurm verdict, then "no verdict" by status.
    """
    where = f"{endpoint}: " if endpoint else ""
    http = f"HTTP {status}" if status is not None else "no answer"
    detail = f"Slurm error {error_number}: {slurm_message}" if error_number else slurm_message
    message = f"{where}{http}" + (f": {detail}" if detail else "")
    if error_number in SLURM_AUTH_ERROR_NUMBERS or error_number in SLURM_AUTH_ERROR_RANGE:
        return SlurmUnauthorized(message, endpoint=endpoint, status=status)
    if status in HTTP_UNAUTHORIZED:
        return SlurmUnauthorized(message, endpoint=endpoint, status=status)
    if error_number in SLURM_NOT_FOUND_ERROR_NUMBERS or status == 404:
        return SlurmNotFound(message, endpoint=endpoint, status=status)
    no_verdict_status = status is None or status >= 500
    if error_number in SLURM_CTLD_UNREACHABLE_RANGE or (
        no_verdict_status
        and (error_number == SLURM_UNSPECIFIED_ERROR or error_number in SLURM_SOCKET_ERRNOS)
    ):
        return SlurmUnavailable(message, endpoint=endpoint, status=status)
    if error_number in SLURM_NOT_NOW:
        return SlurmBusy(
            message,
            error_number=error_number,
            slurm_message=slurm_message,
            endpoint=endpoint,
            status=status,
        )
    if error_number:
        return SlurmRejected(
            message,
            error_number=error_number,
            slurm_message=slurm_message,
            endpoint=endpoint,
            status=status,
        )
    if status is None or status >= 500 or status in (408, 429):
        return SlurmUnavailable(message, endpoint=endpoint, status=status)
    # 4xx without a Slurm verdict (400 "Failure during parsing", 422 with no errors[]):
    # the request itself is wrong; retrying will not help.
    return SlurmRejected(
        message, error_number=0, slurm_message=slurm_message, endpoint=endpoint, status=status
    )
