#!/usr/bin/env bash
# The project's test command (README, CI): set up, start the tests' own real Slurm sandbox,
# run the linters, the type checker, the import-layer contracts, the docs build and the whole
# test suite. Extra arguments go to pytest (e.g. deploy/test.sh -m slurm -x).
#
# The tests never share a Slurm sandbox with the demo or anything else on the machine: unless
# SLURM_BRIDGE_SANDBOX_DIR (and the SLURM_SANDBOX_*_PORT variables) are exported, they use
# ~/.cache/slurm-bridge/test-slurm on ports of their own (`slurm-bridge sandbox slurm test-env`).
# A sandbox that was already running is left running; one this script started is stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
eval "$(slurm-bridge sandbox slurm test-env)"

echo "== lint: ruff, mypy, import-linter; docs: mkdocs build --strict"
ruff check .
ruff format --check .
mypy
lint-imports
NO_MKDOCS_2_WARNING=1 mkdocs build --strict --quiet --site-dir "$(mktemp -d)"

echo "== the tests' Slurm sandbox: $SLURM_BRIDGE_SANDBOX_DIR"
if slurm-bridge sandbox slurm status >/dev/null 2>&1; then
  echo "already running: using it, and leaving it running"
else
  # ours alone: start from a clean job and node state (no ghost jobs or dynamic nodes)
  slurm-bridge sandbox slurm down --purge >/dev/null 2>&1 || true
  slurm-bridge sandbox slurm up
  trap 'slurm-bridge sandbox slurm down || true' EXIT
fi

echo "== tests"
python -m pytest -q -ra -p no:cacheprovider "$@"
