"""``slurm-bridge status``: which Kubernetes workload is which Slurm job, and why it waits;
``slurm-bridge why``: why one pod waits, in words.

    slurm-bridge status [--config FILE] [-n NS | -A] [-o wide|json] [--watch [--interval S]]
    slurm-bridge why [--config FILE] [-o json] NAMESPACE/POD
    kubectl slurm-bridge status|why ...      (the same, as the kubectl plugin)

Reads the same config file (and ``SLURM_BRIDGE_*`` overrides) as the components: the
slurmrestd URL and token, ``kubeconfig``, ``schedulerName``, ``mcsLabel``. Without ``-n`` or
``-A`` it shows the kubeconfig context's namespace (``default`` when it names none).

Cost, whatever the number of groups: ONE pod list (``fieldSelector=spec.schedulerName=...``,
paged by 500) and ONE ``GET /jobs/`` (plus ``GET /openapi/v3`` once with
``slurmApiVersion: auto``). ``/jobs/`` is needed anyway: the reasons, nodes and
``admin_comment`` back-links of every job are only there, and the jobs whose pods are all
gone can only be found by reading every job's ``admin_comment``. ``GET /jobs/state/`` has
states only, and a ``GET /job/{id}`` per group would cost one call per group.

If either side cannot be read, the other side is still shown, the error is printed on
stderr naming the side and why, and the exit code is 1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO, cast

import yaml

from bridge.clock import Clock, SystemClock
from bridge.config import BridgeConfig, load_config
from bridge.errors import BridgeError, ConfigError, SlurmNotFound
from bridge.kube.client import KubeClient
from bridge.logging import configure_logging
from bridge.slurm.client import SlurmClient
from bridge.slurm.models import SlurmJob, SlurmReservation, fold_hetjobs
from bridge.status.limits import Accounting, limit_of
from bridge.status.view import Output, Report, build, render
from bridge.status.why import Explanation, WhyOutput, explain, find_job
from bridge.status.why import render as render_why
from bridge.translate import kobj, parse_admin_comment
from bridge.translate.settings import TranslateSettings

DEFAULT_INTERVAL = 2.0


@dataclass(frozen=True)
class Scope:
    namespace: str | None  # None: every namespace


async def read_pods(kube: KubeClient, cfg: BridgeConfig, scope: Scope) -> list[dict[str, Any]]:
    """The bridge's pods: one list, selected by our scheduler name on the server."""
    listed = await kube.list_pods(
        scope.namespace, field_selector=f"spec.schedulerName={cfg.scheduler_name}"
    )
    return listed.items


async def read_jobs(slurm: SlurmClient) -> tuple[SlurmJob, ...]:
    """Slurm's job table, streamed: only jobs with the bridge's admin_comment back-link are
    kept (the report needs no other), so memory follows the bridge's jobs, not the table."""
    return await slurm.scan_jobs(lambda job: parse_admin_comment(job.admin_comment) is not None)


async def snapshot(
    cfg: BridgeConfig,
    kube: KubeClient | BridgeError,
    slurm: SlurmClient,
    scope: Scope,
    clock: Clock,
) -> Report:
    """Read both sides at the same time and join them; a side that fails is None.

    ``kube`` is the connection error when the kubeconfig could not even be loaded."""
    errors: list[str] = []

    async def pods() -> list[dict[str, Any]] | None:
        if isinstance(kube, BridgeError):
            errors.append(f"Kubernetes: {kube}")
            return None
        try:
            return await read_pods(kube, cfg, scope)
        except BridgeError as e:
            errors.append(f"Kubernetes: cannot list pods: {e}")
            return None

    async def jobs() -> tuple[SlurmJob, ...] | None:
        try:
            return await read_jobs(slurm)
        except BridgeError as e:
            errors.append(f"Slurm ({cfg.slurm_rest_api}): cannot list jobs: {e}")
            return None

    listed_pods, listed_jobs = await asyncio.gather(pods(), jobs())
    return build(
        listed_pods,
        listed_jobs,
        now=clock.now(),
        namespace=scope.namespace,
        mcs_label=cfg.mcs_label,
        settings=TranslateSettings.from_config(cfg),
        errors=sorted(errors),
    )


