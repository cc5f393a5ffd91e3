"""A Slurm sandbox with MIG-sliced GPUs on external nodes, for the fractional-GPU e2e tests.

``slurm-bridge sandbox slurm up --nodes 1 --external-nodes 0 --node-gpus 0 --mig-nodes 1``:
one State=EXTERNAL node ``mig-node-0`` whose one GPU is seven ``1g.10gb`` slices
(``Gres=gpu:1g.10gb:7``, gres.conf ``Type=1g.10gb File=/var/lib/fakegpu/mig[0-6]``), alone
in the placeholder partition. It runs in its OWN dir (the tests' sandbox dir + ``-mig``) on
its own ports (the sandbox's + 50), so whole-GPU and CPU-only jobs of the other tests never
land on a slice; :func:`mig_sandbox` uses the sandbox ``SLURM_SANDBOX_MIG_ENV`` or
``SLURM_SANDBOX_ENV`` names when that one has MIG nodes (``SLURM_MIG_NODES`` in its env
file), else starts and, at the end, stops its own.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from sandbox.slurm.launcher import ENV_FILE, parse_env_file
from tests.topology_sandbox import own_sandbox

ENV_MIG = "SLURM_SANDBOX_MIG_ENV"
PORT_OFFSET = 50
UP_ARGS = ("--nodes", "1", "--external-nodes", "0", "--node-gpus", "0", "--mig-nodes", "1")
MIXED_PORT_OFFSET = 60
MIXED_GRES = "gpu:a100:1,gpu:1g.10gb:7"
# issue #40's node: two A100-80GB, NVIDIA's "balanced" layout and seven 1g.10gb, the
# stand-in publishing as NVIDIA's current driver does
BALANCED_LAYOUT = "3g.40gb+2g.20gb+1g.10gb*2,1g.10gb*7"
BALANCED_PORT_OFFSET = 80
BALANCED_ARGS = (
    *UP_ARGS,
    *("--mig-layout", BALANCED_LAYOUT, "--mig-naming", "profile-start-end"),
    *("--node-cpus", "16"),  # eleven pods of one CPU each run at once
)


def mig_gres_of(env_file: Path) -> str:
    """The MIG nodes' GRES of the sandbox behind ``env_file`` ("" when it has none)."""
    env = parse_env_file(env_file.read_text())
    return env.get("SLURM_MIG_GRES", "") if env.get("SLURM_MIG_NODES") else ""


@contextlib.contextmanager
def mig_sandbox(environ: Mapping[str, str] | None = None) -> Iterator[Path]:
    """The env file of a sandbox with 7-slice ``1g.10gb`` MIG nodes: one the environment
    names, else one of its own (started here, stopped on exit)."""
    env = dict(os.environ if environ is None else environ)
    for given in (env.get(ENV_MIG), env.get(ENV_FILE)):
        if given and Path(given).is_file() and mig_gres_of(Path(given)) == "gpu:1g.10gb:7":
            yield Path(given)
            return
    with own_sandbox(env, "-mig", PORT_OFFSET, UP_ARGS) as env_file:
        yield env_file


@contextlib.contextmanager
def mig_mixed_sandbox(environ: Mapping[str, str] | None = None) -> Iterator[Path]:
    """The env file of a sandbox whose MIG node is mixed: one whole GPU (``gpu:a100``,
    Slurm's index 0) and the seven ``1g.10gb`` slices of another (indices 1-7). Its own
    dir (+ ``-migmixed``) and ports (+ 60), started here and stopped on exit."""
    env = dict(os.environ if environ is None else environ)
    with own_sandbox(
        env, "-migmixed", MIXED_PORT_OFFSET, (*UP_ARGS, "--mig-full-gpus", "1")
    ) as env_file:
        yield env_file


@contextlib.contextmanager
def mig_balanced_sandbox(environ: Mapping[str, str] | None = None) -> Iterator[Path]:
    """The env file of a sandbox whose MIG node has two GPUs cut as
    :data:`BALANCED_LAYOUT` (``Gres=gpu:3g.40gb:1,gpu:2g.20gb:1,gpu:1g.10gb:9``). Its own
    dir (+ ``-migbal``) and ports (+ 80), started here and stopped on exit."""
    env = dict(os.environ if environ is None else environ)
    with own_sandbox(env, "-migbal", BALANCED_PORT_OFFSET, BALANCED_ARGS) as env_file:
        yield env_file
