"""The Job controller's podFailurePolicy as the sandbox's stand-in decides it (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.controllers.pod_failure_policy import backoff_limit, decide

RULES = [
    {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
    {
        "action": "FailJob",
        "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]},
    },
    {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [1, 2]}},
    {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [1]}},
]
JOB = {"spec": {"podFailurePolicy": {"rules": RULES}}}


def failed(*codes: tuple[str, int], conditions: tuple[tuple[str, str], ...] = ()) -> Any:
    return {
        "metadata": {"namespace": "ns", "name": "p"},
        "status": {
            "phase": "Failed",
            "conditions": [{"type": t, "status": v} for t, v in conditions],
            "containerStatuses": [
                {"name": n, "state": {"terminated": {"exitCode": c}}} for n, c in codes
            ],
        },
    }


@pytest.mark.parametrize(
    ("pod", "action", "index"),
    [
        pytest.param(
            failed(("main", 1), conditions=(("DisruptionTarget", "True"),)),
            "Ignore",
            0,
            id="disruption",
        ),
        pytest.param(
            failed(("main", 1), conditions=(("DisruptionTarget", "False"),)),
            "Ignore",
            3,
            id="disruption-false-falls-through",
        ),
        pytest.param(failed(("main", 42)), "FailJob", 1, id="exit-42-in-main"),
        pytest.param(failed(("side", 42)), "Count", 2, id="exit-42-elsewhere-not-in"),
        pytest.param(failed(("main", 0), ("side", 2)), None, None, id="exit-0-never-matches"),
    ],
)
def test_first_matching_rule_decides(pod: Any, action: str | None, index: int | None) -> None:
    d = decide(JOB, pod)
    if action is None:
        assert (d.action, d.message) == ("Count", "")
    else:
        assert d.action == action
        assert d.message.endswith(f"matching {action} rule at index {index}")


def test_backoff_limit_defaults_to_six() -> None:
    assert backoff_limit({"spec": {}}) == 6
    assert backoff_limit({"spec": {"backoffLimit": 0}}) == 0
