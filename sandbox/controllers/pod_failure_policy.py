"""The Job controller's ``podFailurePolicy`` and ``backoffLimit``, for the sandbox's Job
controller stand-in (:mod:`sandbox.controllers.workload_controller`). Pure: a Job and a
failed pod in, a decision out.

As in the real Job controller (batch/v1, GA in 1.31): the rules are tried in order and the
first that matches a failed pod decides:

* ``onExitCodes`` (``containerName`` optional, ``operator`` In/NotIn, ``values``) matches
  when some container (of that name) terminated with a non-zero exit code that is (In) or
  is not (NotIn) among the values; exit code 0 never matches;
* ``onPodConditions`` (``type``, ``status`` default "True") matches when the pod has such a
  condition, e.g. ``DisruptionTarget`` (set by kube-scheduler's preemption, the taint
  manager, and the bridge when Slurm ends a job from outside the workload).

``Ignore``: the failure is not counted against ``backoffLimit`` and the pod is replaced;
``FailJob``: the Job fails at once (reason ``PodFailurePolicy``); ``Count`` (also when no
rule matches): counted; more counted failures than ``backoffLimit`` (default 6) fail the
Job (reason ``BackoffLimitExceeded``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Obj = dict[str, Any]
Action = Literal["FailJob", "Ignore", "Count", "FailIndex"]
DEFAULT_BACKOFF_LIMIT = 6


@dataclass(frozen=True)
class Decision:
    action: Action
    message: str = ""  # for FailJob: why (the real controller's words)


def _exit_codes(pod: Obj, container: str | None) -> list[tuple[str, int]]:
    status = pod.get("status") or {}
    out = []
    for key in ("initContainerStatuses", "containerStatuses"):
        for c in status.get(key) or []:
            term = (c.get("state") or {}).get("terminated")
            if term is None or (container and c.get("name") != container):
                continue
            code = int(term.get("exitCode") or 0)
            if code != 0:
                out.append((str(c.get("name")), code))
    return out


def _rule_matches(rule: Obj, pod: Obj) -> str | None:
    """What about ``pod`` matches ``rule`` (for the message), or None."""
    ns, name = pod["metadata"].get("namespace"), pod["metadata"]["name"]
    if on_codes := rule.get("onExitCodes"):
        values = set(on_codes.get("values") or [])
        inside = on_codes.get("operator") == "In"
        for cname, code in _exit_codes(pod, on_codes.get("containerName")):
            if (code in values) == inside:
                return f"Container {cname} for pod {ns}/{name} failed with exit code {code}"
    for pattern in rule.get("onPodConditions") or []:
        want = (pattern.get("type"), pattern.get("status", "True"))
        for c in (pod.get("status") or {}).get("conditions") or []:
            if (c.get("type"), c.get("status")) == want:
                return f"Pod {ns}/{name} has condition {want[0]}"
    return None


def decide(job: Obj, pod: Obj) -> Decision:
    """The first matching rule of ``job``'s podFailurePolicy for failed ``pod``."""
    rules = ((job.get("spec") or {}).get("podFailurePolicy") or {}).get("rules") or []
    for i, rule in enumerate(rules):
        what = _rule_matches(rule, pod)
        if what is not None:
            action: Action = rule.get("action", "Count")
            return Decision(action, f"{what} matching {action} rule at index {i}")
    return Decision("Count")


def backoff_limit(job: Obj) -> int:
    limit = (job.get("spec") or {}).get("backoffLimit")
    return DEFAULT_BACKOFF_LIMIT if limit is None else int(limit)


def finished(job: Obj) -> bool:
    """The Job has a Complete or Failed condition (nothing more to do for it)."""
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )
