"""CPU time of one Slurm sandbox's own daemons (slurmctld, slurmrestd), read from /proc.

A benchmark's per-pod figure for the bridge alone hides what the machine spends on the
other side: on the 2-core build machine, slurmctld and slurmrestd take about as much CPU
per pod as the scheduler and the API server together. The daemons are those whose root
is the sandbox's chroot (``<sandbox>/sid-root``), so another sandbox's never count."""

from __future__ import annotations

import os
from pathlib import Path

DAEMONS = ("slurmctld", "slurmrestd")


def daemon_cpu_seconds(chroot: Path, proc: Path = Path("/proc")) -> dict[str, float]:
    """``{daemon: user+system seconds}`` of the daemons running in ``chroot`` now."""
    tick = os.sysconf("SC_CLK_TCK")
    want = chroot.resolve()
    out = dict.fromkeys(DAEMONS, 0.0)
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            comm = (entry / "comm").read_text().strip()
            if comm not in DAEMONS or Path(os.readlink(entry / "root")).resolve() != want:
                continue
            # fields after the ")" of comm: state is 3rd overall, utime 14th, stime 15th
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        out[comm] += (int(fields[11]) + int(fields[12])) / tick
    return out


def per_pod_ms(before: dict[str, float], after: dict[str, float], pods: int) -> dict[str, float]:
    return {k: round(1000 * (after[k] - before.get(k, 0.0)) / max(pods, 1), 2) for k in after}
