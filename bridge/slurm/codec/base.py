"""What the REST versions v0.0.43-v0.0.45 (Slurm 26.05) have in common.

A codec is pure: it turns a :class:`bridge.models.JobSpec` into a request body and a
response body into :mod:`bridge.slurm.models` objects. No I/O, no clock. Each version
module subclasses :class:`Codec` and overrides only what differs (checked against each
version's schema in ``openapi-v3-sid-26.05.json``):

* the job description (``job_desc_msg``) is the same in all three for every field we send;
* ``job_resources.nodes`` is an object ``{count, list, allocation[...]}`` in all three on
  26.05 (Slurm 24.11's v0.0.42 still had a plain hostlist string); we read both and use the
  top-level ``nodes`` hostlist for the node list, which every version carries;
* a GET shows ``shared: []`` on 26.05 even for an exclusive job (v0.0.45 marks the field
  deprecated); exclusivity is read back from the allocation, not from ``shared``;
* v0.0.43 has no ``/new/node/`` and its node-state enum has no ``EXTERNAL`` (the server
  still sends the string, so decoding is the same);
* v0.0.45 ``job_resources.select_type`` uses ``CR_*`` names (we do not decode it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

from bridge.errors import InvalidInput
from bridge.models import JobSpec
from bridge.slurm import hostlist
from bridge.slurm.models import (
    AllocatedNode,
    CancelStatus,
    ExitCode,
    GresAllocation,
    JobList,
    JobState,
    JobStateItem,
    NodeResources,
    PingResult,
    SlurmAssociation,
    SlurmJob,
    SlurmLimits,
    SlurmMessage,
    SlurmNode,
    SlurmPartition,
    SlurmQos,
    SlurmReservation,
    SlurmWarning,
    SubmitResult,
)
from bridge.text import gres_problem

Json = dict[str, Any]
# Where slurmdbd's QOS and association records (v0.0.43-v0.0.45: the same shapes) keep
# each limit, by sacctmgr's name (measured on 26.05: each set with sacctmgr, read back).
# Under a QOS's ``limits``:
QOS_TRES_LIMITS = {
    "GrpTRES": ("max", "tres", "total"),
    "GrpTRESMins": ("max", "tres", "minutes", "total"),
    "GrpTRESRunMins": ("max", "tres", "minutes", "per", "qos"),
    "MaxTRESMinsPerJob": ("max", "tres", "minutes", "per", "job"),
    "MaxTRESRunMinsPerAccount": ("max", "tres", "minutes", "per", "account"),
    "MaxTRESRunMinsPerUser": ("max", "tres", "minutes", "per", "user"),
    "MaxTRESPerAccount": ("max", "tres", "per", "account"),
    "MaxTRESPerJob": ("max", "tres", "per", "job"),
    "MaxTRESPerNode": ("max", "tres", "per", "node"),
    "MaxTRESPerUser": ("max", "tres", "per", "user"),
    "MinTRESPerJob": ("min", "tres", "per", "job"),
}
QOS_COUNT_LIMITS = {
    "GrpJobs": ("max", "active_jobs", "count"),
    "GrpJobsAccrue": ("max", "active_jobs", "accruing"),
    "GrpSubmitJobs": ("max", "jobs", "count"),
    "MaxJobsPerAccount": ("max", "jobs", "active_jobs", "per", "account"),
    "MaxJobsPerUser": ("max", "jobs", "active_jobs", "per", "user"),
    "MaxSubmitJobsPerAccount": ("max", "jobs", "per", "account"),
    "MaxSubmitJobsPerUser": ("max", "jobs", "per", "user"),
    "MaxJobsAccruePerAccount": ("max", "accruing", "per", "account"),
    "MaxJobsAccruePerUser": ("max", "accruing", "per", "user"),
    "GrpWall": ("max", "wall_clock", "per", "qos"),
    "MaxWall": ("max", "wall_clock", "per", "job"),
}
# Under an association's ``max``:
ASSOC_TRES_LIMITS = {
    "GrpTRES": ("tres", "total"),
    "GrpTRESMins": ("tres", "group", "minutes"),
    "GrpTRESRunMins": ("tres", "group", "active"),
    "MaxTRESMinsPerJob": ("tres", "minutes", "per", "job"),
    "MaxTRESPerJob": ("tres", "per", "job"),
    "MaxTRESPerNode": ("tres", "per", "node"),
}
ASSOC_COUNT_LIMITS = {
    "GrpJobs": ("jobs", "per", "count"),
    "GrpJobsAccrue": ("jobs", "per", "accruing"),
    "GrpSubmitJobs": ("jobs", "per", "submitted"),
    "GrpWall": ("per", "account", "wall_clock"),
    "MaxJobs": ("jobs", "active"),
    "MaxJobsAccrue": ("jobs", "accruing"),
    "MaxSubmitJobs": ("jobs", "total"),
    "MaxWall": ("jobs", "per", "wall_clock"),
}
NODE_UPDATE_STATES = ("DRAIN", "RESUME", "DOWN", "UNDRAIN", "IDLE", "FAIL")


def no_val(number: int | None) -> Json:
    """Slurm's ``*_no_val_struct``: ``{"set": true, "number": n}``."""
    return {"set": True, "number": number} if number is not None else {"set": False}


