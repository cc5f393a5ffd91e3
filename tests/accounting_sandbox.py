"""A Slurm sandbox with accounting (MariaDB + slurmdbd, ``AccountingStorageEnforce=
associations,limits,qos``, slurmrestd's ``openapi/slurmdbd``), for the tests of what
``slurm-bridge why`` says of a QOS or association limit.

``slurm-bridge sandbox slurm up --accounting``. It runs in its OWN dir (the tests' sandbox
dir + ``-accounting``) on its own ports (the sandbox's + 90), so its limits never hold the
other tests' jobs. Its root is not the plain sandbox's (MariaDB and slurmdbd too): the
first ``up`` builds it (debootstrap, ~90-160 s) and caches it in that dir
(``cache/sid-acct-root.tar.zst``); later ones take ~6 s. :func:`accounting_sandbox` uses
the sandbox ``SLURM_SANDBOX_ACCOUNTING_ENV`` or ``SLURM_SANDBOX_ENV`` names when that one
runs accounting (``SLURM_ACCOUNTING=1`` in its env file), else starts and, at the end,
stops its own.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from sandbox.slurm.launcher import ENV_FILE, parse_env_file
from tests.topology_sandbox import own_sandbox

ENV_ACCOUNTING = "SLURM_SANDBOX_ACCOUNTING_ENV"
PORT_OFFSET = 90


def has_accounting(env_file: Path) -> bool:
    return parse_env_file(env_file.read_text()).get("SLURM_ACCOUNTING") == "1"


@contextlib.contextmanager
def accounting_sandbox(environ: Mapping[str, str] | None = None) -> Iterator[Path]:
    """The env file of a sandbox with accounting: one the environment names, else one of
    its own (started here, stopped on exit)."""
    env = dict(os.environ if environ is None else environ)
    for given in (env.get(ENV_ACCOUNTING), env.get(ENV_FILE)):
        if given and Path(given).is_file() and has_accounting(Path(given)):
            yield Path(given)
            return
    with own_sandbox(env, "-accounting", PORT_OFFSET, ("--accounting",)) as env_file:
        yield env_file
