"""Slurm's plan for a pending job (bridge.expected): read, told in words, and when a pod's
copy of it is written again."""

from datetime import UTC, datetime, timedelta

import pytest

from bridge.expected import (
    BY_BRIDGE,
    BY_SLURM,
    NO_PLAN_YET,
    Plan,
    crossed,
    human_in,
    note,
    parse_rfc3339,
    plan_of,
    replanned,
    rfc3339,
    said_by,
    short_in,
    stale,
    strip_note,
)
from bridge.models import GroupId, JobSpec
from bridge.queueplan import QueueStart
from scheduler.decide import (
    GroupSnapshot,
    JobSnapshot,
    Pending,
    decide,
    parse_pending,
    pending_message,
    spec_hash,
)

NOW = datetime(2026, 11, 29, 13, 53, 0, tzinfo=UTC)
AT = datetime(2026, 11, 29, 14, 5, 0, tzinfo=UTC)


def test_a_start_time_is_slurms_plan_and_none_is_no_plan_yet() -> None:
    assert plan_of(AT, NOW) == Plan(AT)
    assert plan_of(None, NOW) == NO_PLAN_YET
    assert not NO_PLAN_YET.planned


def test_a_start_a_year_ahead_is_no_plan_a_job_ahead_has_no_time_limit() -> None:
    # measured on 26.05: behind a job with an INFINITE limit, start_time = pass + 365 days
    plan = plan_of(NOW + timedelta(days=365), NOW + timedelta(seconds=3))
    assert plan == Plan(None, unknowable=True)
    assert (
        note(plan, NOW) == "; no start time planned yet: a job ahead has no time limit (INFINITE)"
    )
    # a plan well inside the year is a plan
    assert plan_of(NOW + timedelta(days=30), NOW).start == NOW + timedelta(days=30)


def test_the_note_says_when_and_how_far_ahead_in_the_issues_words() -> None:
    by_slurm = ", planned by Slurm's backfill"
    assert note(Plan(AT), NOW) == (
        "; Slurm expects it to start at 2026-11-29T14:05:00Z (in 12 min)" + by_slurm
    )
    assert note(NO_PLAN_YET, NOW) == "; no start time planned yet"
    assert note(Plan(AT), AT) == (
        "; Slurm expects it to start at 2026-11-29T14:05:00Z (due now)" + by_slurm
    )


@pytest.mark.parametrize(
    ("seconds", "words", "short"),
    [
        (-5, "due now", "duenow"),
        (0, "due now", "duenow"),
        (40, "in 40 s", "40s"),
        (60, "in 1 min", "1m"),
        (61, "in 2 min", "2m"),
        (720, "in 12 min", "12m"),
        (7500, "in 2 h 5 min", "2h5m"),
        (7200, "in 2 h", "2h"),
        (3 * 86400 + 4 * 3600, "in 3 d 4 h", "3d4h"),
    ],
)
def test_how_far_ahead_in_words(seconds: float, words: str, short: str) -> None:
    assert human_in(seconds) == words
    assert short_in(seconds) == short


def test_rfc3339_round_trips_and_a_bad_annotation_reads_as_none() -> None:
    assert rfc3339(AT) == "2026-11-29T14:05:00Z"
    assert parse_rfc3339("2026-11-29T14:05:00Z") == AT
    assert parse_rfc3339("soon") is None
    assert parse_rfc3339(None) is None


BASE = "Slurm job 48 is pending: Resources"


def _stale(shown: datetime | None, told: str, plan: Plan | None, now: datetime = NOW) -> bool:
    new = BASE + (note(plan, now) if plan is not None else "")
    return stale(shown=shown, message=told, new_message=new, plan=plan, now=now, step=60)


