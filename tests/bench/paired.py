"""Paired cost of a pod: an older commit and this checkout, alternating on ONE sandbox.

On a shared machine the absolute figures of :mod:`tests.bench.scheduler` move with the
load; two runs next to each other see about the same load, so their RATIOS are what a
change is judged by (docs/benchmarks.md, "Paired"). This script:

1. makes a git worktree of ``--base`` (detached, under ``--trees``) with a virtualenv of
   its own (``pip install -e .[test]``; kept for the next run);
2. runs this checkout's ``python -m tests.bench.scheduler`` ``--reps`` times per side,
   alternating: base, new, new, base, base, new... (each pair's order flips, so neither
   side always runs on a warmer sandbox); the base side runs the base's scheduler (its
   tree, its interpreter) under this bench, so the API server, the harness and Slurm are
   the same on both sides and only the scheduler differs (``--own-benches``: each tree's
   own bench instead; see docs/benchmarks.md, "The 256-pod gang", for why that is not the
   default);
3. prints per pair the scheduler CPU per pod, pods/s, the gang time and the pending pods'
   CPU and time to show Slurm's reason of both sides and their ratios (new / base), then
   the median ratio of each.

Both sides use the sandbox the environment names (``SLURM_SANDBOX_ENV``), e.g. one made
with ``slurm-bridge sandbox slurm up --external-nodes 64 --node-cpus 64``.

Run: ``python -m tests.bench.paired --base 87f2bfe --reps 5 [-- --pods 1000 --gang 256
--pending 2000]``. The last line is ONE JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DEFAULT_BENCH = ["--pods", "1000", "--gang", "256", "--pending", "2000"]
# figures compared: (key in the bench's JSON, better when higher); the last two are the
# pending pods' path (the steady phase: created -> Slurm's reason shown)
FIGURES = (
    ("cpu_ms_per_pod", False),
    ("pods_per_s", True),
    ("gang_s", False),
    ("pending_cpu_ms_per_pod", False),
    ("pending_reasons_s", False),
)
# the bench's options that older commits' benches lack: left out on their side
NEWER_OPTIONS = (
    "--gang-reps",
    "--gang-pause",
    "--scheduler-log",
    "--scheduler-python",
    "--scheduler-chart",
    "--scheduler-identity",
    "--api-server",
)


class BenchFailed(Exception):
    """One run of the bench ended without its figures."""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def base_tree(base: str, trees: Path) -> tuple[Path, Path]:
    """A worktree of ``base`` with its own venv: (tree, its python). Reused when present."""
    sha = git("rev-parse", "--verify", f"{base}^{{commit}}")
    tree = trees / sha[:12]
    if not (tree / ".git").exists():
        trees.mkdir(parents=True, exist_ok=True)
        log(f"# worktree of {sha[:12]} in {tree}")
        git("worktree", "add", "--detach", str(tree), sha)
    python = tree / ".venv" / "bin" / "python"
    ready = tree / ".venv" / ".paired-ready"
    if not ready.exists():
        log(f"# its virtualenv ({tree / '.venv'}; a minute or two)")
        subprocess.run([sys.executable, "-m", "venv", str(tree / ".venv")], check=True)
        pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        subprocess.run([*pip, "-e", f"{tree}[test]"], check=True)
        ready.touch()
    return tree, python


def known_args(tree: Path, bench_args: list[str]) -> list[str]:
    """``bench_args`` without the options ``tree``'s bench does not know yet (an older
    commit's bench has no ``--gang-reps``: it runs one gang)."""
    source = (tree / "tests" / "bench" / "scheduler.py").read_text()
    out: list[str] = []
    skip = False
    for arg in bench_args:
        if skip:
            skip = False
            continue
        flag = arg.split("=", 1)[0]
        if flag in NEWER_OPTIONS and f'"{flag}"' not in source:
            skip = "=" not in arg  # its value is the next argument
            continue
        out.append(arg)
    return out


