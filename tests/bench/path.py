"""The real path of one pod: created -> bound on the project's API server with both of the
chart's admission webhooks, one pod at a time on free nodes.

Real Slurm (the tests' sandbox), the sandbox API server with the webhook configurations
``helm template`` renders from the chart (mutating and validating, called over TLS through
the chart's Service), the real admission server, and the scheduler and controller as the
chart's ServiceAccounts (:func:`tests.integration.webhook_harness.bridge_behind_chart_webhooks`;
they run in this process, beside the API server). Each pod is created once the previous
one is bound. Per pod (p50 and p99 over ``--pods``):

* ``create_ms``: the create call, both webhooks included (the client's view);
* ``created_to_allocated_ms``: the API server stored the pod -> the scheduler logged
  ``job_allocated`` (Slurm started the job and named its node);
* ``allocated_to_bound_ms``: ``job_allocated`` -> the API server stored the binding (the
  issue's target: <= 8 ms p50);
* ``created_to_bound_ms``: stored -> bound.

And the webhook's own time per review, from its metrics
(``slurm_bridge_admission_review_seconds``, per endpoint): ``review_mean_ms`` and the
``reviews`` it answered.

Run: ``python -m tests.bench.path [--pods 50]`` with the tests' sandbox (3 external nodes
are enough: each pod asks 1 CPU and is deleted once bound). The last line is ONE JSON
object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

import structlog

from bridge.kube.resources import PODS
from tests.bench.scheduler import Stamps, percentile
from tests.integration.bridge_harness import NS, Bridge, job_of
from tests.integration.conftest import load_sandbox
from tests.integration.webhook_harness import Webhook, bridge_behind_chart_webhooks
from tests.waiting import eventually


class LogStamps:
    """When the scheduler logged ``job_allocated`` (monotonic s), by job id; every log
    event is dropped after (the bench prints only its figures)."""

    def __init__(self) -> None:
        self.allocated: dict[int, float] = {}

    def __call__(self, _: Any, __: str, event: MutableMapping[str, Any]) -> Mapping[str, Any]:
        if event.get("event") == "job_allocated":
            self.allocated[int(event["job_id"])] = time.monotonic()
        raise structlog.DropEvent


def review_means(hook: Webhook) -> dict[str, Any]:
    """Mean time per review and reviews answered, per endpoint, from the webhook's metrics."""
    assert hook.server is not None
    sums: dict[str, float] = {}
    counts: dict[str, float] = {}
    for metric in hook.server.deps.metrics.registry.collect():
        if metric.name != "slurm_bridge_admission_review_seconds":
            continue
        for s in metric.samples:
            endpoint = s.labels.get("endpoint", "")
            if s.name.endswith("_sum"):
                sums[endpoint] = s.value
            elif s.name.endswith("_count"):
                counts[endpoint] = s.value
    return {
        e: {"reviews": int(n), "review_mean_ms": round(1000 * sums.get(e, 0.0) / n, 2)}
        for e, n in counts.items()
        if n
    }


async def one_pod(b: Bridge, stamps: Stamps, logs: LogStamps, name: str) -> dict[str, float]:
    t0 = time.monotonic()
    await b.create_pod(name, cpu="1", memory="100Mi")
    create_s = time.monotonic() - t0
    await eventually(lambda: name in stamps.bound, within=60, what=f"{name} bound", every=0.001)
    pod = await b.get_pod(name)
    job_id = job_of(pod)
    allocated = logs.allocated[job_id]
    created, bound = stamps.created[name], stamps.bound[name]
    await b.kube.delete(PODS, name, NS)
    return {
        "create_ms": 1000 * create_s,
        "created_to_allocated_ms": 1000 * (allocated - created),
        "allocated_to_bound_ms": 1000 * (bound - allocated),
        "created_to_bound_ms": 1000 * (bound - created),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    logs = LogStamps()
    structlog.configure(
        processors=[logs],
        wrapper_class=structlog.make_filtering_bound_logger(20),  # info
        cache_logger_on_first_use=False,
    )
    sb = load_sandbox()
    with tempfile.TemporaryDirectory() as tmp:
        async with bridge_behind_chart_webhooks(sb, Path(tmp)) as (b, hook):
            stamps = Stamps(b.api)
            rows = []
            for i in range(args.warmup + args.pods):
                row = await one_pod(b, stamps, logs, f"path-{i}")
                if i >= args.warmup:
                    rows.append(row)
            out: dict[str, Any] = {"pods": len(rows)}
            for key in rows[0]:
                vals = [r[key] for r in rows]
                out[f"{key}_p50"] = round(percentile(vals, 0.5), 2)
                out[f"{key}_p99"] = round(percentile(vals, 0.99), 2)
            out["webhook"] = review_means(hook)
            return out


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m tests.bench.path", description=__doc__)
    ap.add_argument("--pods", type=int, default=50, help="pods, one at a time")
    ap.add_argument("--warmup", type=int, default=3, help="pods first, not counted")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    print(json.dumps(asyncio.run(run(args))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
