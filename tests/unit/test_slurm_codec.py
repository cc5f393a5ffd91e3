"""Codecs against REAL slurmrestd 26.05 payloads (tests/golden/slurmrestd/<version>/).

v0.0.45 files come from the shared reference capture; v0.0.43/44 were captured by
tests/golden/capture.py from the sandbox.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bridge.errors import ConfigError, InvalidInput
from bridge.models import JobSpec
from bridge.slurm.codec import SUPPORTED_VERSIONS, codec_for
from bridge.slurm.models import JobState, SlurmJob

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "slurmrestd"
VERSIONS = pytest.mark.parametrize("version", SUPPORTED_VERSIONS)


def load(version: str, name: str) -> Any:
    return json.loads((GOLDEN / version / f"{name}.json").read_text())


@VERSIONS
def test_running_external_job_decodes_state_nodes_and_resources(version: str) -> None:
    job = codec_for(version).decode_jobs(load(version, "external-job-get")).jobs[0]
    assert job.state.primary == "RUNNING"
    assert job.external
    assert not job.batch
    assert len(job.nodes) == 2
    assert job.node_count == 2
    assert [a.name for a in job.allocation] == list(job.nodes)
    assert job.tres_alloc()["node"] == "2"
    assert job.start_time is not None
    assert job.submit_time is not None
    assert job.memory_per_node_mib is not None


@VERSIONS
def test_submit_request_golden_is_what_the_codec_encodes(version: str) -> None:
    """The encoder's external-job body matches the request that really worked."""
    golden = load(version, "external-job-submit-request")["job"]
    body = codec_for(version).encode_submit(_spec_from(golden))["job"]
    for key, value in golden.items():
        if key in ("standard_output", "standard_error"):
            continue
        assert body[key] == value, key


def _spec_from(golden: dict[str, Any]) -> JobSpec:
    return JobSpec(
        name=golden["name"],
        partition=golden["partition"],
        min_nodes=int(golden["nodes"]),
        tasks=golden.get("tasks", 2),
        tasks_per_node=golden.get("tasks_per_node"),
        cpus_per_task=golden["cpus_per_task"],
        memory_per_node_mib=golden["memory_per_node"]["number"],
        time_limit_minutes=golden["time_limit"]["number"],
        comment=golden.get("comment", ""),
        admin_comment=golden.get("admin_comment", ""),
        tres_per_node=golden.get("tres_per_node"),
    )


@VERSIONS
def test_allocate_request_golden_is_what_the_codec_encodes(version: str) -> None:
    """The immediate external allocation that really ran on 26.05, for each version."""
    golden = load(version, "external-job-allocate-request")["job"]
    body = codec_for(version).encode_allocate(_spec_from(golden))["job"]
    assert body["immediate"] is True
    for key, value in golden.items():
        assert body[key] == value, key


def test_allocate_of_a_batch_job_is_invalid_naming_the_field() -> None:
    spec = JobSpec(name="b", min_nodes=1, tasks=1, external=False, script="#!/bin/sh\ntrue")
    with pytest.raises(InvalidInput, match="external"):
        codec_for("v0.0.45").encode_allocate(spec)


@VERSIONS
def test_allocate_response_gives_the_job_id_and_the_job_runs(version: str) -> None:
    c = codec_for(version)
    res = c.decode_submit(load(version, "external-job-allocate-response"))
    job = c.decode_jobs(load(version, "job-get-allocated")).jobs[0]
    assert job.job_id == res.job_id
    assert job.state.primary == "RUNNING"
    assert len(job.nodes) == 3
    assert not job.refused_allocation


@VERSIONS
def test_refused_allocation_is_2016_and_its_failed_record_is_recognised(version: str) -> None:
    c = codec_for(version)
    errs = c.errors(load(version, "error-allocate-nodes-busy"))
    assert errs[0].error_number == 2016
    record = c.decode_jobs(load(version, "job-get-refused-allocation")).jobs[0]
    assert record.state.primary == "FAILED"
    assert record.admin_comment  # the group's identity stays on the record
    assert record.refused_allocation


