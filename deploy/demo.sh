#!/usr/bin/env bash
# The slurm-bridge demo (README): on a fresh Debian 12 machine, as root, from a clone.
#   ./deploy/demo.sh          set up (packages, .venv), start the real Slurm sandbox, the
#                             sandbox Kubernetes API server and the bridge's three components,
#                             run the seed examples (deploy/examples) and leave it all running
#   ./deploy/demo.sh down     stop the demo (components, API server, its Slurm jobs);
#                             `--down` works too. The Slurm sandbox keeps running.
# The logic is in sandbox/demo.py (`slurm-bridge sandbox demo up|down|status`).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "deploy/demo.sh: run as root (the Slurm sandbox needs chroot)" >&2; exit 1; }

case "${1:-up}" in
  up) ;;
  down | --down)
    [ -x .venv/bin/slurm-bridge ] || { echo "nothing to stop: no .venv" >&2; exit 0; }
    exec .venv/bin/slurm-bridge sandbox demo down ;;
  status) exec .venv/bin/slurm-bridge sandbox demo status ;;
  *) echo "usage: $0 [up|down|--down|status]" >&2; exit 2 ;;
esac

echo "== setup: Debian packages and the virtualenv (.venv, with kubectl)"
./deploy/setup.sh

echo "== a real Slurm cluster in a chroot: slurm-bridge sandbox slurm up"
.venv/bin/slurm-bridge sandbox slurm up

exec .venv/bin/slurm-bridge sandbox demo up
