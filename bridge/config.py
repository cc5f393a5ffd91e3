"""The one configuration file shared by every component.

YAML, camelCase keys. Upstream slurm-bridge's keys work unchanged (schedulerName,
slurmRestApi, managedNamespaces, managedNamespaceSelector, mcsLabel, partition); the
rest are ours. Unknown keys and bad values are rejected with a message that names the
key and the reason, every one of them at once (:func:`parse_config`). Environment
variables override the file:

* ``SLURM_BRIDGE_<KEY>`` for a top-level key, the camelCase name in UPPER_SNAKE
  (``SLURM_BRIDGE_SLURM_REST_API``, ``SLURM_BRIDGE_MANAGED_NAMESPACES=a,b``);
* ``SLURM_BRIDGE_<SECTION>__<KEY>`` inside a section (``SLURM_BRIDGE_ADMISSION__PORT``);
* ``SLURM_JWT_FILE``, upstream's name, for ``slurmTokenFile``.

Nothing here is read at import time: :func:`load_config` is called by each
component's composition root.
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import ErrorDetails

from bridge.devices.mig import NVIDIA_MIG_PROFILES
from bridge.errors import ConfigError

ENV_PREFIX = "SLURM_BRIDGE_"
# the sandbox tooling's own variables (SLURM_BRIDGE_SANDBOX_DIR ...), never config overrides
ENV_RESERVED_PREFIX = "SLURM_BRIDGE_SANDBOX_"
SUPPORTED_SLURM_API_VERSIONS = ("v0.0.43", "v0.0.44", "v0.0.45")
Problem = tuple[str, str]  # (dotted config key or variable, reason)


class _Section(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


class LabelSelectorRequirement(_Section):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: tuple[str, ...] = ()


class LabelSelector(_Section):
    """A Kubernetes LabelSelector, as in upstream's managedNamespaceSelector."""

    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if any(labels.get(k) != v for k, v in self.match_labels.items()):
            return False
        for req in self.match_expressions:
            present = req.key in labels
            if req.operator == "Exists" and not present:
                return False
            if req.operator == "DoesNotExist" and present:
                return False
            if req.operator == "In" and (not present or labels[req.key] not in req.values):
                return False
            if req.operator == "NotIn" and present and labels[req.key] in req.values:
                return False
        return True


_LIST_OF_DEFAULT = {
    "default_account": "accounts",
    "default_partition": "partitions",
    "default_qos": "qos",
    "default_reservation": "reservations",
}
# A job without a partition gets the config's `partition` (checked against the list per
# pod); one without a reservation uses none. Without an account or QOS, Slurm picks the
# user's default, outside any list.
_LISTS_NEEDING_A_DEFAULT = frozenset({"accounts", "qos"})
_WHAT = {"accounts": "account", "qos": "QOS"}


# The slurmjob.slinky.slurm.net/ keys no pod (or group object) may set unless its
# namespace's policy lists them in allowPodKeys: each can make the job hold more than, or
# other than, what its pods ask (docs/annotations.md gives the reason per key). user-id,
# group-id and priority have their own allowPod* flags; every other key is open.
PolicedPodKey = Literal["cpu-per-task", "gres", "licenses", "mem-per-node", "min-nodes"]
POLICED_POD_KEYS: tuple[str, ...] = get_args(PolicedPodKey)