@VERSIONS
def test_submit_response_gives_the_job_id(version: str) -> None:
    res = codec_for(version).decode_submit(load(version, "external-job-submit-response"))
    assert res.job_id > 0


@VERSIONS
def test_job_states_list_decodes(version: str) -> None:
    items = codec_for(version).decode_job_states(load(version, "jobs-state-get"))
    assert items
    assert all(i.job_id > 0 and i.state.primary for i in items)


_MIXED_STATE_ROWS = [
    {"job_id": "1", "state": ["COMPLETED"]},
    {"job_id": "2", "state": ["PENDING"]},
    {"job_id": "3", "state": ["RUNNING", "COMPLETING"]},
    {"job_id": "4", "state": "CANCELLED"},
    {"job_id": "5+1", "state": ["RUNNING"]},
    {"job_id": "6_2", "state": ["SUSPENDED"]},
    {"job_id": "7", "state": []},
    {"job_id": "8", "state": ["FAILED", "REQUEUED"]},
    "not a row",
]


@VERSIONS
@pytest.mark.parametrize(
    "wanted",
    [lambda s: s.active, lambda s: not s.active, lambda s: True, lambda s: False],
    ids=["active", "finished", "every", "none"],
)
def test_job_state_rows_refused_by_state_are_dropped_as_a_filter_after_decoding_would(
    version: str, wanted: Any
) -> None:
    """The sweep builds only the rows whose state it wants: the same rows, equal, as
    decoding every row and filtering after."""
    c = codec_for(version)
    every = c.decode_job_states({"jobs": _MIXED_STATE_ROWS})
    states: dict[tuple[str, ...], tuple[JobState, bool]] = {}
    asked: list[JobState] = []

    def counted(s: JobState) -> bool:
        asked.append(s)
        return bool(wanted(s))

    rows = [c.decode_job_state_row(j, states, counted) for j in _MIXED_STATE_ROWS * 2]
    assert [r for r in rows if r is not None] == [r for r in every if wanted(r.state)] * 2
    assert len(asked) == len(set(asked)) == 8  # each distinct state asked once


def test_a_finished_row_is_not_built_and_a_kept_row_without_an_id_is_still_refused() -> None:
    c = codec_for("v0.0.45")
    states: dict[tuple[str, ...], tuple[JobState, bool]] = {}
    active = JobState.active.fget
    assert c.decode_job_state_row({"state": ["COMPLETED"]}, states, active) is None
    with pytest.raises(InvalidInput, match="job_id"):
        c.decode_job_state_row({"state": ["RUNNING"]}, states, active)


@VERSIONS
def test_nodes_decode_with_external_flag_where_the_version_has_it(version: str) -> None:
    nodes = codec_for(version).decode_nodes(load(version, "nodes-get"))
    assert nodes
    assert all(n.name and n.cpus > 0 and n.real_memory_mib > 0 for n in nodes)
    if version == "v0.0.45":
        return  # the reference capture had no external nodes
    ext = [n for n in nodes if n.name.startswith("ext-")]
    assert ext
    # v0.0.43's node-state enum has no EXTERNAL: the flag is dropped by that parser.
    assert all(n.external for n in ext) == (version != "v0.0.43")


@VERSIONS
def test_partitions_decode_with_expanded_node_lists(version: str) -> None:
    parts = codec_for(version).decode_partitions(load(version, "partitions-get"))
    assert parts
    assert all(p.up and p.nodes and p.node_count == len(p.nodes) for p in parts)


@VERSIONS
@pytest.mark.parametrize(
    ("name", "number"),
    [("error-bad-partition", 2000), ("error-job-not-found", 2017), ("error-too-much-memory", 2014)],
    ids=["bad-partition", "job-not-found", "too-much-memory"],
)
def test_error_payloads_carry_slurms_number_and_text(version: str, name: str, number: int) -> None:
    errs = codec_for(version).errors(load(version, name))
    assert errs[0].error_number == number
    assert errs[0].error