def context_namespace(cfg: BridgeConfig, environ: Mapping[str, str]) -> str:
    """The kubeconfig context's namespace, as kubectl picks it (``cfg.kubeconfig``, else
    ``$KUBECONFIG``'s first file, else ``~/.kube/config``); ``default`` when none is named."""
    if cfg.kubeconfig is not None:
        path = Path(cfg.kubeconfig)
    elif environ.get("KUBECONFIG"):
        path = Path(environ["KUBECONFIG"].split(os.pathsep)[0])
    else:
        path = Path.home() / ".kube" / "config"
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return "default"
    current = kobj.text(doc, "current-context")
    for ctx in kobj.sequence(doc, "contexts"):
        if kobj.text(ctx, "name") == current:
            return kobj.text(ctx, "context", "namespace") or "default"
    return "default"


def parser(prog: str = "slurm-bridge status") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Kubernetes workloads of the bridge beside their Slurm jobs.",
    )
    p.add_argument("--config", default=None, help="the bridge's YAML config file")
    where = p.add_mutually_exclusive_group()
    where.add_argument("-n", "--namespace", default=None, help="only this namespace")
    where.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    p.add_argument("-o", "--output", choices=["wide", "json"], default=None, help="wide or json")
    p.add_argument("-w", "--watch", action="store_true", help="show it again every --interval")
    p.add_argument(
        "--interval",
        type=float,
        default=DEFAULT_INTERVAL,
        help=f"seconds between two reads with --watch (default {DEFAULT_INTERVAL:g})",
    )
    return p


async def run(
    cfg: BridgeConfig,
    *,
    namespace: str | None,
    all_namespaces: bool,
    output: Output,
    watch: bool = False,
    interval: float = DEFAULT_INTERVAL,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
    clock: Clock | None = None,
    kube: KubeClient | None = None,
    slurm: SlurmClient | None = None,
    rounds: int | None = None,
) -> int:
    """Show the status once (or every ``interval`` with ``watch``, ``rounds`` times when
    given). Exit code 1 when the last read had an error. Clients may be injected."""
    clock = clock or SystemClock()
    own_kube = kube is None
    kube_or_error: KubeClient | BridgeError
    if kube is None:
        try:
            kube_or_error = await KubeClient.from_config(cfg, clock=clock)
        except ConfigError as e:
            kube_or_error = e
    else:
        kube_or_error = kube
    own_slurm = slurm is None
    slurm = slurm or SlurmClient.from_config(cfg, clock=clock)
    scope = Scope(None if all_namespaces else namespace or context_namespace(cfg, os.environ))
    code = 0
    try:
        done = 0
        while True:
            report = await snapshot(cfg, kube_or_error, slurm, scope, clock)
            if watch and done and out.isatty():
                out.write("\x1b[H\x1b[2J")  # clear the terminal, as watch(1) does
            elif watch and done:
                out.write("\n")
            out.write(render(report, output) + "\n")
            out.flush()
            for problem in report.errors:
                print(f"error: {problem}", file=err, flush=True)
            code = 1 if report.errors else 0
            done += 1
            if not watch or (rounds is not None and done >= rounds):
                return code
            await clock.sleep(interval)
    finally:
        if own_slurm:
            await slurm.close()
        if own_kube and isinstance(kube_or_error, KubeClient):
            await kube_or_error.close()


def main(argv: Sequence[str], prog: str = "slurm-bridge status") -> int:
    ns = parser(prog).parse_args(list(argv))
    if ns.interval <= 0:
        print(f"{prog}: --interval must be > 0", file=sys.stderr)
        return 2
    try:
        cfg = load_config(ns.config)
    except ConfigError as e:
        print(f"invalid configuration: {e}", file=sys.stderr)
        return 2
    output = cast(Output, ns.output or "table")
    # stdout is the report: the clients' own log lines go to stderr, warnings only
    configure_logging("warning", "console")
    try:
        return asyncio.run(
            run(
                cfg,
                namespace=ns.namespace,
                all_namespaces=ns.all_namespaces,
                output=output,
                watch=ns.watch,
                interval=ns.interval,
            )
        )
    except KeyboardInterrupt:
        return 130