class NamespacePolicy(_Section):
    """The Slurm identity and limits of the jobs of some namespaces, set by cluster admins
    (``namespacePolicies`` entries and ``defaultNamespacePolicy``; see docs/security.md).

    It lives in the config file (the chart's values) on purpose: only whoever deploys the
    bridge can change it, never a tenant who can write pods or objects in a namespace.
    """

    # Which namespaces: by name, or by namespace labels (either matches). Empty in
    # defaultNamespacePolicy, which applies where no entry matches.
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None
    # The Slurm user and group the jobs run as (name or number), so sacct shows per-tenant
    # usage. None: Slurm's default (the token's user, SlurmUser).
    user: str | None = None
    group: str | None = None
    # Allowed values (empty: any) and the value used when a pod names none. A list of
    # accounts or QOS needs its default: a job submitted without one runs under the Slurm
    # user's own default, which the list does not bound (docs/security.md).
    accounts: tuple[str, ...] = ()
    default_account: str | None = Field(default=None, validate_default=True)
    partitions: tuple[str, ...] = ()
    default_partition: str | None = Field(default=None, validate_default=True)
    qos: tuple[str, ...] = ()
    default_qos: str | None = Field(default=None, validate_default=True)
    reservations: tuple[str, ...] = ()
    default_reservation: str | None = Field(default=None, validate_default=True)
    # May pods choose these (slurmjob.slinky.slurm.net/user-id, group-id, priority)?
    allow_pod_user_id: bool = False
    allow_pod_group_id: bool = False
    allow_pod_priority: bool = False
    # The policed slurmjob keys (POLICED_POD_KEYS) pods may set here; none by default.
    allow_pod_keys: tuple[PolicedPodKey, ...] = ()

    @field_validator("user", "group")
    @classmethod
    def _identity(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$", v):
            raise ValueError("must be a Slurm user/group name or number")
        return v

    @field_validator("default_account", "default_partition", "default_qos", "default_reservation")
    @classmethod
    def _default_of_list(cls, v: str | None, info: ValidationInfo) -> str | None:
        """A default must be allowed; accounts and qos lists must have one."""
        name = info.field_name or ""
        list_name = _LIST_OF_DEFAULT[name]
        allowed: tuple[str, ...] = info.data.get(list_name, ())
        if v is not None and allowed and v not in allowed:
            raise ValueError(f"{v!r} is not among the allowed {to_camel(list_name)}")
        if v is None and allowed and list_name in _LISTS_NEEDING_A_DEFAULT:
            raise ValueError(
                f"required with {to_camel(list_name)} ({', '.join(allowed)}): a pod naming no "
                f"{_WHAT[list_name]} would run under its Slurm user's default one, which "
                "the list does not bound"
            )
        return v

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """This policy applies to ``namespace`` (a non-empty selector matching its labels)."""
        if namespace in self.namespaces:
            return True
        sel = self.namespace_selector
        return (
            sel is not None
            and bool(sel.match_labels or sel.match_expressions)
            and sel.matches(labels)
        )


MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
# Whole GPUs: always the GRES gpu, typed (gpu:a100) if gresMapping says so.
WHOLE_GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
# Extended resource -> Slurm GRES (``name`` or typed ``name:type``): whole GPUs, and each
# MIG profile as the typed GRES Slurm's AutoDetect=nvml (or gres.conf Type=) gives it.
DEFAULT_GRES_MAPPING: Mapping[str, str] = {
    "nvidia.com/gpu": "gpu",
    "amd.com/gpu": "gpu",
    **{f"{MIG_RESOURCE_PREFIX}{p}": f"gpu:{p}" for p in NVIDIA_MIG_PROFILES},
}
# A Slurm GRES as tres_per_node names it: ``gpu`` or ``gpu:1g.10gb``.
_GRES_NAME = re.compile(r"[A-Za-z0-9_.-]+(:[A-Za-z0-9_.-]+)?")


class SchedulerSettings(_Section):
    """``scheduler:`` section."""

    # One Slurm job for a batch/v1 Job with parallelism > 1 or Indexed completion
    # (upstream makes one job per pod; set false to get that behaviour back).
    gang_batch_jobs: bool = True
    # "jobset": one gang per JobSet; "replicatedJob": one gang per replicated job.
    jobset_grouping: Literal["jobset", "replicatedJob"] = "jobset"
    # A gang whose members differ in shape (a CPU driver and GPU workers): "hetjob": one
    # heterogeneous Slurm job, a component per shape, each member sized as it asks
    # (docs/hetjob.md); "largest": one plain job, every member sized like the largest.
    gang_sizing: Literal["hetjob", "largest"] = "hetjob"
    # Extended resource name -> Slurm GRES name (typed: "gpu:1g.10gb"), on top of (and
    # overriding) DEFAULT_GRES_MAPPING; nvidia.com/gpu and amd.com/gpu are always GPUs:
    # "gpu", or a typed "gpu:a100" where nodes also have MIG slices (docs/fractional-gpus.md).
    gres_mapping: dict[str, str] = Field(default_factory=dict)
    # DRA: DeviceClass name -> Slurm GRES name, for the extended-resource form
    # (deviceclass.resource.kubernetes.io/<class>), DeviceClasses with extendedResourceName,
    # and users' ResourceClaims. "dra.cpu" always means CPUs.
    device_class_gres: dict[str, str] = Field(default_factory=lambda: {"gpu.nvidia.com": "gpu"})
    # Map a pod's PriorityClass value onto the Slurm job priority.
    priority_from_priority_class: bool = False
    # Parallel workers for submit/bind; different groups proceed in parallel.
    workers: int = Field(default=16, ge=1, le=1024)
    # Backoff after Slurm rejects a job (seconds): first retry, then doubling up to max.
    reject_backoff_seconds: float = Field(default=5.0, gt=0)
    reject_backoff_max_seconds: float = Field(default=300.0, gt=0)
    # "auto": start a group's job with an immediate allocation (POST job/allocate) when
    # nothing the bridge knows says Slurm would refuse it (docs/scheduler.md), else queue
    # it (job/submit); "never": always queue (Slurm's scheduling pass starts it).
    immediate_allocation: Literal["auto", "never"] = "auto"
    # A started job whose pods cannot be bound (a binding step keeps failing: a claim write
    # refused, a pod deleted, a node gone) is given back to Slurm (cancelled, the group
    # queued again) after this many failures or seconds since the first, whichever first.
    bind_give_up_attempts: int = Field(default=5, ge=1)
    bind_give_up_seconds: float = Field(default=60.0, gt=0)
    # A waiting pod's expected start (Slurm's plan, docs/why-pending.md) is written again
    # only when the plan moved by more than this many seconds (or appeared, went away,
    # or came due).
    expected_start_step_seconds: float = Field(default=60.0, ge=0)
    # How often the plans of the pending jobs are read again (ONE streamed GET /jobs/,
    # only while jobs are pending; 0: never, the plans then come with the reads the
    # poller makes anyway).
    expected_start_refresh_seconds: float = Field(default=30.0, ge=0)
    # With each refresh, plan Slurm's queue per CPU as well (bridge.queueplan, from the same
    # read) and show that plan where Slurm's backfill, reserving whole nodes, is
    # pessimistic on shared nodes (labelled: docs/why-pending.md); false: Slurm's only.
    expected_start_bridge_plan: bool = True

    @field_validator("gres_mapping")
    @classmethod
    def _gres_names(cls, v: dict[str, str]) -> dict[str, str]:
        for resource, gres in v.items():
            if not resource or "/" not in resource:
                raise ValueError(f"{resource!r} is not an extended resource name (domain/name)")
            if not _GRES_NAME.fullmatch(gres):
                raise ValueError(
                    f"{resource}: {gres!r} is not a Slurm GRES name (name or name:type, "
                    "letters, digits, '_', '.', '-')"
                )
            if resource in WHOLE_GPU_RESOURCES and gres.partition(":")[0] != "gpu":
                raise ValueError(f"{resource}: {gres!r} is not a GPU (gpu or gpu:<type>)")
        return v

    def gres_table(self) -> dict[str, str]:
        """Every extended resource the bridge turns into a GRES: the defaults, then ours."""
        return {**DEFAULT_GRES_MAPPING, **self.gres_mapping}


JobMetricsMode = Literal["polled", "table", "off"]
# The schema (chart values) also accepts the old booleans, as the validator below does.
_JOB_METRICS_SCHEMA = WithJsonSchema(
    {"anyOf": [{"enum": list(get_args(JobMetricsMode)), "type": "string"}, {"type": "boolean"}]}
)


class ControllerSettings(_Section):
    """``controller:`` section."""

    # What happens to running pods whose Slurm job ended: "fail" marks them Failed
    # with the Slurm state and reason; "delete" deletes them (upstream's behaviour).
    job_ended_pod_policy: Literal["fail", "delete"] = "fail"
    # Kubernetes cordon -> Slurm DRAIN, and Slurm DOWN/DRAIN/FAIL -> node taint.
    sync_node_state: bool = True
    # Also cordon a Kubernetes node whose Slurm node is DOWN, DRAIN or FAIL (marked with
    # an annotation; only such cordons are undone when Slurm resumes the node).
    cordon_on_slurm_drain: bool = False
    # A pod Terminating on a node that is gone or NotReady counts as stopped this long
    # after its deletionTimestamp (no kubelet will say so): its Slurm job ends, then the
    # pod is force-cleaned (its finalizer removed after the job ended).
    stuck_terminating_grace_seconds: float = Field(default=300.0, ge=0)
    workers: int = Field(default=8, ge=1, le=1024)
    # The Slurm-side job metrics (jobs by partition and state, pending by reason, the
    # bridge's jobs by state). "polled": from what the controller reads anyway (the
    # resync's GET /jobs/state/ joined with each job's one read by id; reasons as of that
    # read). "table": one streamed GET /jobs/ per resync (fresh reasons; slurmrestd builds
    # the whole table for every such read). "off": none. true/false mean polled/off.
    slurm_job_metrics: Annotated[JobMetricsMode, _JOB_METRICS_SCHEMA] = "polled"

    @field_validator("slurm_job_metrics", mode="before")
    @classmethod
    def _job_metrics_mode(cls, v: Any) -> Any:
        # the boolean this key was first (true: the metrics, now from polled data)
        if isinstance(v, bool):
            return "polled" if v else "off"
        if isinstance(v, str) and v.strip().lower() in ("true", "false"):
            return "polled" if v.strip().lower() == "true" else "off"
        return v


class AdmissionSettings(_Section):
    """``admission:`` section."""

    port: int = Field(default=9443, ge=1, le=65535)
    bind_address: str = "0.0.0.0"
    tls_cert_file: Path = Path("/tls/tls.crt")
    tls_key_file: Path = Path("/tls/tls.key")
    max_request_bytes: int = Field(default=3 * 1024 * 1024, ge=1024)
    request_timeout_seconds: float = Field(default=10.0, gt=0)
    # A connection that has not sent a whole request head (line and headers) this many
    # seconds after it opened, or after its previous answer, is closed (slowloris; idle
    # keep-alive connections too). The body then has requestTimeoutSeconds.
    header_read_timeout_seconds: float = Field(default=10.0, gt=0)
    # How often the TLS cert/key files are checked for rotation (new handshakes use the
    # new pair; a half-written pair is ignored until it loads).
    cert_reload_interval_seconds: float = Field(default=10.0, gt=0)
    # Identities (request.userInfo.username) allowed to write the bridge's own keys
    # (job-id label, slurm-node annotation): the scheduler's and controller's accounts.
    bridge_usernames: tuple[str, ...] = (
        "system:serviceaccount:slurm-bridge:slurm-bridge-scheduler",
        "system:serviceaccount:slurm-bridge:slurm-bridge-controller",
    )
    # "Fail": an internal error (bug, timeout, namespace lookup failure) denies the
    # request; "Ignore": it is allowed unchanged. Also the webhooks' failurePolicy.
    failure_policy: Literal["Fail", "Ignore"] = "Fail"
    # How long a namespace's labels are cached (only looked up when
    # managedNamespaceSelector is set and the namespace is not listed by name).
    namespace_cache_seconds: float = Field(default=30.0, ge=0)
    # The Slurm-node guard (admission/placement.py): no pod, whatever its scheduler and
    # namespace, is created naming a Slurm node in spec.nodeName or tolerates the
    # managed-node taint unless it is the bridge's. The chart's webhook for it matches
    # pods in every namespace but the release's and these exempt ones.
    node_guard: bool = True
    # Creators (request.userInfo.username, set by the API server) whose pods pass: the
    # DaemonSet controller (docs/admission.md says why this and not ownerReferences).
    node_guard_exempt_usernames: tuple[str, ...] = (
        "system:serviceaccount:kube-system:daemon-set-controller",
    )
    # Namespaces whose pods pass (and that the guard's webhook never sees).
    node_guard_exempt_namespaces: tuple[str, ...] = ("kube-system",)
    # How long a node's kind (a Slurm node or not) is cached, per node a new pod names.
    node_cache_seconds: float = Field(default=30.0, ge=0)


TopologyKind = Literal["block", "switch"]


class NodeTopologyLabels(_Section):
    """``topology.nodeLabels:``: a node's place in Slurm's topology from its labels."""

    # The topology's name in topology.yaml (the part before ``:`` of a node's Topology=).
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    # Node labels, outermost level first. topology/block: one label (the block), so the
    # node's Topology= is ``name:<block>``; topology/tree: the switch labels from the top
    # down to the leaf, ``name:<spine>:<leaf>`` (Slurm creates missing switches).
    labels: tuple[str, ...] = Field(min_length=1)


class TopologySettings(_Section):
    """``topology:`` section (docs/topology.md)."""

    # Kueue TAS level (the node label a podset-required/preferred-topology names) ->
    # Slurm topology kind: "block" (topology/block, segment) or "switch" (topology/tree,
    # a leaf switch: required_switches=1 with a wait).
    levels: dict[str, TopologyKind] = Field(default_factory=dict)
    # A switch request that is *required*: how long Slurm may hold the job for one leaf
    # switch (Slurm caps it at SchedulerParameters=max_switch_wait, default 300 s).
    required_switch_wait_seconds: int = Field(default=86400, ge=1)
    # A *preferred* one: Slurm tries for one leaf switch this long, then starts the job
    # on whatever nodes it has.
    preferred_switch_wait_seconds: int = Field(default=60, ge=0)
    # Node topology from labels (Topograph, a cloud's block/rack labels); the node
    # annotation topology.slinky.slurm.net/spec, if set, wins.
    node_labels: NodeTopologyLabels | None = None


class BridgeConfig(_Section):
    """The whole configuration file. Field docs are the README's config reference."""

    # --- upstream keys (same names, same defaults) ---
    scheduler_name: str = "slurm-bridge-scheduler"
    slurm_rest_api: str = "http://slurm-restapi.slurm:6820"
    managed_namespaces: tuple[str, ...] = ("slurm-bridge",)
    managed_namespace_selector: LabelSelector | None = None
    mcs_label: str = "kubernetes"
    partition: str = "slurm-bridge"

    # --- Slurm REST ---
    slurm_api_version: str = "auto"
    slurm_token_file: Path = Path("/var/run/secrets/slurm/auth-token")
    # PEM file of the CA(s) that signed slurmrestd's certificate, for an https://
    # slurmRestApi (none: the system's trust store). Certificates and host names are always
    # verified: there is no "skip verify".
    slurm_ca_file: Path | None = None
    slurm_user_name: str | None = None
    slurm_request_timeout_seconds: float = Field(default=10.0, gt=0)
    # The largest slurmrestd answer read whole, and the largest item of a streamed one.
    slurm_max_response_bytes: int = Field(default=64 << 20, ge=1 << 20)
    slurm_poll_interval_seconds: float = Field(default=0.25, gt=0)
    slurm_resync_interval_seconds: float = Field(default=30.0, gt=0)

    # --- Kubernetes ---
    kubeconfig: Path | None = None
    kube_request_timeout_seconds: float = Field(default=10.0, gt=0)
    leader_election: bool = True
    leader_election_namespace: str = "slurm-bridge"
    lease_duration_seconds: float = Field(default=15.0, gt=0)
    renew_deadline_seconds: float = Field(default=10.0, gt=0)
    retry_period_seconds: float = Field(default=2.0, gt=0)

    # --- operations ---
    log_format: Literal["json", "console"] = "json"
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    metrics_port: int = Field(default=8080, ge=0, le=65535)
    health_port: int = Field(default=8081, ge=0, le=65535)
    # `slurm-bridge why`: other tenants' jobs are counted and sized only; true: named too
    # (id, name, Slurm user), for clusters whose users may see each other's jobs anyway
    why_names_other_jobs: bool = False

    # --- tenants: the Slurm identity per namespace (first matching entry wins) ---
    namespace_policies: tuple[NamespacePolicy, ...] = ()
    # Where no entry matches: today's behaviour, except that pods may not choose their
    # Slurm user, group or priority unless this allows it.
    default_namespace_policy: NamespacePolicy = Field(default_factory=NamespacePolicy)

    scheduler: SchedulerSettings = Field(default_factory=SchedulerSettings)
    controller: ControllerSettings = Field(default_factory=ControllerSettings)
    admission: AdmissionSettings = Field(default_factory=AdmissionSettings)
    topology: TopologySettings = Field(default_factory=TopologySettings)

    @field_validator("slurm_api_version")
    @classmethod
    def _known_version(cls, v: str) -> str:
        if v != "auto" and v not in SUPPORTED_SLURM_API_VERSIONS:
            raise ValueError(f"must be 'auto' or one of {', '.join(SUPPORTED_SLURM_API_VERSIONS)}")
        return v

    @field_validator("slurm_rest_api")
    @classmethod
    def _http_url(cls, v: str) -> str:
        if not re.match(r"^https?://[^/\s]+", v):
            raise ValueError("must be an http:// or https:// URL")
        return v.rstrip("/")

    @field_validator("scheduler_name", "partition")
    @classmethod
    def _not_empty(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be empty")
        return v

    @field_validator("namespace_policies")
    @classmethod
    def _policies_select(cls, v: tuple[NamespacePolicy, ...]) -> tuple[NamespacePolicy, ...]:
        for i, pol in enumerate(v):
            sel = pol.namespace_selector
            if not pol.namespaces and not (sel and (sel.match_labels or sel.match_expressions)):
                raise ValueError(f"entry {i} names no namespaces and no namespaceSelector")
        return v

    @field_validator("default_namespace_policy")
    @classmethod
    def _default_selects_nothing(cls, v: NamespacePolicy) -> NamespacePolicy:
        if v.namespaces or v.namespace_selector is not None:
            raise ValueError("applies where no namespacePolicies entry does: no namespaces")
        return v

    def namespace_policy(
        self, namespace: str, labels: Mapping[str, str]
    ) -> tuple[str, NamespacePolicy]:
        """The policy of ``namespace`` and its name in the config (for messages)."""
        for i, pol in enumerate(self.namespace_policies):
            if pol.selects(namespace, labels):
                return f"namespacePolicies[{i}]", pol
        return "defaultNamespacePolicy", self.default_namespace_policy

    @property
    def uses_namespace_labels(self) -> bool:
        """A namespace selector is configured (managedNamespaceSelector or a policy's):
        a namespace's labels may decide whether it is managed or which policy applies."""
        sels = [self.managed_namespace_selector] + [
            p.namespace_selector for p in self.namespace_policies
        ]
        return any(s is not None and bool(s.match_labels or s.match_expressions) for s in sels)

    def namespace_is_managed(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """True when a namespace is allow-listed by name or by the namespace selector."""
        if namespace in self.managed_namespaces:
            return True
        sel = self.managed_namespace_selector
        return (
            sel is not None
            and bool(sel.match_labels or sel.match_expressions)
            and (sel.matches(labels))
        )


def _env_name(path: tuple[str, ...]) -> str:
    def snake(camel: str) -> str:
        return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).upper()

    return ENV_PREFIX + "__".join(snake(p) for p in path)


def _env_overrides(env: Mapping[str, str]) -> tuple[dict[str, Any], list[Problem]]:
    """Collect ``SLURM_BRIDGE_*`` variables into a nested dict of camelCase keys, and
    a problem for each variable that is no config key or holds bad JSON."""
    out: dict[str, Any] = {}
    problems: list[Problem] = []
    if "SLURM_JWT_FILE" in env:
        out["slurmTokenFile"] = env["SLURM_JWT_FILE"]
    fields: list[tuple[tuple[str, ...], Any]] = []
    for name, info in BridgeConfig.model_fields.items():
        alias = to_camel(name)
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, _Section):
            fields += [((alias, to_camel(sub)), None) for sub in ann.model_fields]
        else:
            fields.append(((alias,), None))
    known = {_env_name(path): path for path, _ in fields}
    for var, value in env.items():
        if not var.startswith(ENV_PREFIX) or var.startswith(ENV_RESERVED_PREFIX):
            continue
        path = known.get(var)
        if path is None:
            problems.append((var, "unknown environment override (no such config key)"))
            continue
        parsed: Any = value
        stripped = value.strip()
        if stripped[:1] in "[{":
            try:
                parsed = json.loads(stripped)
            except json.JSONDecodeError as e:
                problems.append((var, f"not valid JSON: {e.msg}"))
                continue
        elif path == ("managedNamespaces",):
            parsed = [s.strip() for s in value.split(",") if s.strip()]
        target = out
        for part in path[:-1]:
            target = target.setdefault(part, {})
        target[path[-1]] = parsed
    return out, problems


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(merged.get(k), Mapping):
            merged[k] = _merge(dict(merged[k]), v)
        else:
            merged[k] = v
    return merged


def lease_timing_problems(
    lease_duration: float, renew_deadline: float, retry_period: float
) -> list[Problem]:
    """What client-go's leader election requires of the Lease timings."""
    problems: list[Problem] = []
    if not renew_deadline < lease_duration:
        problems.append(("renewDeadlineSeconds", "must be less than leaseDurationSeconds"))
    if not retry_period < renew_deadline:
        problems.append(("retryPeriodSeconds", "must be less than renewDeadlineSeconds"))
    return problems


def cross_field_problems(cfg: BridgeConfig) -> list[Problem]:
    """Errors no single key shows: each names the key to change and the one it conflicts
    with."""
    if not cfg.leader_election:
        return []
    return lease_timing_problems(
        cfg.lease_duration_seconds, cfg.renew_deadline_seconds, cfg.retry_period_seconds
    )


# the keys each cross-field check reads: skipped when one of them is itself in error
_CROSS_FIELD_KEYS = (
    "leaderElection",
    "leaseDurationSeconds",
    "renewDeadlineSeconds",
    "retryPeriodSeconds",
)


def _loc_part(part: int | str) -> str:
    # pydantic names a key by its field name (snake_case) when it validated the default
    if isinstance(part, str) and "_" in part and part.isidentifier() and part.islower():
        return to_camel(part)
    return str(part)


def _field_problem(error: ErrorDetails) -> Problem:
    key = ".".join(_loc_part(p) for p in error["loc"]) or "<root>"
    reason = "unknown key" if error["type"] == "extra_forbidden" else error["msg"]
    reason = reason.removeprefix("Value error, ")  # our validators say the reason already
    return key, reason


def _without(data: dict[str, Any], loc: tuple[int | str, ...]) -> bool:
    """Remove the innermost mapping entry on ``loc`` (a key in error goes back to its
    default); False when there is none."""
    parent: Any = None
    key: Any = None
    node: Any = data
    for part in loc:
        if not isinstance(node, dict) or part not in node:
            break
        parent, key, node = node, part, node[part]
    if parent is None:
        return False
    del parent[key]
    return True


def _validate(data: dict[str, Any]) -> tuple[BridgeConfig | None, list[Problem]]:
    """The config and every field error. Keys in error are validated again as their
    defaults, so the rest still gets checked (and cross-checked); None when that fails."""
    problems: list[Problem] = []
    rest = copy.deepcopy(data)
    while True:
        try:
            return BridgeConfig.model_validate(rest), problems
        except ValidationError as e:
            errors = e.errors()
            problems += [_field_problem(err) for err in errors]
            # (an entry can already be gone with an earlier one's container)
            removed = [_without(rest, err["loc"]) for err in errors]
            if not any(removed):
                return None, problems


def parse_config(data: Mapping[str, Any], env: Mapping[str, str] | None = None) -> BridgeConfig:
    """Validate a config mapping (plus env overrides), or raise one ConfigError listing
    every problem: each bad key (file or environment) and each cross-field conflict."""
    if not isinstance(data, Mapping):
        raise ConfigError("<root>", "the config file must be a YAML mapping")
    overrides, problems = _env_overrides(env or {})
    cfg, field_problems = _validate(_merge(dict(data), overrides))
    problems += field_problems
    if cfg is not None:
        bad = {key for key, _ in field_problems}
        if not bad.intersection(_CROSS_FIELD_KEYS):
            problems += cross_field_problems(cfg)
    if problems or cfg is None:
        raise ConfigError(*problems[0], also=problems[1:])
    return cfg


def load_config(path: str | Path | None, env: Mapping[str, str] | None = None) -> BridgeConfig:
    """Read the YAML file at ``path`` (None: defaults only) and apply ``env`` overrides.

    ``env`` defaults to ``os.environ``; tests pass their own mapping.
    """
    data: Any = {}
    if path is not None:
        try:
            text = Path(path).read_text()
        except OSError as e:
            raise ConfigError("<file>", f"cannot read {path}: {e.strerror}") from None
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as e:
            raise ConfigError("<file>", f"{path} is not valid YAML: {e}") from None
    return parse_config(data, os.environ if env is None else env)
