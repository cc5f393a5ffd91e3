"""Small frozen models shared across layers.

``JobSpec`` is the contract between translation (which builds it from pods, purely) and
the Slurm codecs (which encode it for one REST API version). ``GroupId`` is the stable
identity of a workload group: the key of every queue and the back-link written into
Slurm's ``admin_comment``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

# The kind of a workload group: the name of one of bridge.workloads' kinds (checked where
# a group is read from outside: bridge.translate.identity.back_link).
GroupKind = str


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class GroupId(_Frozen):
    """Who a Slurm job is for: one workload group.

    ``name`` is the group's own name (for an LWS group, ``<lws>-<groupIndex>``; for a
    JobSet split per replicated job, ``<jobset>-<replicatedJob>``); ``uid`` the uid of the
    object the group comes from (the pod's own uid for a plain pod).
    """

    kind: GroupKind
    namespace: str
    name: str
    uid: str

    @property
    def key(self) -> str:
        """``Kind/namespace/name``: the queue key and the log value of ``group=``."""
        return f"{self.kind}/{self.namespace}/{self.name}"


class JobSpec(_Frozen):
    """A Slurm job description, independent of the REST API version.

    Placeholder jobs are ``external=True`` with no script: Slurm allocates nodes and
    runs nothing. ``script`` is only for plain batch jobs (tests, tooling).
    """

    name: str
    partition: str | None = None
    min_nodes: int = Field(ge=1)
    max_nodes: int | None = Field(default=None, ge=1)
    # Tasks: one per pod. With exclusive placement, one task (pod) per node.
    tasks: int = Field(ge=1)
    tasks_per_node: int | None = Field(default=None, ge=1)
    cpus_per_task: int = Field(default=1, ge=1)
    memory_per_node_mib: int | None = Field(default=None, ge=1)
    memory_per_cpu_mib: int | None = Field(default=None, ge=1)
    tres_per_node: str | None = None  # e.g. "gres/gpu:2"
    tres_per_task: str | None = None
    exclusive: bool = True  # shared=["none"] when True
    time_limit_minutes: int | None = Field(default=None, ge=1)
    account: str | None = None
    qos: str | None = None
    reservation: str | None = None
    licenses: str | None = None
    constraints: str | None = None
    wckey: str | None = None
    user_id: str | None = None
    group_id: str | None = None
    priority: int | None = Field(default=None, ge=0)
    mcs_label: str | None = None
    excluded_nodes: tuple[str, ...] = ()
    # network topology (docs/topology.md): topology/block segment size; topology/tree
    # leaf switch count and how long to wait for it (seconds; None: Slurm's default)
    segment_size: int | None = Field(default=None, ge=1)
    required_switches: int | None = Field(default=None, ge=1)
    wait_for_switch_seconds: int | None = Field(default=None, ge=0)
    comment: str = ""
    admin_comment: str = ""
    external: bool = True
    script: str | None = None
    environment: tuple[str, ...] = ("PATH=/usr/bin:/bin",)
    current_working_directory: str = "/tmp"
    # A heterogeneous job (docs/hetjob.md): this spec is component 0 and these are
    # components 1..n, each a whole job description of its own; Slurm starts them all
    # together. Empty: a plain job.
    het_components: tuple[JobSpec, ...] = ()

    @property
    def components(self) -> tuple[JobSpec, ...]:
        """Every component in offset order: ``(self,)`` for a plain job."""
        return (self, *self.het_components)

    @property
    def heterogeneous(self) -> bool:
        return bool(self.het_components)

    @property
    def total_tasks(self) -> int:
        """Tasks (pods) over every component."""
        return sum(c.tasks for c in self.components)
