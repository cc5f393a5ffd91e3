"""A Slurm sandbox with a network topology, for the topology e2e tests and benchmark.

``slurm-bridge sandbox slurm up --nodes 1 --external-nodes 8 --topology tree:2x4``: eight
external nodes ``kube-node-[0-7]`` under two leaf switches ``leaf-0`` (nodes 0-3) and
``leaf-1`` (4-7) of one spine, ``max_switch_wait`` a day. It runs in its OWN dir (the
tests' sandbox dir + ``-topology``) on its own ports (the sandbox's + 40), so it never
touches the cluster the other tests share; the root comes from the tests' sandbox's cached
tarball when there is one (a hard link: no 60 s debootstrap).

:func:`topology_sandbox` uses the sandbox ``SLURM_SANDBOX_TOPOLOGY_ENV`` or
``SLURM_SANDBOX_ENV`` names when that is a ``--topology tree:2x4`` sandbox (its env file
says ``SLURM_TOPOLOGY=tree:2x4``), else starts and, at the end, stops its own.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

from sandbox.slurm.launcher import (
    ENV_DIR,
    ENV_FILE,
    PORT_ENV,
    TEST_PORTS,
    Paths,
    env_for_tests,
    parse_env_file,
)

ENV_TOPOLOGY = "SLURM_SANDBOX_TOPOLOGY_ENV"
TOPOLOGY = "tree:2x4"
LEAF_SIZE = 4
PORT_OFFSET = 40


def leaf_of(node: str) -> int:
    """The leaf switch of ``kube-node-<i>`` in the tree:2x4 sandbox."""
    return int(node.rsplit("-", 1)[1]) // LEAF_SIZE


def _base(environ: Mapping[str, str]) -> tuple[Path, dict[str, int]]:
    """The tests' sandbox dir and ports, which the topology sandbox's are derived from."""
    test = {**environ, **env_for_tests(environ)}
    ports = {k: int(test.get(k) or TEST_PORTS[k]) for k in PORT_ENV}
    return Paths.from_env(test).dir, ports


def _cli(env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bridge", "sandbox", "slurm", *args],
        env=dict(env),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


@contextlib.contextmanager
def topology_sandbox(
    environ: Mapping[str, str] | None = None, topology: str = TOPOLOGY
) -> Iterator[Path]:
    """The env file of a ``topology`` (default tree:2x4) sandbox: one the environment
    names, else one of its own, started here and stopped on exit (RuntimeError with
    Slurm's output if it fails). Every topology shares the one dir and ports: one at a
    time (``up`` with another topology reconfigures it)."""
    env = dict(os.environ if environ is None else environ)
    for given in (env.get(ENV_TOPOLOGY), env.get(ENV_FILE)):
        if given and Path(given).is_file() and topology_of(Path(given)) == topology:
            yield Path(given)
            return
    with own_sandbox(
        env,
        "-topology",
        PORT_OFFSET,
        ("--nodes", "1", "--external-nodes", "8", "--node-gpus", "0", "--topology", topology),
    ) as env_file:
        yield env_file


@contextlib.contextmanager
def own_sandbox(
    env: Mapping[str, str], suffix: str, port_offset: int, up_args: tuple[str, ...]
) -> Iterator[Path]:
    """A sandbox of its own for a test or benchmark: the tests' sandbox dir + ``suffix``,
    their ports + ``port_offset``, ``up --defaults`` with ``up_args``; its root from the
    tests' sandbox's cached tarball when there is one (a hard link: no debootstrap).
    Started here, stopped on exit; RuntimeError with Slurm's output if it fails."""
    base_dir, ports = _base(env)
    own = base_dir.with_name(base_dir.name + suffix)
    cached = base_dir / "cache" / "sid-root.tar.zst"
    mine = own / "cache" / cached.name
    if cached.is_file() and not mine.exists():
        mine.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(cached, mine)
        except OSError:
            shutil.copyfile(cached, mine)
    run_env = {k: v for k, v in env.items() if k not in PORT_ENV and k != ENV_FILE}
    run_env[ENV_DIR] = str(own)
    run_env.update({k: str(p + port_offset) for k, p in ports.items()})
    up = _cli(run_env, "up", "--defaults", *up_args)
    if up.returncode != 0:
        raise RuntimeError(f"sandbox {own} did not start: {up.stderr[-2000:]}")
    try:
        yield own / "cluster.env"
    finally:
        _cli(run_env, "down")


def topology_of(env_file: Path) -> str:
    """The ``--topology`` of the sandbox behind ``env_file`` ("" when it has none)."""
    return parse_env_file(env_file.read_text()).get("SLURM_TOPOLOGY", "")