def test_a_pod_showing_the_plan_is_not_written_again_when_it_moved_by_at_most_the_step() -> None:
    told = BASE + note(Plan(AT), NOW)
    assert not _stale(AT, told, Plan(AT + timedelta(seconds=60)), NOW + timedelta(seconds=30))
    assert _stale(AT, told, Plan(AT + timedelta(seconds=61)))
    assert _stale(AT, told, Plan(AT - timedelta(seconds=90)))


def test_a_pod_is_written_when_the_plan_appears_or_slurm_drops_it() -> None:
    assert _stale(None, BASE + note(NO_PLAN_YET, NOW), Plan(AT))
    assert _stale(AT, BASE + note(Plan(AT), NOW), NO_PLAN_YET)
    assert _stale(AT, BASE + note(Plan(AT), NOW), Plan(None, unknowable=True))
    assert not _stale(None, BASE + note(NO_PLAN_YET, NOW), NO_PLAN_YET)


def test_a_pod_is_written_when_the_plan_crosses_now() -> None:
    told = BASE + note(Plan(AT), NOW)  # "in 12 min"
    assert not _stale(AT, told, Plan(AT), AT - timedelta(seconds=1))
    assert _stale(AT, told, Plan(AT), AT)  # the time has come: "due now"
    due = BASE + note(Plan(AT), AT)
    assert not _stale(AT, due, Plan(AT), AT + timedelta(minutes=5))
    # Slurm moved it ahead by less than the step, past now again: "in 30 s"
    assert _stale(AT, due, Plan(AT + timedelta(seconds=40)), AT + timedelta(seconds=10))


def test_a_pod_is_written_when_the_reason_changes_whatever_the_plan() -> None:
    told = "Slurm job 48 is pending: Priority" + note(Plan(AT), NOW)
    assert _stale(AT, told, Plan(AT))


def test_a_job_known_from_the_pods_record_only_leaves_their_plan_alone() -> None:
    told = BASE + note(Plan(AT), NOW)
    assert not _stale(AT, told, None)
    assert _stale(AT, "Slurm job 48 is pending: Priority" + note(Plan(AT), NOW), None)


def test_a_plan_crossed_now_between_two_looks() -> None:
    assert crossed(AT, AT - timedelta(seconds=30), AT + timedelta(seconds=1))
    assert not crossed(AT, AT, AT + timedelta(seconds=30))  # due at the last look already
    assert not crossed(AT, NOW, AT - timedelta(seconds=1))
    assert not crossed(None, NOW, AT)


def test_a_plan_read_again_is_news_only_when_the_pods_would_be_told_something_new() -> None:
    then, now = NOW, NOW + timedelta(seconds=30)
    later = AT + timedelta(seconds=60)
    assert not replanned(Plan(AT), Plan(later), then=then, now=now, step=60)
    assert replanned(Plan(AT), Plan(later + timedelta(seconds=1)), then=then, now=now, step=60)
    assert replanned(NO_PLAN_YET, Plan(AT), then=then, now=now, step=60)
    assert replanned(Plan(AT), NO_PLAN_YET, then=then, now=now, step=60)
    year = now + timedelta(days=365)
    assert replanned(Plan(AT), plan_of(year, now), then=then, now=now, step=60)
    unknown = plan_of(year + timedelta(seconds=30), now)
    assert not replanned(plan_of(year, now), unknown, then=then, now=now, step=60)
    # the same plan, come due since the last look
    due = AT + timedelta(seconds=1)
    assert replanned(Plan(AT), Plan(AT), then=AT - timedelta(seconds=30), now=due, step=60)
    # the same time, planned by the other planner: the pods must say who planned it
    bridge = Plan(AT, by=BY_BRIDGE, slurm_start=later)
    assert replanned(Plan(AT), bridge, then=then, now=now, step=60)


def test_strip_note_leaves_a_message_without_one_alone() -> None:
    assert strip_note(BASE + note(Plan(AT), NOW)) == BASE
    assert strip_note(BASE + note(NO_PLAN_YET, NOW)) == BASE
    assert strip_note(BASE) == BASE