@VERSIONS
def test_delete_already_completed_is_reported_in_status(version: str) -> None:
    st = codec_for(version).decode_cancel(load(version, "job-delete-already-completed-response"))
    assert st[0].error is not None
    assert st[0].error.error_number == 2021


@VERSIONS
def test_delete_success_has_no_failed_status(version: str) -> None:
    st = codec_for(version).decode_cancel(load(version, "job-delete-response"))
    assert all(s.error is None for s in st)


def test_v045_pending_job_has_its_reason() -> None:
    job = codec_for("v0.0.45").decode_jobs(load("v0.0.45", "job-get-pending")).jobs[0]
    assert job.state.primary == "PENDING"
    assert job.state_reason not in ("", "None")
    assert job.nodes == ()


def test_v045_exclusive_job_reads_back_shared_empty() -> None:
    """26.05 shows shared [] even for shared:["none"] (exclusive) on v0.0.45."""
    job = codec_for("v0.0.45").decode_jobs(load("v0.0.45", "job-get-running")).jobs[0]
    assert job.shared == ()


def test_v043_reads_back_shared_none() -> None:
    job = codec_for("v0.0.43").decode_jobs(load("v0.0.43", "external-job-get")).jobs[0]
    assert job.shared == ("none",)


def test_v045_accepted_with_warnings_keeps_them() -> None:
    res = codec_for("v0.0.45").decode_submit(load("v0.0.45", "error-too-many-cpus"))
    assert res.job_id > 0
    assert res.warnings


def test_v042_string_job_resources_still_decodes() -> None:
    """Slurm 24.11 (v0.0.42) sent job_resources.nodes as a hostlist string."""
    job = codec_for("v0.0.45").decode_jobs(load("v0.0.42", "job-get-running")).jobs[0]
    assert job.nodes
    assert [a.name for a in job.allocation] == list(job.nodes)


BASE = JobSpec(name="g", min_nodes=2, tasks=2, memory_per_node_mib=100, admin_comment="uid-1")


@pytest.mark.parametrize(
    ("changes", "expect"),
    [
        pytest.param(
            {},
            {"flags": ["EXTERNAL_JOB"], "shared": ["none"], "nodes": "2"},
            id="external-exclusive",
        ),
        pytest.param({"exclusive": False}, {"flags": ["EXTERNAL_JOB"]}, id="shared-no-shared-key"),
        pytest.param({"max_nodes": 4}, {"nodes": "2-4"}, id="node-range"),
        pytest.param(
            {"external": False, "script": "#!/bin/sh\ntrue\n"},
            {"script": "#!/bin/sh\ntrue\n"},
            id="batch-script",
        ),
        pytest.param(
            {"time_limit_minutes": 5, "priority": 7},
            {"time_limit": {"set": True, "number": 5}, "priority": {"set": True, "number": 7}},
            id="no-val-structs",
        ),
        pytest.param(
            {"excluded_nodes": ("a", "b")}, {"excluded_nodes": ["a", "b"]}, id="excluded-csv-list"
        ),
    ],
)
@VERSIONS
def test_encode_submit_table(version: str, changes: dict[str, Any], expect: dict[str, Any]) -> None:
    job = codec_for(version).encode_submit(BASE.model_copy(update=changes))["job"]
    for k, v in expect.items():
        assert job[k] == v
    if changes.get("exclusive") is False:
        assert "shared" not in job
    if not changes.get("external", True):
        assert "flags" not in job
    else:
        assert "script" not in job


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        pytest.param({"script": "x"}, "script", id="external-with-script"),
        pytest.param({"external": False}, "script", id="batch-without-script"),
        pytest.param({"max_nodes": 1}, "max_nodes", id="max-below-min"),
        pytest.param({"memory_per_cpu_mib": 5}, "memory_per_cpu_mib", id="both-memories"),
    ],
)
def test_encode_submit_rejects_bad_specs_naming_the_field(
    changes: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInput) as e:
        codec_for("v0.0.45").encode_submit(BASE.model_copy(update=changes))
    assert e.value.field == field


