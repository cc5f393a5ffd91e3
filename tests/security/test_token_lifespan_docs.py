"""Issue 30, finding 13: every place that tells an operator how to mint the bridge's Slurm
token says the same thing, a finite lifespan (the README's 604800 s) and how to rotate it.
The chart's NOTES.txt and docs/chart.md said ``lifespan=infinite``."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOLD = [
    REPO / "README.md",
    *sorted((REPO / "docs").glob("*.md")),
    REPO / "deploy" / "helm" / "slurm-bridge" / "templates" / "NOTES.txt",
    REPO / "deploy" / "helm" / "slurm-bridge" / "values.yaml",
]
MINT = re.compile(r"scontrol token [^\n`]*?lifespan=(\S+?)[\s|`)\"]")


def _mints() -> list[tuple[str, str]]:
    return [
        (str(path.relative_to(REPO)), m.group(1))
        for path in TOLD
        for m in MINT.finditer(path.read_text())
    ]


def test_every_token_command_an_operator_reads_has_the_same_finite_lifespan() -> None:
    mints = _mints()
    told = {where for where, _ in mints}
    for must in ("README.md", "docs/chart.md", "deploy/helm/slurm-bridge/templates/NOTES.txt"):
        assert must in told, f"{must} no longer shows how to mint the token"
    lifespans = {life for _, life in mints if life != "..."}
    assert lifespans == {"604800"}, mints


def test_the_chart_notes_and_docs_show_the_rotation() -> None:
    for rel in ("deploy/helm/slurm-bridge/templates/NOTES.txt", "docs/chart.md"):
        text = (REPO / rel).read_text()
        assert "kubectl apply -f -" in text, rel
        assert "rotate" in text, rel
