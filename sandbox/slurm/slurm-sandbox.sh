#!/usr/bin/env bash
# slurm-sandbox.sh - the root-level half of `slurm-bridge sandbox slurm`: a real Slurm cluster
# (munged, slurmctld, N x slurmd, slurmrestd, optional MariaDB + slurmdbd) in a Debian
# debootstrap chroot on this machine. sandbox/slurm/launcher.py renders the Slurm config files
# and calls this script with the settings below; run it through that command, not by hand.
#
#   slurm-sandbox.sh up | down [--purge] | status | restart-ctld | rest-stop | rest-start
#
# Settings (environment; slurm.py sets them all):
#   SBX_DIR       sandbox dir (lock, cache, logs, token file)
#   SBX_ROOT      the chroot (SBX_DIR/<suite>[-acct]-root)
#   SBX_SUITE     Debian suite (sid | trixie)       SBX_MIRROR   Debian mirror URL
#   SBX_PACKAGES  comma list for debootstrap       SBX_CACHE    zstd tarball of the ready root
#   SBX_NO_CACHE  1 = debootstrap even if the tarball exists (it is rewritten)
#   SBX_CONF_DIR  rendered config files to install (up): slurm.conf gres.conf cgroup.conf
#                 [slurmdbd.conf] [topology.yaml] slurmrestd.args
#   SBX_SLURMD_NODES  space separated slurmd node names   SBX_GPUS  fake GPUs per node
#   SBX_EXTERNAL_NODES count of State=EXTERNAL nodes (needs Slurm >= 25.05)
#   SBX_EXTERNAL_NAMES their names, space separated (each resolves to this host)
#   SBX_MIG_NODES space separated MIG node names, created at run time (scontrol create)
#   SBX_MIG_NODE_CONF their scontrol create arguments after NodeName= (typed GRES, feature)
#   SBX_ACCOUNTING 0|1   SBX_MYSQL_PORT   SBX_REST_PORT   SBX_OPENAPI
#   SBX_TOKEN_USER SBX_TOKEN_LIFESPAN SBX_JWT_FILE (written 0600, never printed)
#   SBX_LOCK_HELD  1 = the caller holds SBX_DIR/.lock (else the script takes it)
# `up` ends by printing machine-readable facts on stdout: SLURM_VERSION=, SLURM_API_VERSIONS=.
# Progress goes to stderr. Only processes whose /proc/PID/root is SBX_ROOT are ever signalled.
set -euo pipefail
trap '' PIPE # a reader that goes away (| head) must not stop us half-way (down especially)

T0=$EPOCHREALTIME
say() { printf '[sandbox %5.1fs] %s\n' "$(elapsed)" "$*" >&2; }
elapsed() {
  local now=$EPOCHREALTIME
  echo "$(( (${now/./} - ${T0/./}) / 1000000 )).$(( ((${now/./} - ${T0/./}) / 100000) % 10 ))"
}
die() { echo "slurm-sandbox: $*" >&2; exit 1; }

ROOT=${SBX_ROOT:?SBX_ROOT not set}
DIR=${SBX_DIR:?SBX_DIR not set}
LOGS="$DIR/logs"
READY_MARK=".slurm-bridge-root-ready"
in_root() { chroot "$ROOT" "$@" 9>&-; }
# daemon CMD...: start a daemon with no inherited stdio or lock fd (a caller reading our
# stdout/stderr through a pipe must see EOF when we exit); its start-up output goes to a log
daemon() { "$@" </dev/null >>"$LOGS/daemon-start.log" 2>&1 9>&- || {
  tail -n 5 "$LOGS/daemon-start.log" >&2; return 1; }; }