def test_encode_update_carries_only_mutable_fields() -> None:
    body = codec_for("v0.0.44").encode_update(BASE)
    assert "flags" not in body
    assert "script" not in body
    assert "environment" not in body
    assert body["nodes"] == "2"
    assert body["admin_comment"] == "uid-1"


@pytest.mark.parametrize(
    ("state", "reason", "expect"),
    [
        ("DRAIN", "maint", {"state": ["DRAIN"], "reason": "maint"}),
        ("down", "dead", {"state": ["DOWN"], "reason": "dead"}),
        ("RESUME", None, {"state": ["RESUME"]}),
    ],
    ids=["drain", "down-lowercase", "resume"],
)
def test_encode_node_update(state: str, reason: str | None, expect: dict[str, Any]) -> None:
    assert codec_for("v0.0.45").encode_node_update(state, reason) == expect


def test_drain_without_reason_is_invalid() -> None:
    with pytest.raises(InvalidInput, match="reason"):
        codec_for("v0.0.45").encode_node_update("DRAIN", "")


def test_encode_new_external_node_line() -> None:
    body = codec_for("v0.0.45").encode_new_node(
        "k8s-a", cpus=4, memory_mib=8000, features=["p1", "p2"]
    )
    assert body == {
        "node_conf": "NodeName=k8s-a State=EXTERNAL CPUs=4 RealMemory=8000 Features=p1,p2"
    }


def test_new_node_name_with_space_is_invalid() -> None:
    with pytest.raises(InvalidInput, match="name"):
        codec_for("v0.0.45").encode_new_node("a b", cpus=1, memory_mib=1)


def test_unknown_version_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="slurmApiVersion"):
        codec_for("v0.0.40")


@pytest.mark.parametrize(
    ("state", "flags", "nodes", "comment", "refused"),
    [
        pytest.param("FAILED", (), (), "x spec=a start=now", True, id="refused-try"),
        pytest.param("FAILED", ("JOB_WAS_RUNNING",), (), "start=now", False, id="ran-then-failed"),
        pytest.param("FAILED", (), ("n0",), "start=now", False, id="held-nodes"),
        pytest.param("FAILED", (), (), "x spec=a", False, id="queued-job-not-a-try"),
        pytest.param("CANCELLED", (), (), "start=now", False, id="cancelled"),
        pytest.param("RUNNING", ("JOB_WAS_RUNNING",), ("n0",), "start=now", False, id="allocated"),
    ],
)
def test_refused_allocation_record_table(
    state: str, flags: tuple[str, ...], nodes: tuple[str, ...], comment: str, refused: bool
) -> None:
    job = SlurmJob(
        job_id=1,
        name="j",
        state=JobState(primary=state),
        flags=frozenset(flags),
        nodes=nodes,
        comment=comment,
        admin_comment='{"uid":"u"}',
    )
    assert job.refused_allocation is refused


@pytest.mark.parametrize(
    ("raw", "cores"),
    [
        pytest.param("0xC0", (6, 7), id="hex"),
        pytest.param("0x1", (0,), id="hex-one"),
        pytest.param("0-2,5", (0, 1, 2, 5), id="index-list"),
        pytest.param("", (), id="empty"),
    ],
)
def test_core_bitmap_decodes_to_core_indices(raw: str, cores: tuple[int, ...]) -> None:
    body = {"nodes": [{"node": "n", "core_bitmap": raw, "gres": []}]}
    (res,) = codec_for("v0.0.45").decode_resources(body)
    assert res.cores == cores