# --------------------------------------------------------------------------- why
async def why(
    cfg: BridgeConfig,
    kube: KubeClient,
    slurm: SlurmClient,
    namespace: str,
    name: str,
    now: datetime,
) -> Explanation:
    """Why ``namespace/name`` waits: the pod, Slurm's active jobs (one streamed
    ``GET /jobs/``) and nodes (one ``GET /nodes/``), read at once; then what its reason
    needs (:func:`reads_for`): slurmdbd's QOS and associations for a limit, Slurm's
    reservations for a reservation or unavailable nodes; then explained."""
    pod, jobs, nodes = await asyncio.gather(
        kube.get_pod(namespace, name),
        # in a version whose records say which jobs asked whole nodes (the bridge's plan)
        slurm.scan_jobs(lambda j: j.state.active, sharing=True),
        slurm.list_nodes(),
    )
    listed = fold_hetjobs(jobs)
    job = find_job(pod, listed, cfg.mcs_label)
    accounting, reservations = await reads_for(slurm, job)
    return explain(
        pod,
        job,
        listed,
        nodes,
        now=now,
        names_others=cfg.why_names_other_jobs,
        accounting=accounting,
        reservations=reservations,
    )


async def reads_for(
    slurm: SlurmClient, job: SlurmJob | None
) -> tuple[Accounting | None, tuple[SlurmReservation, ...] | None]:
    """What the waiting job's reason needs beyond its jobs and nodes (None: not needed):
    slurmdbd's QOS and associations for a QOS or association limit (one ``GET`` each; an
    error, such as no accounting, is kept to be said), Slurm's reservations for a job in
    or waiting for a reservation, or for unavailable nodes (one ``GET /reservations/``)."""
    if job is None:
        return None, None
    waiting = next((c for c in job.components if c.state.primary != "RUNNING"), job)
    if waiting.state.primary != "PENDING":
        return None, None
    reason = waiting.state_reason
    accounting: Accounting | None = None
    reservations: tuple[SlurmReservation, ...] | None = None
    if limit_of(reason) is not None:
        try:
            qos, assocs = await asyncio.gather(slurm.list_qos(), slurm.list_associations())
            accounting = Accounting(qos, assocs)
        except SlurmNotFound:
            accounting = Accounting(error="slurmrestd serves no slurmdbd endpoints: no accounting")
        except BridgeError as e:
            accounting = Accounting(error=f"slurmdbd: {e}")
    if waiting.reservation or reason.startswith(("Reservation", "Resv", "ReqNodeNotAvail")):
        reservations = await slurm.list_reservations()
    return accounting, reservations


def why_parser(prog: str = "slurm-bridge why") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Why a pod waits, from Slurm's facts.")
    p.add_argument("pod", help="NAMESPACE/POD (or POD, in the kubeconfig context's namespace)")
    p.add_argument("--config", default=None, help="the bridge's YAML config file")
    p.add_argument("-o", "--output", choices=["json"], default=None, help="json")
    return p


async def run_why(
    cfg: BridgeConfig,
    target: str,
    output: WhyOutput,
    *,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
    clock: Clock | None = None,
    kube: KubeClient | None = None,
    slurm: SlurmClient | None = None,
) -> int:
    """Print why the pod ``target`` (``ns/name``) waits; exit code 1 when a side could not
    be read (said on stderr). Clients may be injected."""
    clock = clock or SystemClock()
    namespace, _, name = target.rpartition("/")
    namespace = namespace or context_namespace(cfg, os.environ)
    own_kube, own_slurm = kube is None, slurm is None
    try:
        kube = kube or await KubeClient.from_config(cfg, clock=clock)
        slurm = slurm or SlurmClient.from_config(cfg, clock=clock)
        said = await why(cfg, kube, slurm, namespace, name, clock.now())
    except BridgeError as e:
        print(f"error: {namespace}/{name}: {e}", file=err, flush=True)
        return 1
    finally:
        if own_slurm and slurm is not None:
            await slurm.close()
        if own_kube and kube is not None:
            await kube.close()
    out.write(render_why(said, output) + "\n")
    return 0


def why_main(argv: Sequence[str], prog: str = "slurm-bridge why") -> int:
    ns = why_parser(prog).parse_args(list(argv))
    try:
        cfg = load_config(ns.config)
    except ConfigError as e:
        print(f"invalid configuration: {e}", file=sys.stderr)
        return 2
    configure_logging("warning", "console")
    output = cast(WhyOutput, ns.output or "text")
    try:
        return asyncio.run(run_why(cfg, ns.pod, output))
    except KeyboardInterrupt:
        return 130