# --- the decide step's Pending ----------------------------------------------------------
G = GroupId(kind="PodGroup", namespace="default", name="pg-1", uid="u-1")
SPEC = JobSpec(name="pg-1", min_nodes=2, tasks=2)


def _pending(job: JobSnapshot, now: datetime | None) -> Pending:
    d = decide(GroupSnapshot(group=G, pods=(), expected=0, spec=SPEC, job=job, now=now))
    assert isinstance(d, Pending)
    return d


def test_a_pending_job_with_a_plan_says_when_slurm_expects_it_to_start() -> None:
    job = JobSnapshot(48, "PENDING", "Resources", spec_hash=spec_hash(SPEC), start_time=AT)
    d = _pending(job, NOW)
    assert d.message == (
        "Slurm job 48 is pending: Resources; "
        "Slurm expects it to start at 2026-11-29T14:05:00Z (in 12 min), "
        "planned by Slurm's backfill"
    )
    assert d.plan == Plan(AT)
    assert parse_pending(d.message) == (48, "Resources")


def test_a_pending_job_without_a_plan_says_so_never_a_made_up_time() -> None:
    job = JobSnapshot(48, "PENDING", "Priority", spec_hash=spec_hash(SPEC))
    d = _pending(job, NOW)
    assert d.message == "Slurm job 48 is pending: Priority; no start time planned yet"
    assert d.plan == NO_PLAN_YET


def test_a_snapshot_without_a_time_tells_no_plan() -> None:
    job = JobSnapshot(48, "PENDING", "Resources", spec_hash=spec_hash(SPEC), start_time=AT)
    d = _pending(job, None)
    assert d.message == pending_message(job, SPEC) == "Slurm job 48 is pending: Resources"
    assert d.plan is None


def test_a_job_the_bridge_has_not_planned_yet_shows_no_plan_until_it_has() -> None:
    # its first plan shown is then the better one of Slurm's and the bridge's (one refresh)
    job = JobSnapshot(
        48, "PENDING", "Resources", spec_hash=spec_hash(SPEC), start_time=AT, queue=None
    )
    assert _pending(job, NOW).plan == NO_PLAN_YET
    # a job backfill does not plan (held, a dependency ...) has nothing to wait for
    held = JobSnapshot(48, "PENDING", "JobHeldUser", spec_hash=spec_hash(SPEC), queue=None)
    assert _pending(held, NOW).plan == NO_PLAN_YET
    dep = JobSnapshot(
        48, "PENDING", "BeginTime", spec_hash=spec_hash(SPEC), start_time=AT, queue=None
    )
    assert _pending(dep, NOW).plan == Plan(AT)


def test_the_bridges_plan_says_who_made_it_and_slurms_own() -> None:
    earlier = AT - timedelta(minutes=7)
    job = JobSnapshot(
        48,
        "PENDING",
        "Priority",
        spec_hash=spec_hash(SPEC),
        start_time=AT,
        queue=QueueStart(earlier, AT),
    )
    d = _pending(job, NOW)
    assert d.plan == Plan(earlier, by=BY_BRIDGE, slurm_start=AT)
    assert d.message == (
        "Slurm job 48 is pending: Priority; slurm-bridge expects it to start at "
        "2026-11-29T13:58:00Z (in 5 min), planned by slurm-bridge from Slurm's queue "
        "(Slurm's backfill: 2026-11-29T14:05:00Z, reserving whole nodes)"
    )
    assert parse_pending(d.message) == (48, "Priority")
    assert said_by(d.message) == BY_BRIDGE
    assert strip_note(d.message) == "Slurm job 48 is pending: Priority"
    # a pod that shows Slurm's plan at the same time is written again to say who made it
    told = BASE + note(Plan(earlier), NOW)
    assert said_by(told) == BY_SLURM
    assert _stale(earlier, told, d.plan)
    assert not _stale(earlier, BASE + note(d.plan, NOW), d.plan)