@pytest.mark.parametrize(
    ("index", "want"),
    [
        pytest.param("0", (0,), id="one"),
        pytest.param("0-1", (0, 1), id="range"),
        pytest.param("0,2-3", (0, 2, 3), id="list"),
        pytest.param(None, None, id="external-node-counts-only"),
    ],
)
def test_gres_index_decodes_to_indices_or_none(index: str | None, want: Any) -> None:
    # as measured on the sandbox: slurmd node "index": "0-1", external node "index": null
    body = {
        "nodes": [
            {
                "node": "n",
                "core_bitmap": "0x1",
                "sockets_per_node": 8,
                "cores_per_socket": 1,
                "gres": [{"name": "gpu", "type": "", "count": 2, "index": index}],
            }
        ]
    }
    (res,) = codec_for("v0.0.45").decode_resources(body)
    assert res.gres[0].indices == want
    assert res.sockets_per_node == 8


def test_bad_gres_index_is_invalid_input() -> None:
    body = {"nodes": [{"node": "n", "gres": [{"name": "gpu", "count": 1, "index": "x"}]}]}
    with pytest.raises(InvalidInput, match="index"):
        codec_for("v0.0.45").decode_resources(body)


@VERSIONS
def test_topology_request_is_encoded_at_submit_not_update(version: str) -> None:
    spec = BASE.model_copy(
        update={"segment_size": 2, "required_switches": 1, "wait_for_switch_seconds": 90}
    )
    job = codec_for(version).encode_submit(spec)["job"]
    assert job["segment_size"] == {"set": True, "number": 2}
    assert job["required_switches"] == {"set": True, "number": 1}
    assert job["wait_for_switch"] == 90
    update = codec_for(version).encode_update(spec)
    assert not {"segment_size", "required_switches", "wait_for_switch"} & set(update)
    assert "segment_size" not in codec_for(version).encode_submit(BASE)["job"]


def _het(version: str) -> tuple[JobSpec, JobSpec]:
    golden = load(version, "external-job-submit-request")["job"]
    c0 = _spec_from(golden)
    c1 = c0.model_copy(update={"min_nodes": 2, "tasks": 2, "tres_per_node": "gres/gpu:2"})
    return c0, c1


@VERSIONS
def test_hetjob_submit_body_is_one_description_per_component_in_offset_order(
    version: str,
) -> None:
    c = codec_for(version)
    c0, c1 = _het(version)
    body = c.encode_submit(c0.model_copy(update={"het_components": (c1,)}))
    assert body == {"jobs": [c.encode_submit(c0)["job"], c.encode_submit(c1)["job"]]}


@VERSIONS
def test_hetjob_is_never_allocated_naming_slurms_answer(version: str) -> None:
    c0, c1 = _het(version)
    with pytest.raises(InvalidInput, match="2078") as e:
        codec_for(version).encode_allocate(c0.model_copy(update={"het_components": (c1,)}))
    assert e.value.field == "het_components"


def test_v045_hetjob_leader_read_by_id_carries_every_component() -> None:
    c = codec_for("v0.0.45")
    body = load("v0.0.45", "hetjob-get")
    leader_id = body["jobs"][0]["job_id"]
    job = c.decode_job_record(body, leader_id)
    assert job is not None
    assert [(x.job_id, x.het_job_id, x.het_job_offset) for x in job.components] == [
        (leader_id, leader_id, 0),
        (leader_id + 1, leader_id, 1),
    ]
    assert job.het_components[0].gres_detail == ("gpu(CNT:2)", "gpu(CNT:2)")
    assert job.het_components[0].nodes == ("kube-node-1", "kube-node-2")
    alone = c.decode_job_record({"jobs": body["jobs"][1:]}, leader_id + 1)
    assert alone is not None
    assert (alone.het_job_offset, alone.het_components) == (1, ())


