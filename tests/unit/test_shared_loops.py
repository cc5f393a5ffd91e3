"""The loops both components need live once in bridge/: no component lists-then-watches
(bridge.kube.watch.list_then_watch), runs a worker loop (bridge.workqueue.run_worker) or
paces a Slurm poller (bridge.clock.PollPace) of its own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMPONENTS = ("scheduler", "controller", "admission")

# what a component would write to do it again itself
OWN = {
    "list-then-watch": re.compile(r"\.relist\("),
    "worker loop": re.compile(r"queue\.get\("),
    "poll pacing": re.compile(r"\bidle_(backoff|cap)\("),
}


@pytest.mark.parametrize("what", sorted(OWN))
def test_no_component_writes_its_own(what: str) -> None:
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for component in COMPONENTS
        for path in sorted((ROOT / component).rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if OWN[what].search(line)
    ]
    assert found == [], f"{what} outside bridge/: {found}"
