"""Splitting a list on the commas that are not inside parentheses (label selectors'
``in (a,b)``, Slurm's ``gpu:a100:2(S:0-1),gpu:1(IDX:0,1)``)."""

from __future__ import annotations


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """The non-blank parts of ``text`` between the ``sep`` that are outside parentheses
    (unstripped)."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p for p in parts if p.strip()]