@VERSIONS
def test_plain_job_has_no_hetjob_fields(version: str) -> None:
    job = codec_for(version).decode_jobs(load(version, "external-job-get")).jobs[0]
    assert (job.het_job_id, job.het_job_offset, job.heterogeneous) == (None, None, False)
    assert job.components == (job,)


@pytest.mark.parametrize(
    ("raw", "job_id"),
    [("17", 17), (17, 17), ("12+0", 12), ("13+1", 13), ("40_3", 40)],
    ids=["plain", "number", "het-leader", "het-component", "array-task"],
)
def test_job_state_rows_of_hetjob_components_and_array_tasks_decode(raw: Any, job_id: int) -> None:
    rows = codec_for("v0.0.45").decode_job_states({"jobs": [{"job_id": raw, "state": ["RUNNING"]}]})
    assert [r.job_id for r in rows] == [job_id]
    offset = int(raw.partition("+")[2]) if isinstance(raw, str) and "+" in raw else None
    assert rows[0].het_offset == offset


def test_v045_real_hetjob_state_rows_decode() -> None:
    rows = codec_for("v0.0.45").decode_job_states(load("v0.0.45", "hetjob-jobs-state-get"))
    assert [(r.job_id, r.state.primary) for r in rows] == [(12, "RUNNING"), (13, "RUNNING")]


@VERSIONS
def test_slurmdb_qos_limits_decode_by_sacctmgrs_names(version: str) -> None:
    # each limit set with sacctmgr on the 26.05 sandbox, then read back (v0.0.43-45 share
    # the QOS shape: the v0.0.45 payload stands for each)
    (qos,) = codec_for(version).decode_qos(load("v0.0.45", "slurmdb-qos-get"))
    assert qos.name == "normal"
    assert qos.limits.tres["MaxTRESPerUser"] == {"cpu": 12, "gres/gpu": 2}
    assert qos.limits.tres["GrpTRES"] == {"cpu": 20}
    assert qos.limits.tres["GrpTRESRunMins"] == {"cpu": 1001}
    assert qos.limits.tres["MaxTRESPerJob"] == {"node": 4}
    assert qos.limits.tres["MinTRESPerJob"] == {"cpu": 2}
    assert qos.limits.counts == {
        "GrpJobs": 10,
        "GrpSubmitJobs": 1005,
        "MaxJobsPerAccount": 1006,
        "MaxJobsPerUser": 3,
        "MaxSubmitJobsPerUser": 50,
        "GrpWall": 1004,
        "MaxWall": 60,
    }
    assert codec_for(version).db_path("qos/") == f"/slurmdb/{version}/qos/"


def test_slurmdb_associations_decode_with_their_place_and_limits() -> None:
    assocs = codec_for("v0.0.45").decode_associations(load("v0.0.45", "slurmdb-associations-get"))
    by = {(a.account, a.user): a for a in assocs}
    account = by[("default", "")]
    assert account.parent_account == "root"
    assert account.limits.tres["GrpTRES"] == {"cpu": 16, "gres/gpu": 4}
    assert account.limits.counts["GrpJobs"] == 8
    assert account.limits.counts["MaxJobs"] == 5
    assert account.limits.counts["GrpWall"] == 2005
    user = by[("default", "slurm")]
    assert user.limits.tres["GrpTRES"] == {"cpu": 14}
    assert user.qos == ("normal",)
    assert by[("root", "")].limits.tres == {}


def test_reservations_decode_their_window_and_nodes_not_their_users() -> None:
    (r,) = codec_for("v0.0.45").decode_reservations(load("v0.0.45", "reservations-get"))
    assert (r.name, r.node_count) == ("maint", 3)
    assert r.nodes == ("kube-node-0", "kube-node-1", "kube-node-2")
    assert r.start_time is not None
    assert r.end_time is not None
    assert (r.end_time - r.start_time).total_seconds() == 30 * 60
    assert "MAINT" in r.flags
    assert "users" not in r.model_dump()
