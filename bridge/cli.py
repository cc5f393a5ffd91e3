"""The ``slurm-bridge`` command.

    slurm-bridge version
    slurm-bridge config check FILE
    slurm-bridge status [-n NS | -A] [-o wide|json] [--watch]   (workloads beside Slurm jobs)
    slurm-bridge why [-o json] NAMESPACE/POD                    (why a pod waits, in words)
    slurm-bridge sandbox slurm up|down|status ...   (real Slurm in a chroot, for tests/demo)
    slurm-bridge sandbox kube-api up|down|status|finish-pod ...  (sandbox Kubernetes API)
    slurm-bridge sandbox demo up|down|status          (the README's demo)
    slurm-bridge sandbox workloads --kubeconfig FILE  (Job/JobSet/LWS controllers' stand-in)
    slurm-bridge scheduler|controller|admission --config FILE

Components are found by module name at run time (``<component>.app:main``) so that the
shared core never imports a component: import-linter enforces that direction.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from typing import cast

from bridge import __version__
from bridge.config import load_config
from bridge.errors import ConfigError

# subcommand -> "module:function" taking the remaining argv and returning an exit code
_DELEGATES = {
    ("scheduler",): "scheduler.app:main",
    ("controller",): "controller.app:main",
    ("admission",): "admission.app:main",
}
# `slurm-bridge sandbox NAME ...`: the sandbox is its own distribution (slurm-bridge-sandbox,
# sandbox/pyproject.toml); it declares its commands as entry points of this group.
SANDBOX_GROUP = "slurm_bridge.sandbox"
SANDBOX_COMMANDS = ("slurm", "kube-api", "demo", "workloads")
SANDBOX_MISSING = "the sandbox is not installed: pip install ./sandbox (deploy/setup.sh does)"


def _delegate(target: str, argv: Sequence[str]) -> int:
    module_name, func_name = target.split(":")
    func = cast(
        Callable[[list[str]], int], getattr(importlib.import_module(module_name), func_name)
    )
    return func(list(argv))


def _sandbox(name: str, argv: Sequence[str]) -> int:
    found = entry_points(group=SANDBOX_GROUP, name=name)
    if not found:
        print(f"slurm-bridge sandbox {name}: {SANDBOX_MISSING}", file=sys.stderr)
        return 2
    func = cast(Callable[[list[str]], int], next(iter(found)).load())
    return func(list(argv))


def _config_check(path: str) -> int:
    try:
        cfg = load_config(path)
    except ConfigError as e:
        n = len(e.problems)
        print(f"invalid: {path}: {n} error{'s' if n > 1 else ''}", file=sys.stderr)
        for key, reason in e.problems:
            print(f"  {key}: {reason}", file=sys.stderr)
        return 1
    print(f"ok: {path} (schedulerName={cfg.scheduler_name}, slurmRestApi={cfg.slurm_rest_api})")
    return 0


def main(argv: Sequence[str] | None = None, prog: str = "slurm-bridge") -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["status"]:
        from bridge.status.cli import main as status_main

        return status_main(args[1:], prog=f"{prog} status")
    if args[:1] == ["why"]:
        from bridge.status.cli import why_main

        return why_main(args[1:], prog=f"{prog} why")
    for prefix, target in _DELEGATES.items():
        if tuple(args[: len(prefix)]) == prefix:
            return _delegate(target, args[len(prefix) :])
    if args[:1] == ["sandbox"] and args[1:2] and args[1] in SANDBOX_COMMANDS:
        return _sandbox(args[1], args[2:])

    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("version", help="print the version")
    cfg = sub.add_parser("config", help="configuration tools")
    cfg_sub = cfg.add_subparsers(dest="config_command", required=True)
    check = cfg_sub.add_parser("check", help="validate a config file (and env overrides)")
    check.add_argument("file")
    sandbox = sub.add_parser("sandbox", help="local sandboxes: slurm, kube-api")
    sandbox.add_argument("which", choices=SANDBOX_COMMANDS)
    for name in ("scheduler", "controller", "admission"):
        sub.add_parser(name, help=f"run the {name} (--config FILE)")
    sub.add_parser("status", help="workloads beside their Slurm jobs (-n NS | -A, -o, --watch)")
    sub.add_parser("why", help="why a pod waits, from Slurm's facts (NAMESPACE/POD, -o json)")

    ns = parser.parse_args(args)
    if ns.command == "version":
        print(f"slurm-bridge {__version__}")
        return 0
    if ns.command == "config":
        return _config_check(ns.file)
    parser.print_help()
    return 2


def kubectl_main() -> int:
    """``kubectl-slurm_bridge``: kubectl runs it for ``kubectl slurm-bridge ARGS``."""
    return main(prog="kubectl slurm-bridge")


if __name__ == "__main__":
    sys.exit(main())
