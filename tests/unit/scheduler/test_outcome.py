"""The act step's outcomes, and who may change a group's hold on its job.

The work queue is kept out of every part but the cycle by an import-linter contract
(pyproject.toml); ``GroupState.job`` (the group's hold on its Slurm job) is written by the
cycle only, which this test keeps so."""

from __future__ import annotations

import ast
from pathlib import Path

import scheduler
from scheduler.outcome import NOW, REFUSED, Outcome, Requeue, after, failed


def test_a_later_step_says_when_and_what_was_forgotten_or_bound_stays_so() -> None:
    started = Outcome(Requeue.NOW, forget=True)
    bound = Outcome(Requeue.RETRY, pods_bound=True)
    assert started.then(bound) == Outcome(Requeue.RETRY, forget=True, pods_bound=True)
    assert bound.then(REFUSED) == Outcome(Requeue.REFUSED, pods_bound=True)
    assert NOW.then(after(0.5)) == Outcome(Requeue.AFTER, after=0.5)


def test_an_error_stays_with_the_outcome_of_the_cycle() -> None:
    e = RuntimeError("x")
    assert failed(e, forget=True).then(Outcome()).error is e
    assert failed(e).requeue is Requeue.RETRY


def _writes_of_job(tree: ast.AST) -> list[int]:
    """Lines assigning ``<something>.job`` (plain, tuple or augmented)."""
    lines = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        for t in targets:
            elts = t.elts if isinstance(t, ast.Tuple) else [t]
            lines += [e.lineno for e in elts if isinstance(e, ast.Attribute) and e.attr == "job"]
    return lines


def test_only_the_cycle_writes_a_groups_job() -> None:
    package = Path(scheduler.__file__).parent
    writers = {
        f.name
        for f in sorted(package.glob("*.py"))
        if _writes_of_job(ast.parse(f.read_text(), filename=str(f)))
    }
    assert writers == {"cycle.py"}