def num(value: Any) -> int | None:
    """Read a plain int or a ``*_no_val_struct`` (None when unset or infinite)."""
    if type(value) is dict:  # the usual shape, tested first (an ABC check costs ~10x)
        if not value.get("set", False) or value.get("infinite", False):
            return None
        n = value.get("number")
        return int(n) if isinstance(n, int | float) else None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    if isinstance(value, Mapping):
        if not value.get("set", False) or value.get("infinite", False):
            return None
        n = value.get("number")
        return int(n) if isinstance(n, int | float) else None
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def timestamp(value: Any) -> datetime | None:
    n = num(value)
    return datetime.fromtimestamp(n, tz=UTC) if n else None


def index_list(raw: str) -> tuple[int, ...]:
    """Slurm's index lists: ``0``, ``0-2``, ``0,2-3`` -> sorted indices."""
    out: set[int] = set()
    for part in raw.replace(" ", "").split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise InvalidInput("index", f"not a Slurm index list: {raw!r}", "GRES allocation")
        out.update(range(int(lo), int(hi or lo) + 1))
    return tuple(sorted(out))


def bitmap_bits(raw: str) -> tuple[int, ...]:
    """A Slurm bitmap as set bit positions: hex (``0xC0`` -> 6, 7) or an index list."""
    raw = raw.strip()
    if not raw:
        return ()
    if raw.lower().startswith("0x"):
        value = int(raw, 16)
        return tuple(i for i in range(value.bit_length()) if value >> i & 1)
    return index_list(raw)


def _s(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _strs(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(v for v in value.split(",") if v)
    if isinstance(value, Sequence):
        return tuple(str(v) for v in value)
    return ()


def _state_row_id(value: Any) -> tuple[int | None, int | None]:
    """A ``jobs/state`` row's (job id, hetjob offset): ``"123"``; ``"124+1"`` for a hetjob
    component (its own id, then its offset; measured on 26.05); ``"123_4"`` for an array
    task (the array's id: the bridge makes no arrays, so such a row is never one of its
    jobs, but it must not stop the scan)."""
    if isinstance(value, str):
        if value.isdigit():  # the usual row, first
            return int(value), None
        head, plus, offset = value.partition("+")
        head = head.partition("_")[0]
        return (
            int(head) if head.isdigit() else None,
            int(offset) if plus and offset.isdigit() else None,
        )
    return num(value), None


def _at(value: Any, path: Sequence[str]) -> Any:
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _tres_list(value: Any) -> dict[str, int]:
    """slurmdbd's TRES list ``[{"type": "gres", "name": "gpu", "count": 2}]`` ->
    ``{"gres/gpu": 2}``."""
    out: dict[str, int] = {}
    for t in value if isinstance(value, list) else ():
        if not isinstance(t, Mapping) or (count := num(t.get("count"))) is None:
            continue
        kind, name = _s(t.get("type")), _s(t.get("name"))
        if kind:
            out[f"{kind}/{name}" if name else kind] = count
    return out


def _limits(
    record: Any,
    tres: Mapping[str, Sequence[str]],
    counts: Mapping[str, Sequence[str]],
) -> SlurmLimits:
    """The limits set in ``record`` (a QOS's ``limits`` or an association's ``max``)."""
    tres_set = {k: _tres_list(_at(record, path)) for k, path in tres.items()}
    counts_set = {k: num(_at(record, path)) for k, path in counts.items()}
    return SlurmLimits(
        tres={k: v for k, v in tres_set.items() if v},
        counts={k: v for k, v in counts_set.items() if v is not None},
    )


def _require_mapping(body: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        raise InvalidInput(what, f"expected a JSON object, got {type(body).__name__}")
    return body


class Codec:
    """REST API codec; subclasses set ``version`` and override what differs."""

    version: ClassVar[str] = ""
    supports_new_node: ClassVar[bool] = True
    # ``POST /partitions/`` (create or update partitions): v0.0.45 and later.
    supports_partition_update: ClassVar[bool] = False

    # ------------------------------------------------------------------ paths
    def path(self, tail: str) -> str:
        """``/slurm/<version>/<tail>``."""
        return f"/slurm/{self.version}/{tail.lstrip('/')}"

    def db_path(self, tail: str) -> str:
        """``/slurmdb/<version>/<tail>``: slurmdbd's endpoints (slurmrestd's
        ``openapi/slurmdbd`` plugin)."""
        return f"/slurmdb/{self.version}/{tail.lstrip('/')}"

    # ------------------------------------------------------------------ encode
    def job_description(self, spec: JobSpec, *, for_update: bool = False) -> Json:
        """The ``job_desc_msg`` for ``spec``. ``for_update``: only fields a pending job
        may change (no script, flags, environment or working directory)."""
        if spec.max_nodes is not None and spec.max_nodes < spec.min_nodes:
            raise InvalidInput("max_nodes", "must be >= min_nodes")
        if spec.memory_per_node_mib is not None and spec.memory_per_cpu_mib is not None:
            raise InvalidInput("memory_per_cpu_mib", "set memory per node or per CPU, not both")
        nodes = str(spec.min_nodes)
        if spec.max_nodes is not None and spec.max_nodes != spec.min_nodes:
            nodes = f"{spec.min_nodes}-{spec.max_nodes}"
        job: Json = {
            "name": spec.name,
            "nodes": nodes,
            "tasks": spec.tasks,
            "cpus_per_task": spec.cpus_per_task,
            "comment": spec.comment,
            "admin_comment": spec.admin_comment,
        }
        optional: dict[str, Any] = {
            "partition": spec.partition,
            "tasks_per_node": spec.tasks_per_node,
            "tres_per_node": spec.tres_per_node,
            "tres_per_task": spec.tres_per_task,
            "account": spec.account,
            "qos": spec.qos,
            "reservation": spec.reservation,
            "licenses": spec.licenses,
            "constraints": spec.constraints,
            "wckey": spec.wckey,
            "user_id": spec.user_id,
            "group_id": spec.group_id,
            "mcs_label": spec.mcs_label,
        }
        job.update({k: v for k, v in optional.items() if v is not None})
        if spec.memory_per_node_mib is not None:
            job["memory_per_node"] = no_val(spec.memory_per_node_mib)
        if spec.memory_per_cpu_mib is not None:
            job["memory_per_cpu"] = no_val(spec.memory_per_cpu_mib)
        if spec.time_limit_minutes is not None:
            job["time_limit"] = no_val(spec.time_limit_minutes)
        if spec.priority is not None:
            job["priority"] = no_val(spec.priority)
        if spec.excluded_nodes:
            job["excluded_nodes"] = list(spec.excluded_nodes)
        if spec.exclusive:
            job["shared"] = ["none"]
        if for_update:
            return job
        # topology (v0.0.43-v0.0.45 share these shapes): set at submit only, as sbatch does
        if spec.segment_size is not None:
            job["segment_size"] = no_val(spec.segment_size)
        if spec.required_switches is not None:
            job["required_switches"] = no_val(spec.required_switches)
        if spec.wait_for_switch_seconds is not None:
            job["wait_for_switch"] = spec.wait_for_switch_seconds
        if spec.external:
            if spec.script is not None:
                raise InvalidInput("script", "an external (placeholder) job must have no script")
            job["flags"] = ["EXTERNAL_JOB"]
        else:
            if not spec.script:
                raise InvalidInput("script", "a batch job needs a script")
            job["script"] = spec.script
            job["standard_output"] = "/dev/null"
            job["standard_error"] = "/dev/null"
        job["environment"] = list(spec.environment)
        job["current_working_directory"] = spec.current_working_directory
        return job

    def encode_submit(self, spec: JobSpec) -> Json:
        """``POST /job/submit`` body: ``job``, or for a heterogeneous job ``jobs`` (one
        description per component, in offset order: Slurm makes one hetjob of them)."""
        if spec.het_components:
            return {"jobs": [self.job_description(c) for c in spec.components]}
        return {"job": self.job_description(spec)}

    def encode_allocate(self, spec: JobSpec) -> Json:
        """``POST /job/allocate`` body: an external job started now or not at all
        (``immediate``). The same ``job_alloc_req`` shape in v0.0.43-v0.0.45.

        A heterogeneous job is never allocated: on 26.05 ``hetjob: [...]`` with
        ``immediate`` answers 422, 2078 "Job can not start immediately" on an idle
        cluster, and without it every component ends FAILED (NonZeroExitCode) at once
        (docs/hetjob.md); it goes through :meth:`encode_submit`."""
        if not spec.external:
            raise InvalidInput("external", "only an external (placeholder) job is allocated")
        if spec.het_components:
            raise InvalidInput(
                "het_components",
                "a heterogeneous job cannot be allocated at once (Slurm: 2078, Job can not "
                "start immediately); submit it",
            )
        return {"job": {**self.job_description(spec), "immediate": True}}

    def encode_update(self, spec: JobSpec) -> Json:
        """``POST /job/{id}`` body for a pending job (a bare ``job_desc_msg``)."""
        return self.job_description(spec, for_update=True)

    def encode_node_update(self, state: str, reason: str | None = None) -> Json:
        """``POST /node/{name}`` body: DRAIN/DOWN need a reason, RESUME none."""
        state = state.upper()
        if state not in NODE_UPDATE_STATES:
            raise InvalidInput("state", f"must be one of {', '.join(NODE_UPDATE_STATES)}")
        body: Json = {"state": [state]}
        if state in ("DRAIN", "DOWN", "FAIL"):
            if not reason or not reason.strip():
                raise InvalidInput("reason", f"{state} needs a reason")
            body["reason"] = reason
        elif reason:
            body["reason"] = reason
        return body

    def encode_new_node(
        self,
        name: str,
        *,
        cpus: int,
        memory_mib: int,
        features: Sequence[str] = (),
        gres: str | None = None,
    ) -> Json:
        """``POST /new/node/`` body: one ``State=EXTERNAL`` node line.

        Slurm does not accept ``Partitions=`` on a dynamic node line: a new node joins the
        ``Nodes=ALL`` partitions; ``features`` are what upstream maps partitions onto.
        """
        for field, value in (("name", name), *(("features", f) for f in features)):
            if not value or any(c.isspace() or c in "=," for c in value):
                raise InvalidInput(
                    field, f"{value!r} must be non-empty, without spaces, '=' or ','"
                )
        if cpus < 1:
            raise InvalidInput("cpus", "must be >= 1")
        if memory_mib < 1:
            raise InvalidInput("memory_mib", "must be >= 1")
        problem = gres_problem(gres) if gres else None
        if problem is not None:  # words from the node's ResourceSlices: data, never syntax
            raise InvalidInput("gres", problem)
        line = f"NodeName={name} State=EXTERNAL CPUs={cpus} RealMemory={memory_mib}"
        if features:
            line += " Features=" + ",".join(features)
        if gres:
            line += f" Gres={gres}"
        return {"node_conf": line}

    def encode_node_comment(self, comment: str) -> Json:
        """``POST /node/{name}`` body that sets only the node's comment."""
        return {"comment": comment}

    def encode_node_topology(self, topology: str) -> Json:
        """``POST /node/{name}`` body that sets only the node's Topology= (v0.0.43+)."""
        return {"topology_str": topology}

    def encode_partition_nodes(self, partition: str, change: str) -> Json:
        """``POST /partitions/`` body changing one partition's node list.

        ``change`` uses scontrol's syntax: ``+node`` adds, ``-node`` removes, a plain list
        replaces. NOTE: Slurm CREATES the partition when ``partition`` does not exist, so
        callers check that it exists first.
        """
        if not partition or any(c.isspace() or c in "=," for c in partition):
            raise InvalidInput("partition", f"{partition!r} is not a partition name")
        return {"partitions": [{"name": partition, "nodes": {"configured": change}}]}

    # ------------------------------------------------------------------ decode: envelope
    def errors(self, body: Any) -> tuple[SlurmMessage, ...]:
        if not isinstance(body, Mapping):
            return ()
        out = []
        for e in body.get("errors") or ():
            if isinstance(e, Mapping):
                out.append(
                    SlurmMessage(
                        error_number=num(e.get("error_number")) or 0,
                        error=_s(e.get("error")),
                        description=_s(e.get("description")),
                        source=_s(e.get("source")),
                    )
                )
        return tuple(out)

    def warnings(self, body: Any) -> tuple[SlurmWarning, ...]:
        if not isinstance(body, Mapping):
            return ()
        return tuple(
            SlurmWarning(description=_s(w.get("description")), source=_s(w.get("source")))
            for w in body.get("warnings") or ()
            if isinstance(w, Mapping)
        )

    # ------------------------------------------------------------------ decode: jobs
    def decode_submit(self, body: Any) -> SubmitResult:
        b = _require_mapping(body, "job_submit response")
        job_id = num(b.get("job_id"))
        if job_id is None:
            raise InvalidInput("job_id", "missing in the submit response")
        return SubmitResult(
            job_id=job_id,
            step_id=_s(b.get("step_id")),
            user_msg=_s(b.get("job_submit_user_msg")),
            warnings=self.warnings(b),
        )

    def decode_allocation(self, resources: Any) -> tuple[AllocatedNode, ...]:
        if not isinstance(resources, Mapping):
            return ()
        nodes = resources.get("nodes")
        if isinstance(nodes, str):  # v0.0.42 and older: a hostlist string
            return tuple(AllocatedNode(name=n) for n in hostlist.expand(nodes))
        if not isinstance(nodes, Mapping):
            return ()
        out = []
        for a in nodes.get("allocation") or ():
            if not isinstance(a, Mapping):
                continue
            cpus = a.get("cpus")
            mem = a.get("memory")
            out.append(
                AllocatedNode(
                    name=_s(a.get("name")),
                    cpus=num(cpus.get("count")) if isinstance(cpus, Mapping) else num(cpus),
                    memory_mib=num(mem.get("allocated")) if isinstance(mem, Mapping) else None,
                )
            )
        return tuple(out)

    def decode_resources(self, body: Any) -> tuple[NodeResources, ...]:
        """``GET /resources/{job_id}``: per node, the core bitmap and the GRES (indices
        when Slurm picked devices, None when it only counted them)."""
        b = _require_mapping(body, "resources")
        out = []
        for n in b.get("nodes") or ():
            if not isinstance(n, Mapping):
                continue
            gres = []
            for g in n.get("gres") or ():
                if not isinstance(g, Mapping):
                    continue
                raw = g.get("index")
                gres.append(
                    GresAllocation(
                        name=_s(g.get("name")),
                        type=_s(g.get("type")),
                        count=num(g.get("count")) or 0,
                        indices=None if raw in (None, "") else index_list(str(raw)),
                    )
                )
            out.append(
                NodeResources(
                    node=_s(n.get("node")),
                    cores=bitmap_bits(_s(n.get("core_bitmap"))),
                    sockets_per_node=num(n.get("sockets_per_node")),
                    cores_per_socket=num(n.get("cores_per_socket")),
                    gres=tuple(gres),
                )
            )
        return tuple(out)

    def decode_exit_code(self, value: Any) -> ExitCode:
        if not isinstance(value, Mapping):
            return ExitCode(return_code=num(value))
        sig = value.get("signal")
        return ExitCode(
            status=_strs(value.get("status")),
            return_code=num(value.get("return_code")),
            signal=num(sig.get("id")) if isinstance(sig, Mapping) else None,
        )

    def decode_job(self, j: Mapping[str, Any]) -> SlurmJob:
        job_id = num(j.get("job_id"))
        if job_id is None:
            raise InvalidInput("job_id", "missing in a job record")
        return SlurmJob(
            job_id=job_id,
            name=_s(j.get("name")),
            state=JobState.from_list(_strs(j.get("job_state"))),
            state_reason=_s(j.get("state_reason")),
            state_description=_s(j.get("state_description")),
            nodes=tuple(hostlist.expand(_s(j.get("nodes")))),
            node_count=num(j.get("node_count")),
            partition=_s(j.get("partition")),
            comment=_s(j.get("comment")),
            admin_comment=_s(j.get("admin_comment")),
            mcs_label=_s(j.get("mcs_label")),
            user=_s(j.get("user_name")),
            user_id=num(j.get("user_id")),
            group_id=num(j.get("group_id")),
            submit_time=timestamp(j.get("submit_time")),
            eligible_time=timestamp(j.get("eligible_time")),
            start_time=timestamp(j.get("start_time")),
            end_time=timestamp(j.get("end_time")),
            last_sched_evaluation=timestamp(j.get("last_sched_evaluation")),
            time_limit_minutes=num(j.get("time_limit")),
            exit_code=self.decode_exit_code(j.get("exit_code")),
            flags=frozenset(_strs(j.get("flags"))),
            cpus=num(j.get("cpus")),
            cpus_per_task=num(j.get("cpus_per_task")),
            memory_per_node_mib=num(j.get("memory_per_node")),
            memory_per_cpu_mib=num(j.get("memory_per_cpu")),
            tres_per_node=_s(j.get("tres_per_node")),
            tres_req_str=_s(j.get("tres_req_str")),
            tres_alloc_str=_s(j.get("tres_alloc_str")),
            gres_detail=_strs(j.get("gres_detail")),
            shared=_strs(j.get("shared")),
            batch=bool(j.get("batch_flag", False)),
            allocation=self.decode_allocation(j.get("job_resources")),
            preempt_time=timestamp(j.get("preempt_time")),
            restart_count=num(j.get("restart_cnt")) or 0,
            priority=num(j.get("priority")),
            qos=_s(j.get("qos")),
            account=_s(j.get("account")),
            reservation=_s(j.get("resv_name")),
            dependency=_s(j.get("dependency")),
            minimum_cpus_per_node=num(j.get("minimum_cpus_per_node")),
            tasks=num(j.get("tasks")),
            max_nodes=num(j.get("max_nodes")),
            tasks_per_node=num(j.get("tasks_per_node")),
            tres_per_task=_s(j.get("tres_per_task")),
            required_nodes=tuple(hostlist.expand(_s(j.get("required_nodes")))),
            excluded_nodes=tuple(hostlist.expand(_s(j.get("excluded_nodes")))),
            features=_s(j.get("features")),
            licenses=_s(j.get("licenses")),
            # 0: no request (Slurm sends 0, not an unset number)
            segment_size=num(j.get("segment_size")) or None,
            required_switches=num(j.get("required_switches")) or None,
            # 0 / unset: a plain job (Slurm sends het_job_id 0 then)
            het_job_id=num(j.get("het_job_id")) or None,
            het_job_offset=(num(j.get("het_job_offset")) if num(j.get("het_job_id")) else None),
        )

    def decode_job_record(self, body: Any, job_id: int) -> SlurmJob | None:
        """``GET /job/{id}``: the job, None when the answer has none. For a hetjob's
        leader Slurm answers every component: the leader carries the others in
        ``het_components`` (offset order); a component read by its own id comes alone."""
        jobs = self.decode_jobs(body).jobs
        if not jobs:
            return None
        first = next((j for j in jobs if j.job_id == job_id), jobs[0])
        rest = sorted(
            (
                j
                for j in jobs
                if j is not first and j.het_job_id is not None and j.het_job_id == first.job_id
            ),
            key=lambda j: j.het_job_offset or 0,
        )
        return first.model_copy(update={"het_components": tuple(rest)}) if rest else first

    def decode_jobs(self, body: Any) -> JobList:
        b = _require_mapping(body, "jobs response")
        return JobList(
            jobs=tuple(self.decode_job(j) for j in b.get("jobs") or () if isinstance(j, Mapping)),
            last_update=timestamp(b.get("last_update")),
        )

    def decode_job_states(self, body: Any) -> tuple[JobStateItem, ...]:
        """Every row of ``GET /jobs/state/`` (tens of thousands a tick on a busy cluster:
        the few distinct states are parsed once, rows are built without re-validation)."""
        b = _require_mapping(body, "jobs/state response")
        states: dict[tuple[str, ...], tuple[JobState, bool]] = {}
        rows = (self.decode_job_state_row(j, states) for j in b.get("jobs") or ())
        return tuple(r for r in rows if r is not None)

    def decode_job_state_row(
        self,
        j: Any,
        states: dict[tuple[str, ...], tuple[JobState, bool]],
        wanted: Callable[[JobState], bool] | None = None,
    ) -> JobStateItem | None:
        """One row of ``GET /jobs/state/`` (None: not an object, or its state not
        ``wanted``: such a row is not built, and its id not read); ``states`` caches the
        few distinct states across rows, each with ``wanted``'s answer."""
        if not isinstance(j, Mapping):
            return None
        raw = _strs(j.get("state"))
        known = states.get(raw)
        if known is None:
            state = JobState.from_list(raw)
            known = states[raw] = (state, wanted is None or wanted(state))
        if not known[1]:
            return None
        job_id, offset = _state_row_id(j.get("job_id"))
        if job_id is None:
            raise InvalidInput("job_id", "missing in a jobs/state row")
        return JobStateItem.model_construct(job_id=job_id, state=known[0], het_offset=offset)

    def decode_cancel(self, body: Any) -> tuple[CancelStatus, ...]:
        """A DELETE's ``status[]``: failures arrive here with HTTP 200."""
        if not isinstance(body, Mapping):
            return ()
        out = []
        for st in body.get("status") or ():
            if not isinstance(st, Mapping):
                continue
            err = st.get("error")
            msg = None
            if isinstance(err, Mapping) and num(err.get("code")):
                msg = SlurmMessage(
                    error_number=num(err.get("code")) or 0,
                    error=_s(err.get("string")),
                    description=_s(err.get("message")),
                )
            out.append(CancelStatus(job_id=num(st.get("job_id")), error=msg))
        return tuple(out)

    def decode_update_results(self, body: Any) -> tuple[SlurmMessage, ...]:
        """``POST /job/{id}`` ``results[]``: non-zero ``error_code`` entries."""
        if not isinstance(body, Mapping):
            return ()
        return tuple(
            SlurmMessage(
                error_number=num(r.get("error_code")) or 0,
                error=_s(r.get("error")),
                description=_s(r.get("why")),
            )
            for r in body.get("results") or ()
            if isinstance(r, Mapping) and num(r.get("error_code"))
        )

    # ------------------------------------------------------------------ decode: nodes etc.
    def decode_node(self, n: Mapping[str, Any]) -> SlurmNode:
        return SlurmNode(
            name=_s(n.get("name")),
            state=frozenset(_strs(n.get("state"))),
            reason=_s(n.get("reason")),
            reason_set_by_user=_s(n.get("reason_set_by_user")),
            cpus=num(n.get("cpus")) or 0,
            alloc_cpus=num(n.get("alloc_cpus")) or 0,
            real_memory_mib=num(n.get("real_memory")) or 0,
            alloc_memory_mib=num(n.get("alloc_memory")) or 0,
            gres=_s(n.get("gres")),
            gres_used=_s(n.get("gres_used")),
            partitions=_strs(n.get("partitions")),
            features=_strs(n.get("features")),
            active_features=_strs(n.get("active_features")),
            address=_s(n.get("address")),
            hostname=_s(n.get("hostname")),
            comment=_s(n.get("comment")),
            tres=_s(n.get("tres")),
            topology=_s(n.get("topology")),
        )

    def decode_nodes(self, body: Any) -> tuple[SlurmNode, ...]:
        b = _require_mapping(body, "nodes response")
        return tuple(self.decode_node(n) for n in b.get("nodes") or () if isinstance(n, Mapping))

    def decode_partition(self, p: Mapping[str, Any]) -> SlurmPartition:
        nodes = p.get("nodes")
        cpus = p.get("cpus")
        part = p.get("partition")
        tres = p.get("tres")
        prio = p.get("priority")
        configured = _s(nodes.get("configured")) if isinstance(nodes, Mapping) else ""
        return SlurmPartition(
            name=_s(p.get("name")),
            nodes=tuple(hostlist.expand(configured)),
            node_count=(num(nodes.get("total")) or 0) if isinstance(nodes, Mapping) else 0,
            total_cpus=(num(cpus.get("total")) or 0) if isinstance(cpus, Mapping) else 0,
            state=_strs(part.get("state")) if isinstance(part, Mapping) else (),
            flags=_strs(p.get("flags")),
            tres=_s(tres.get("configured")) if isinstance(tres, Mapping) else "",
            grace_time_seconds=num(p.get("grace_time")) or 0,
            priority_tier=(num(prio.get("tier")) or 1) if isinstance(prio, Mapping) else 1,
        )

    def decode_partitions(self, body: Any) -> tuple[SlurmPartition, ...]:
        b = _require_mapping(body, "partitions response")
        return tuple(
            self.decode_partition(p) for p in b.get("partitions") or () if isinstance(p, Mapping)
        )

    def decode_reservations(self, body: Any) -> tuple[SlurmReservation, ...]:
        """``GET /reservations/``: each reservation's window and nodes (not its users)."""
        b = _require_mapping(body, "reservations response")
        return tuple(
            SlurmReservation(
                name=_s(r.get("name")),
                start_time=timestamp(r.get("start_time")),
                end_time=timestamp(r.get("end_time")),
                node_count=num(r.get("node_count")) or 0,
                nodes=tuple(hostlist.expand(_s(r.get("node_list")))),
                partition=_s(r.get("partition")),
                flags=_strs(r.get("flags")),
            )
            for r in b.get("reservations") or ()
            if isinstance(r, Mapping)
        )

    def decode_qos(self, body: Any) -> tuple[SlurmQos, ...]:
        """``GET /slurmdb/<v>/qos/``: each QOS's name and limits."""
        b = _require_mapping(body, "qos response")
        return tuple(
            SlurmQos(
                name=_s(q.get("name")),
                limits=_limits(q.get("limits"), QOS_TRES_LIMITS, QOS_COUNT_LIMITS),
            )
            for q in b.get("qos") or ()
            if isinstance(q, Mapping)
        )

    def decode_associations(self, body: Any) -> tuple[SlurmAssociation, ...]:
        """``GET /slurmdb/<v>/associations/``: each association's place and limits."""
        b = _require_mapping(body, "associations response")
        return tuple(
            SlurmAssociation(
                account=_s(a.get("account")),
                user=_s(a.get("user")),
                partition=_s(a.get("partition")),
                parent_account=_s(a.get("parent_account")),
                qos=_strs(a.get("qos")),
                limits=_limits(a.get("max"), ASSOC_TRES_LIMITS, ASSOC_COUNT_LIMITS),
            )
            for a in b.get("associations") or ()
            if isinstance(a, Mapping)
        )

    def decode_ping(self, body: Any) -> tuple[PingResult, ...]:
        b = _require_mapping(body, "ping response")
        return tuple(
            PingResult(
                hostname=_s(p.get("hostname")),
                responding=bool(p.get("responding", False)),
                primary=bool(p.get("primary", False)),
                status=_s(p.get("status")),
                latency_us=num(p.get("latency")),
            )
            for p in b.get("pings") or ()
            if isinstance(p, Mapping)
        )
