#!/usr/bin/env bash
# Regenerate deploy/constraints.txt: the exact versions of slurm-bridge's runtime dependency
# closure, resolved in a fresh virtualenv (Python 3.11, as in the image) from pyproject.toml.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
py="${PYTHON:-python3.11}"
command -v "$py" >/dev/null || py=python3
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$py" -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install -q --disable-pip-version-check "$repo" 2>&1 | grep -v '^WARNING: Location' >&2 || true
{
  echo "# Exact versions of slurm-bridge's runtime dependencies (the whole closure), used by the"
  echo "# Dockerfile (pip -c) so every image build installs the same thing. Regenerate with"
  echo "#   deploy/tools/gen-constraints.sh"
  echo "# (a fresh venv, pip install ., pip freeze); tests/unit/deploy checks it covers pyproject."
  "$tmp/venv/bin/pip" freeze --disable-pip-version-check --exclude-editable | grep -v -i '^slurm[-_]bridge'
} > "$repo/deploy/constraints.txt"
echo "wrote $repo/deploy/constraints.txt"
