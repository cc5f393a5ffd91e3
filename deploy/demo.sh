#!/usr/bin/env bash
# The slurm-bridge demo (README): on a fresh Debian 12 machine, as root, from a clone.
# Sets everything up, starts the real Slurm sandbox, and shows what the bridge does with
# Slurm: one external placeholder job (no script, nothing runs) that Slurm allocates on
# 2 nodes of partition slurm-bridge, RUNNING in squeue with its node list, then cancelled.
# The sandbox is left running; the end of the output says how to use and stop it.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "deploy/demo.sh: run as root (the Slurm sandbox needs chroot)" >&2; exit 1; }

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
sbx() { .venv/bin/slurm-bridge sandbox slurm "$@"; }
in_slurm() { sbx exec -- "$@"; }

step "setup: Debian packages and the virtualenv (.venv)"
./deploy/setup.sh

step "a real Slurm cluster in a chroot: slurm-bridge sandbox slurm up"
sbx up
ENV_FILE="${SLURM_BRIDGE_SANDBOX_DIR:-$HOME/.cache/slurm-bridge/slurm}/cluster.env"
# shellcheck disable=SC1090
. "$ENV_FILE"

step "sinfo: $SLURM_BATCH_PARTITION has slurmd nodes, $SLURM_PARTITION has State=EXTERNAL nodes (no slurmd)"
in_slurm sinfo

step "submit one external placeholder job: 2 nodes of partition $SLURM_PARTITION, no script"
JOB=$(in_slurm sbatch --external --parsable -p "$SLURM_PARTITION" -N2 -c1 --mem=1000 -J demo-placeholder)
echo "job $JOB"
state=""
for _ in $(seq 1 150); do # Slurm schedules it within a second or two
  state=$(in_slurm squeue -h -j "$JOB" -o %T)
  [ "$state" = RUNNING ] && break
  sleep 0.2
done
in_slurm squeue -j "$JOB" -o '%.8i %.14P %.18j %.9T %.6D %N'
[ "$state" = RUNNING ] || { echo "job $JOB did not start (state: $state)" >&2; in_slurm scancel "$JOB"; exit 1; }
echo "Slurm allocated $(in_slurm squeue -h -j "$JOB" -o %N) to job $JOB; the bridge binds a gang's pods there."

step "cancel it"
in_slurm scancel "$JOB"
for _ in $(seq 1 50); do
  [ -z "$(in_slurm squeue -h -j "$JOB" -o %T 2>/dev/null)" ] && break
  sleep 0.2
done
in_slurm squeue
echo "job $JOB: $(in_slurm scontrol show job "$JOB" 2>/dev/null | grep -o 'JobState=[A-Z]*' || echo gone)"

cat <<EOF

== the Slurm sandbox keeps running
  env file:   $ENV_FILE   (REST URL, API version, token file, partitions, nodes)
  token:      $SLURM_JWT_FILE   (mode 0600; user $SLURM_USER)
  REST:       $SLURM_REST_URL/slurm/$SLURM_API_VERSION/   (headers X-SLURM-USER-NAME, X-SLURM-USER-TOKEN)
  CLIs:       .venv/bin/slurm-bridge sandbox slurm exec -- squeue
  status:     .venv/bin/slurm-bridge sandbox slurm status
  stop:       .venv/bin/slurm-bridge sandbox slurm down [--purge]
EOF
