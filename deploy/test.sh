#!/usr/bin/env bash
# The project's test command (README, CI): set up, start the real Slurm sandbox, run the
# linters, the type checker, the import-layer contracts and the whole test suite, then
# stop the sandbox. Extra arguments go to pytest (e.g. deploy/test.sh -m slurm -x).
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/setup.sh
export PATH="$PWD/.venv/bin:$PATH"

echo "== lint: ruff, mypy, import-linter"
ruff check .
ruff format --check .
mypy
lint-imports

echo "== Slurm sandbox"
slurm-bridge sandbox slurm up
trap 'slurm-bridge sandbox slurm down || true' EXIT

echo "== tests"
python -m pytest -q -ra -p no:cacheprovider "$@"
