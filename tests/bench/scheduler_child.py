"""The scheduler as the benchmarks run it: ``run_scheduler`` (as ``slurm-bridge scheduler``
wires it, without ops/leader) with a Slurm client that counts its requests, printing a
report line (``BENCH {json}``) every 0.2 s once its initial lists are in.

It imports the product and nothing of the tests (no sandbox, no test helpers), so a
restart measured through it pays what ``slurm-bridge scheduler`` pays at start-up, and it
runs against ANY tree's code: ``python -P tests/bench/scheduler_child.py --config FILE``
with that tree's interpreter (``-P``: the script's own directory is not put first on
``sys.path``, so ``bridge`` and ``scheduler`` come from the interpreter's install; the
paired restarts of :mod:`tests.bench.scale` run an older commit's scheduler this way).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import importlib
import json
import os
import signal
import time
from collections import Counter
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from bridge.clock import SystemClock
from bridge.config import load_config
from bridge.kube.client import KubeClient
from bridge.logging import configure_logging
from bridge.slurm.client import SlurmClient
from scheduler.app import run_scheduler

try:
    from scheduler.cycle import Scheduler
except ImportError:  # an older tree's (87f2bfe): the scheduler was scheduler.core's
    Scheduler = importlib.import_module("scheduler.core").Scheduler

LINE = "BENCH "  # prefix of the children's report lines on stdout
CPROFILE_ENV = "SLURM_BRIDGE_BENCH_CPROFILE"  # the scheduler child profiles into this file


class CountingSlurmClient(SlurmClient):
    """Counts every HTTP exchange with slurmrestd (retries and streamed whole-table reads
    included: every request goes through ``_send``), by endpoint. (An older tree's
    whole-table reads, e.g. 87f2bfe's, bypassed ``_send``: not counted there.)"""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: Counter[str] = Counter()
        self.seconds: Counter[str] = Counter()

    async def _send(self, method: str, path: str, *, endpoint: str, **kw: Any) -> Any:
        self.calls[endpoint] += 1
        started = time.monotonic()
        try:
            return await super()._send(method, path, endpoint=endpoint, **kw)
        finally:
            self.seconds[endpoint] += time.monotonic() - started


def report(**data: Any) -> None:
    print(LINE + json.dumps(data), flush=True)


def cprofile_on_signals(out: Path) -> None:
    """SIGUSR1 starts a cProfile of this process (CPU time, not wall time); SIGUSR2 stops it
    and writes its stats to ``out`` (``python -m pstats FILE``)."""
    prof = cProfile.Profile(time.process_time)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR1, prof.enable)

    def stop() -> None:
        prof.disable()
        prof.dump_stats(str(out))

    loop.add_signal_handler(signal.SIGUSR2, stop)


async def scheduler_child(config: Path) -> None:
    """The scheduler + its report every 0.2 s: slurmrestd requests and their time by
    endpoint, jobs allocated/refused/submitted, CPU seconds."""
    if os.environ.get(CPROFILE_ENV):
        cprofile_on_signals(Path(os.environ[CPROFILE_ENV]))
    # env={}: SLURM_BRIDGE_SANDBOX_DIR (the sandbox CLI's) is no config override.
    cfg = load_config(config, env={})
    configure_logging(cfg.log_level, cfg.log_format)
    kube = await KubeClient.from_config(cfg)
    async with kube, CountingSlurmClient.from_config(cfg) as slurm:
        sched = Scheduler(cfg, kube, slurm, SystemClock())
        ready = asyncio.Event()
        task = asyncio.create_task(run_scheduler(cfg, kube, slurm, ready=ready, scheduler=sched))
        waiter = asyncio.create_task(ready.wait())
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()
        m = sched.metrics
        while True:
            cpu = os.times()
            report(
                ready=True,
                allocated=m.jobs_allocated._value.get(),
                refused=m.allocations_refused._value.get(),
                submitted=m.jobs_submitted._value.get(),
                calls=dict(slurm.calls),
                seconds=dict(slurm.seconds),
                cpu=cpu.user + cpu.system,
                t=time.monotonic(),
            )
            await asyncio.sleep(0.2)
            if task.done():
                task.result()


def run_as_the_scheduler(main: Coroutine[Any, Any, None]) -> None:
    """Run ``main`` as ``slurm-bridge scheduler`` runs its loop (``bridge.loops.run``), or,
    in an older tree without it (no ``bridge.loops`` before uvloop), with ``asyncio.run``."""
    try:
        loops = importlib.import_module("bridge.loops")
    except ImportError:
        loops = None
    getattr(loops, "run", asyncio.run)(main)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tests/bench/scheduler_child.py", description=__doc__)
    ap.add_argument("--config", type=Path, required=True, help="the scheduler's config file")
    args = ap.parse_args(argv)
    run_as_the_scheduler(scheduler_child(args.config))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