def run_bench(
    tree: Path, python: Path, bench_args: list[str], scheduler_python: Path | None = None
) -> dict[str, Any]:
    """One run of ``tests.bench.scheduler`` in ``tree``: its last line, parsed.
    ``scheduler_python``: the scheduler of the tree that interpreter comes from, under
    ``tree``'s bench (the base side, unless ``--own-benches``)."""
    env = dict(os.environ)
    env["PATH"] = f"{python.parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PYTHONPATH", None)
    extra = []
    if scheduler_python is not None:
        # that tree's scheduler, with that tree's RBAC (<tree>/.venv/bin/python)
        chart = scheduler_python.parents[2] / "deploy" / "helm" / "slurm-bridge"
        extra = ["--scheduler-python", str(scheduler_python), "--scheduler-chart", str(chart)]
    proc = subprocess.run(
        [str(python), "-m", "tests.bench.scheduler", *known_args(tree, bench_args), *extra],
        cwd=tree,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        check=False,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise BenchFailed(f"the bench in {tree} failed (exit {proc.returncode})")
    out: dict[str, Any] = json.loads(lines[-1])
    gang = next((v for k, v in out.items() if is_gang(k, "_s") and not is_gang(k, "_reps_s")), None)
    out["gang_s"] = gang
    return out


def is_gang(key: str, suffix: str) -> bool:
    """``gang_<size><suffix>``: the bench names its gang figures by the gang's size."""
    return key.startswith("gang_") and key.endswith(suffix)


def gang_times(out: dict[str, Any]) -> list[float]:
    """Each gang one run of the bench timed: ``gang_N_reps_s`` (``--gang-reps``), else its
    one ``gang_N_s``."""
    reps = next(
        (v for k, v in out.items() if k.startswith("gang_") and k.endswith("_reps_s")), None
    )
    if isinstance(reps, list):
        return [float(x) for x in reps]
    return [] if out.get("gang_s") is None else [float(out["gang_s"])]


def ratios(base: dict[str, Any], new: dict[str, Any]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for key, _ in FIGURES:
        b, n = base.get(key), new.get(key)
        out[key] = round(n / b, 3) if isinstance(b, int | float) and b and n is not None else None
    return out


def fmt(base: dict[str, Any], new: dict[str, Any], r: dict[str, float | None]) -> str:
    cols = [f"{key} {new.get(key)} / {base.get(key)} = {r[key]}" for key, _ in FIGURES]
    return " | ".join(cols)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m tests.bench.paired", description=__doc__)
    ap.add_argument("--base", default="87f2bfe", help="the older commit (default 87f2bfe)")
    ap.add_argument("--reps", type=int, default=3, help="pairs to run")
    ap.add_argument(
        "--trees",
        type=Path,
        default=Path.home() / ".cache" / "slurm-bridge" / "paired",
        help="where the base's worktree and venv live (kept between runs)",
    )
    ap.add_argument(
        "--one-bench",
        action="store_true",
        help="both sides run this checkout's bench (API server, pod creators, phases: "
        "--gang-reps for both), the base side with the base's scheduler: the default "
        "(the controlled comparison: docs/benchmarks.md, 'The 256-pod gang')",
    )
    ap.add_argument(
        "--own-benches",
        action="store_true",
        help="each side runs its own tree's bench (the base's sandbox API server, its "
        "identity and its phases: an older bench times one gang)",
    )
    ap.add_argument("bench", nargs="*", help="after --: the scheduler bench's arguments")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    bench_args = args.bench or DEFAULT_BENCH
    tree, python = base_tree(args.base, args.trees)
    sides: dict[str, tuple[Path, Path, Path | None]] = {
        "base": (tree, python, None),
        "new": (REPO, Path(sys.executable), None),
    }
    one_bench = not args.own_benches
    if one_bench:  # this checkout's bench for both, the base's scheduler under it
        sides["base"] = (REPO, Path(sys.executable), python)
    pairs: list[dict[str, Any]] = []
    for i in range(args.reps):
        order = ("base", "new") if i % 2 == 0 else ("new", "base")
        got: dict[str, dict[str, Any]] = {}
        try:
            for side in order:
                log(f"# pair {i + 1}/{args.reps}: {side}")
                tree_of, python_of, scheduler_of = sides[side]
                got[side] = run_bench(tree_of, python_of, bench_args, scheduler_of)
        except BenchFailed as e:
            log(f"pair {i + 1} left out: {e}")  # a pair is both sides or nothing
            continue
        r = ratios(got["base"], got["new"])
        log(f"pair {i + 1} (new / base): {fmt(got['base'], got['new'], r)}")
        pairs.append({"order": list(order), "base": got["base"], "new": got["new"], "ratio": r})
    medians: dict[str, float | None] = {}
    for key, _ in FIGURES:
        vals = [p["ratio"][key] for p in pairs if p["ratio"][key] is not None]
        medians[key] = round(statistics.median(vals), 3) if vals else None
    log("median ratios (new / base): " + ", ".join(f"{k} {v}" for k, v in medians.items()))
    # every gang of each side, pooled (a bench with --gang-reps times several per run)
    gangs = {s: [g for p in pairs for g in gang_times(p[s])] for s in ("base", "new")}
    pooled = {s: round(statistics.median(v), 3) if v else None for s, v in gangs.items()}
    if pooled["base"] and pooled["new"]:
        pooled["ratio"] = round(pooled["new"] / pooled["base"], 3)
    log(f"gangs pooled: {gangs}; medians {pooled}")
    summary = {
        "base": args.base,
        "new": git("rev-parse", "--short", "HEAD"),
        "one_bench": one_bench,
        "bench": bench_args,
        "pairs": [
            {
                "order": p["order"],
                "ratio": p["ratio"],
                **{f"{s}_{k}": p[s].get(k) for s in ("base", "new") for k, _ in FIGURES},
            }
            for p in pairs
        ],
        "median_ratio": medians,
        "gangs": gangs,
        "gang_pooled_median": pooled,
    }
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