# ------------------------------------------------------------------------- processes
# pid_of PIDFILE(inside the root) ROOT -> prints the PID if it is alive and chrooted in ROOT
pid_of() {
  local f="$2$1" p
  [ -s "$f" ] || return 1
  p=$(<"$f")
  [[ $p =~ ^[0-9]+$ ]] || return 1
  [ "$(readlink "/proc/$p/root" 2>/dev/null)" = "$2" ] || return 1
  [ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" != Z ] || return 1
  echo "$p"
}
alive() { pid_of "$1" "$ROOT" >/dev/null; }

# stop_pids WHAT PID... : TERM, wait up to 10 s (zombies count as stopped), then KILL
stop_pids() {
  local what=$1 p left _
  shift
  [ $# -gt 0 ] || return 0
  kill -TERM "$@" 2>/dev/null || true
  for _ in $(seq 1 100); do
    left=0
    for p in "$@"; do
      if [ -d "/proc/$p" ] && [ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" != Z ]; then
        left=1
      fi
    done
    [ $left = 0 ] && { say "stopped $what ($*)"; return 0; }
    sleep 0.1
  done
  kill -KILL "$@" 2>/dev/null || true
  say "killed $what ($*)"
}

# stop_pidfile WHAT PIDFILE ROOT
stop_pidfile() {
  local p
  if p=$(pid_of "$2" "$3"); then stop_pids "$1" "$p"; fi
}

# wait_until SECONDS WHAT CMD... : poll CMD every 0.2 s until it succeeds or time runs out
wait_until() {
  local limit=$1 what=$2 end
  shift 2
  end=$(( ${EPOCHREALTIME/./} + limit * 1000000 ))
  until "$@" >/dev/null 2>&1; do
    [ "${EPOCHREALTIME/./}" -lt "$end" ] || { echo "slurm-sandbox: timed out waiting for $what" >&2; return 1; }
    sleep 0.2
  done
}

# ------------------------------------------------------------------------- root fs
make_root() {
  [ -f "$ROOT/$READY_MARK" ] && return 0
  local cache=${SBX_CACHE:?} log="$LOGS/debootstrap-$(basename "$ROOT").log"
  mkdir -p "$LOGS" "$(dirname "$cache")"
  # a half-made root from an interrupted run: nothing of ours may still be mounted in it
  unmount_root "$ROOT"
  rm -rf --one-file-system "$ROOT"
  mkdir -p "$ROOT"
  if [ "${SBX_NO_CACHE:-0}" != 1 ] && [ -s "$cache" ]; then
    say "restoring the root from $cache"
    zstd -q -dc "$cache" | tar -C "$ROOT" --numeric-owner -xpf -
  else
    need_host_tools debootstrap zstd
    say "debootstrap $SBX_SUITE (minbase) from $SBX_MIRROR; log: $log"
    debootstrap --variant=minbase --include="$SBX_PACKAGES" "$SBX_SUITE" "$ROOT" "$SBX_MIRROR" \
      >"$log" 2>&1 || { tail -n 20 "$log" >&2; die "debootstrap failed (log: $log)"; }
    # package scripts must never start daemons in the chroot
    printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"
    chmod 755 "$ROOT/usr/sbin/policy-rc.d"
    if [ "${SBX_ACCOUNTING:-0}" = 1 ] && [ "$SBX_SUITE" = sid ]; then
      # slurmdbd 26.05 dies with libmariadb3 1:11.8.9 ("5027 Number of columns in result
      # ... exceeds maximum"): sid's, and trixie's since its point release moved from 11.8.6
      # to 11.8.9 too. Bookworm's (Connector/C 3.3, 1:10.11) works against the sid server.
      say "accounting: installing bookworm's libmariadb3 in the sid root"
      echo "deb $SBX_MIRROR bookworm main" >"$ROOT/etc/apt/sources.list.d/bookworm.list"
      in_root apt-get -o Acquire::Check-Valid-Until=false update -qq >>"$log" 2>&1
      in_root apt-get install -y -qq --allow-downgrades libmariadb3/bookworm >>"$log" 2>&1
    fi
    in_root apt-get clean
    touch "$ROOT/$READY_MARK"
    say "saving $cache"
    tar -C "$ROOT" --numeric-owner --one-file-system -cf - . | zstd -q -T0 -3 -f -o "$cache.tmp"
    mv -f "$cache.tmp" "$cache"
  fi
  touch "$ROOT/$READY_MARK"
}

need_host_tools() {
  local missing=() t
  for t in "$@"; do command -v "$t" >/dev/null || missing+=("$t"); done
  [ ${#missing[@]} = 0 ] && return 0
  say "installing ${missing[*]} on the host"
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${missing[@]}" >&2 ||
    { apt-get -o DPkg::Lock::Timeout=600 update -qq >&2 &&
      DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${missing[@]}" >&2; }
}

# The root's /dev and /sys are its own, not the host's bound in: an `rm -rf` of a sandbox
# directory whose root is still mounted would otherwise delete the host's device nodes
# (devtmpfs is one instance for the whole machine) and its empty cgroups. Nothing in the
# root needs more than these nodes: no cgroups (CgroupPlugin=disabled), no real devices
# (fake GPUs are mknod'ed under /var/lib/fakegpu).
mount_dev() {
  local name major minor
  mount -t tmpfs -o mode=755,nosuid tmpfs "$ROOT/dev"
  while read -r name major minor; do
    mknod -m 666 "$ROOT/dev/$name" c "$major" "$minor"
  done <<'NODES'
null 1 3
zero 1 5
full 1 7
random 1 8
urandom 1 9
tty 5 0
NODES
  mkdir -p "$ROOT/dev/pts" "$ROOT/dev/shm"
  mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$ROOT/dev/pts"
  ln -s pts/ptmx "$ROOT/dev/ptmx"
  mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$ROOT/dev/shm"
  ln -s /proc/self/fd "$ROOT/dev/fd"
  ln -s /proc/self/fd/0 "$ROOT/dev/stdin"
  ln -s /proc/self/fd/1 "$ROOT/dev/stdout"
  ln -s /proc/self/fd/2 "$ROOT/dev/stderr"
}

# fstype PATH: the type of the file system mounted at PATH (empty: none)
fstype() { findmnt -n -o FSTYPE --mountpoint "$1" 2>/dev/null | tail -n 1; }

mount_root() {
  mountpoint -q "$ROOT/proc" || mount -t proc proc "$ROOT/proc"
  # a root mounted by an older script has the host's /dev and /sys bound in: swap them for
  # its own (running daemons keep the files they hold open; what they open next is the root's)
  if [ "$(fstype "$ROOT/dev")" = devtmpfs ]; then umount -R -l "$ROOT/dev"; fi
  if [ -n "$(findmnt -n -l -R -o TARGET "$ROOT/sys" 2>/dev/null | sed 1d)" ]; then
    umount -R -l "$ROOT/sys"
  fi
  mountpoint -q "$ROOT/dev" || mount_dev
  mountpoint -q "$ROOT/sys" || mount -t sysfs sysfs "$ROOT/sys"
  mountpoint -q "$ROOT/run" || mount -t tmpfs -o mode=755 tmpfs "$ROOT/run"
  in_root sh -c 'mkdir -p /run/munge && chown munge:munge /run/munge'
}

unmount_root() {
  local m
  for m in run sys dev proc; do
    if mountpoint -q "$1/$m" 2>/dev/null; then umount -R "$1/$m" 2>/dev/null || umount -R -l "$1/$m"; fi
  done
}

# ------------------------------------------------------------------------- configuration
# install_conf NAME MODE OWNER: copy SBX_CONF_DIR/NAME to /etc/slurm/NAME; sets CHANGED=1 if new
install_conf() {
  local src="$SBX_CONF_DIR/$1" dst="$ROOT/etc/slurm/$1"
  cmp -s "$src" "$dst" && return 0
  cp "$src" "$dst.tmp" && mv -f "$dst.tmp" "$dst"
  chmod "$2" "$dst"
  in_root chown "$3" "/etc/slurm/$1"
  CHANGED=1
}

configure() {
  local host node g names
  host=$(hostname)
  # minbase has no /etc/hosts: munged must resolve this host's name
  printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t%s\n' \
    "$host" >"$ROOT/etc/hosts"
  # Every node of the sandbox lives on this host, so its name resolves: slurmctld sends a
  # job's signals to its nodes, State=EXTERNAL ones too (a preempted job's, GraceTime or
  # not). A name that does not resolve costs 10 s of getaddrinfo retries per node, with
  # slurmctld slow to answer meanwhile, and leaves the node NOT_RESPONDING: no job starts
  # there again ("Required node not available"). resolve_saved_nodes adds the dynamic ones.
  names="${SBX_SLURMD_NODES:-} ${SBX_EXTERNAL_NAMES:-}"
  [ -z "${names// /}" ] || printf '127.0.0.1\t%s\n' $names >>"$ROOT/etc/hosts"
  in_root sh -c '
    getent passwd slurmrestd >/dev/null || useradd -r -M -d /nonexistent -s /usr/sbin/nologin slurmrestd
    getent passwd kube >/dev/null || useradd -m -u 2000 -s /bin/sh kube
    mkdir -p /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /var/lib/fakegpu
    chown slurm:slurm /var/spool/slurmctld /var/log/slurm'
  if [ ! -s "$ROOT/etc/slurm/jwt_hs256.key" ]; then
    (umask 077; head -c 32 /dev/urandom >"$ROOT/etc/slurm/jwt_hs256.key")
  fi
  in_root sh -c 'chown slurm:slurm /etc/slurm/jwt_hs256.key && chmod 600 /etc/slurm/jwt_hs256.key'
  for node in $SBX_SLURMD_NODES; do mkdir -p "$ROOT/var/spool/slurmd/$node"; done
  # fake GPUs: gres needs character devices; these are /dev/null's (1,3)
  for ((g = 0; g < ${SBX_GPUS:-0}; g++)); do
    [ -c "$ROOT/var/lib/fakegpu/gpu$g" ] || mknod "$ROOT/var/lib/fakegpu/gpu$g" c 1 3
  done
  CHANGED=0
  install_conf slurm.conf 644 root:root
  install_conf gres.conf 644 root:root
  install_conf cgroup.conf 644 root:root
  [ "${SBX_ACCOUNTING:-0}" = 1 ] && install_conf slurmdbd.conf 600 slurm:slurm
  install_conf slurmrestd.args 644 root:root
  # topology.yaml only with --topology: Slurm reads it whenever it exists
  if [ -f "$SBX_CONF_DIR/topology.yaml" ]; then
    install_conf topology.yaml 644 root:root
  elif [ -e "$ROOT/etc/slurm/topology.yaml" ]; then
    rm -f "$ROOT/etc/slurm/topology.yaml"
    CHANGED=1
  fi
  return 0
}

# ------------------------------------------------------------------------- daemons
start_munge() {
  alive /run/munge/munged.pid || { say "starting munged"; daemon chroot --userspec=munge:munge "$ROOT" /usr/sbin/munged; }
  wait_until 10 munged in_root sh -c 'munge -n | unmunge'
}

start_accounting() {
  [ "${SBX_ACCOUNTING:-0}" = 1 ] || return 0
  if ! alive /run/mysqld/mysqld.pid; then
    say "starting mariadb"
    # MariaDB 11.8 clients look for /run/mariadbd/mysqld.sock
    in_root sh -c 'mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld && { [ -e /run/mariadbd ] || ln -s mysqld /run/mariadbd; }'
    if [ ! -d "$ROOT/var/lib/mysql/mysql" ]; then
      in_root mariadb-install-db --user=mysql --datadir=/var/lib/mysql >"$LOGS/mariadb-install.log" 2>&1
    fi
    chroot "$ROOT" setsid /usr/sbin/mariadbd --user=mysql --datadir=/var/lib/mysql \
      --socket=/run/mysqld/mysqld.sock --pid-file=/run/mysqld/mysqld.pid \
      --bind-address=127.0.0.1 --port="$SBX_MYSQL_PORT" --skip-name-resolve \
      --innodb-buffer-pool-size=128M --innodb-log-file-size=64M \
      --innodb-snapshot-isolation=OFF \
      >"$ROOT/var/log/slurm/mariadb.log" 2>&1 </dev/null 9>&- &
  fi
  wait_until 60 mariadb in_root mariadb -uroot -e 'select 1'
  in_root mariadb -uroot -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurmdbpass';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"
  if ! alive /run/slurmdbd.pid; then
    say "starting slurmdbd"
    daemon chroot "$ROOT" /usr/sbin/slurmdbd
  fi
  wait_until 60 slurmdbd in_root sacctmgr -i -n show cluster ||
    { tail -n 5 "$ROOT/var/log/slurm/slurmdbd.log" >&2; return 1; }
}

# resolve_saved_nodes: slurmctld resolves every node of its saved state when it starts,
# dynamic ones too (POST /new/node/, scontrol create: a test that failed before deleting
# its node leaves one). A name that does not resolve costs 10 s of getaddrinfo retries per
# node, enough to miss the start deadline ("getaddrinfo(ext-594905:17000) failed"). Every
# sandbox node lives on this host, so each word of the saved node state that could be a
# host name resolves to 127.0.0.1 (extra words, e.g. features, resolve too: harmless).
resolve_saved_nodes() {
  local state="$ROOT/var/spool/slurmctld/node_state" hosts="$ROOT/etc/hosts" names
  [ -s "$state" ] || return 0
  names=$(tr -c 'A-Za-z0-9.\n-' '\n' <"$state" | grep -xE '[A-Za-z][A-Za-z0-9.-]{2,62}' |
    sort -u | grep -vxF -f <(tr -s ' \t' '\n' <"$hosts") || true)
  [ -z "$names" ] || printf '127.0.0.1\t%s\n' $names >>"$hosts"
}

start_ctld() {
  if ! alive /run/slurmctld.pid; then
    resolve_saved_nodes
    say "starting slurmctld"
    daemon chroot "$ROOT" /usr/sbin/slurmctld
  fi
  wait_until 30 slurmctld in_root scontrol ping || {
    tail -n 5 "$ROOT/var/log/slurm/slurmctld.log" >&2
    echo "slurm-sandbox: slurmctld did not answer within 30 s (its log: $ROOT/var/log/slurm/slurmctld.log)." >&2
    echo "slurm-sandbox: to start from a clean job and node state: slurm-bridge sandbox slurm down --purge && slurm-bridge sandbox slurm up" >&2
    return 1
  }
  if [ "${SBX_ACCOUNTING:-0}" = 1 ]; then
    local u
    in_root sacctmgr -i -n add account default Description=default Organization=kube >/dev/null 2>&1 || true
    for u in slurm kube root; do in_root sacctmgr -i -n add user "$u" Account=default >/dev/null 2>&1 || true; done
  fi
}

# create_mig_nodes: the MIG nodes are dynamic (scontrol create): gres.conf's Type= File=
# line for them is read when slurmctld starts, and a created node reports slice indices
# (a slurm.conf node reports counts only; launcher.py says why). Kept across restarts in
# the node state; created again after down --purge.
create_mig_nodes() {
  local node created=0
  for node in ${SBX_MIG_NODES:-}; do
    in_root scontrol show node "$node" >/dev/null 2>&1 && continue
    # shellcheck disable=SC2086  # the arguments are words
    in_root scontrol create NodeName="$node" $SBX_MIG_NODE_CONF || die "scontrol create $node failed"
    created=$((created + 1))
  done
  [ $created = 0 ] || say "created $created MIG node(s): $SBX_MIG_NODE_CONF"
}

nodes_ready() {
  local states
  states=$(in_root sinfo -h -N -o '%t') || return 1
  [ -n "$states" ] || return 1
  ! grep -qE '\*|unk|down|inval|fail|boot|~|drain' <<<"$states"
}

start_slurmds() {
  local node started=0
  for node in $SBX_SLURMD_NODES; do
    alive "/run/slurmd-$node.pid" || { daemon chroot "$ROOT" /usr/sbin/slurmd -N "$node"; started=$((started + 1)); }
  done
  [ $started = 0 ] || say "started $started slurmd"
  wait_until 60 "nodes to register" nodes_ready || { in_root sinfo -N >&2; return 1; }
}

start_rest() {
  alive /run/slurmrestd.pid && return 0
  say "starting slurmrestd on 127.0.0.1:$SBX_REST_PORT"
  # slurmrestd refuses to run as root and does not daemonize
  chroot --userspec=slurmrestd:slurmrestd "$ROOT" env SLURM_JWT=daemon \
    setsid /usr/sbin/slurmrestd -a rest_auth/jwt -s "$SBX_OPENAPI" "127.0.0.1:$SBX_REST_PORT" \
    >>"$ROOT/var/log/slurm/slurmrestd.log" 2>&1 </dev/null 9>&- &
  echo $! >"$ROOT/run/slurmrestd.pid"
}

stop_rest() { stop_pidfile slurmrestd /run/slurmrestd.pid "$1"; }

stop_slurm_daemons() { # ROOT: everything but munged and mariadb
  local r=$1 f p pids=()
  stop_rest "$r"
  for f in "$r"/run/slurmd-*.pid; do
    [ -e "$f" ] || continue
    if p=$(pid_of "/run/${f##*/}" "$r"); then pids+=("$p"); fi
  done
  stop_pids "${#pids[@]} slurmd" "${pids[@]}"
  stop_pidfile slurmctld /run/slurmctld.pid "$r"
  stop_pidfile slurmdbd /run/slurmdbd.pid "$r"
}

write_token() {
  local tmp="$SBX_JWT_FILE.tmp.$$" token
  token=$(in_root scontrol token username="$SBX_TOKEN_USER" lifespan="$SBX_TOKEN_LIFESPAN")
  token=${token#SLURM_JWT=}
  [ -n "$token" ] || die "scontrol token returned nothing"
  (umask 077; printf '%s\n' "$token" >"$tmp")
  chmod 600 "$tmp"
  mv -f "$tmp" "$SBX_JWT_FILE"
}

facts() {
  echo "SLURM_VERSION=$(in_root dpkg-query -W -f '${Version}' slurmctld)"
  echo "SLURM_API_VERSIONS=$(in_root sh -c 'ls /usr/lib/*/slurm-wlm/' |
    sed -n 's/^data_parser_v\(0_0_[0-9]*\)\.so$/v\1/p' | tr _ . | sort -V | tr '\n' ' ')"
}

# ------------------------------------------------------------------------- commands
cmd_up() {
  mkdir -p "$LOGS"
  make_root
  local version major
  version=$(in_root dpkg-query -W -f '${Version}' slurmctld)
  major=${version%%.*}
  if [ "${SBX_EXTERNAL_NODES:-0}" -gt 0 ] && [ "$major" -lt 25 ]; then
    die "external nodes need State=EXTERNAL (Slurm >= 25.05); $SBX_SUITE has Slurm $version: use --external-nodes 0"
  fi
  mount_root
  configure
  if [ "$CHANGED" = 1 ] && alive /run/slurmctld.pid; then
    say "configuration changed: restarting the Slurm daemons"
    stop_slurm_daemons "$ROOT"
  fi
  start_munge
  start_accounting
  start_ctld
  create_mig_nodes
  start_slurmds
  start_rest
  write_token
  say "Slurm $version up"
  facts
}

cmd_down() {
  local purge=0 r left p d roots=()
  [ "${1:-}" = --purge ] && purge=1
  # every root in the sandbox dir is ours; nothing outside it is ever touched
  for r in "$DIR"/*-root; do [ -f "$r/$READY_MARK" ] && roots+=("$r"); done
  for r in "${roots[@]}"; do
    stop_slurm_daemons "$r"
    stop_pidfile mariadb /run/mysqld/mysqld.pid "$r"
    stop_pidfile munged /run/munge/munged.pid "$r"
    # leftovers chrooted here: slurmstepd, job processes
    left=()
    for d in /proc/[0-9]*; do
      p=${d#/proc/}
      [ "$(readlink "$d/root" 2>/dev/null)" = "$r" ] && left+=("$p")
    done
    stop_pids "${#left[@]} leftover processes" "${left[@]}"
    # stale stepd sockets would make a restarted slurmd report dead jobs as alive
    find "$r/var/spool/slurmd" -type s -delete 2>/dev/null || true
    if [ $purge = 1 ]; then
      rm -rf "$r"/var/spool/slurmctld/* "$r"/var/spool/slurmd/* "$r"/var/log/slurm/*
      if [ -d "$r/var/lib/mysql" ]; then
        rm -rf "$r/var/lib/mysql" && mkdir -p "$r/var/lib/mysql" && chroot "$r" chown mysql:mysql /var/lib/mysql
      fi
      say "purged job and node state of $r"
    fi
    unmount_root "$r"
    say "$r is down"
  done
}

cmd_status() {
  local down=0 node
  show() {
    local p
    if p=$(pid_of "$2" "$ROOT"); then printf '%-22s running (pid %s)\n' "$1" "$p"
    else printf '%-22s stopped\n' "$1"; down=1; fi
  }
  if [ ! -f "$ROOT/$READY_MARK" ]; then echo "no sandbox root at $ROOT"; return 3; fi
  show munged /run/munge/munged.pid
  if [ "${SBX_ACCOUNTING:-0}" = 1 ]; then
    show mariadb /run/mysqld/mysqld.pid
    show slurmdbd /run/slurmdbd.pid
  fi
  show slurmctld /run/slurmctld.pid
  for node in $SBX_SLURMD_NODES; do show "slurmd $node" "/run/slurmd-$node.pid"; done
  show slurmrestd /run/slurmrestd.pid
  [ $down = 0 ] || return 3
}

cmd_restart_ctld() {
  alive /run/slurmctld.pid || die "slurmctld is not running (run up first)"
  stop_pidfile slurmctld /run/slurmctld.pid "$ROOT"
  start_ctld
  say "slurmctld restarted (pid $(pid_of /run/slurmctld.pid "$ROOT"))"
}

cmd_rest_start() {
  alive /run/slurmctld.pid || die "slurmctld is not running (run up first)"
  start_rest
}

[ "$(id -u)" = 0 ] || die "must run as root (chroot, mount)"
cmd=${1:-}
shift || true
mkdir -p "$DIR"
case $cmd in
  status) cmd_status ;;
  up | down | restart-ctld | rest-stop | rest-start)
    if [ "${SBX_LOCK_HELD:-0}" != 1 ]; then # slurm.py holds it while it calls us
      exec 9>"$DIR/.lock"
      flock -w 600 9 || die "another sandbox command holds $DIR/.lock"
    fi
    case $cmd in
      up) cmd_up ;;
      down) cmd_down "$@" ;;
      restart-ctld) cmd_restart_ctld ;;
      rest-stop) stop_rest "$ROOT" ;;
      rest-start) cmd_rest_start ;;
    esac
    ;;
  *) die "usage: slurm-sandbox.sh up|down [--purge]|status|restart-ctld|rest-stop|rest-start" ;;
esac
