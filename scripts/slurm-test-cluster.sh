#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A one-node Slurm cluster on loopback, all of it under one directory, for tests and for trying
# gpum's Slurm pieces by hand (docs/slurm.md): munged, slurmctld and slurmd (Debian's
# slurmctld, slurmd, slurm-client and munge packages), with their own configuration, key,
# sockets, ports, spool and state directories and logs. The node's GPUs are what a
# `gpum slurm conf` output names: each File= path under DIR that does not exist yet is made a
# character device (mknod, an unused major number: Slurm refuses regular files).
#
#   scripts/slurm-test-cluster.sh start DIR GRES_CONF SLURM_LINES [PLUGSTACK]
#       GRES_CONF is copied to DIR/etc/gres.conf; SLURM_LINES holds the slurm.conf lines of
#       `gpum slurm conf --slurm` (GresTypes=..., NodeName=N Gres=...), completed here with
#       the node's address (and, when the NodeName line has no CPUs=, 16 CPUs); PLUGSTACK
#       (optional) becomes DIR/etc/plugstack.conf. GRES_CONF and PLUGSTACK may be the files
#       DIR/etc/gres.conf and DIR/etc/plugstack.conf themselves (`gpum slurm conf --install`).
#       Waits until the node is idle (30 s at most) and prints the environment for Slurm's
#       commands: `export SLURM_CONF=DIR/etc/slurm.conf`.
#   scripts/slurm-test-cluster.sh stop DIR
#       Stops what start started (by the pids it recorded) and removes the directory.
#
# Needs root (slurmd starts job steps as their user; munged runs as the munge user). The
# directory's path must be reachable by the munge user (a mode 0755 parent, not 0700).
set -euo pipefail

die() { echo "slurm-test-cluster: $*" >&2; exit 1; }

# A TCP port on loopback that nobody listens on now, below the kernel's ephemeral range: a port
# the kernel hands out to bind(port 0) (every HTTP test's gpumd, Python's clients) could be taken
# by another test between this pick and slurmd's bind ("Address already in use").
free_port() {
  python3 -c 'import random, socket
lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for _ in range(200):
    p = random.randrange(10000, max(lo, 10001))
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        continue
    finally:
        s.close()
    print(p)
    break
else:
    raise SystemExit("no free port below %d" % lo)'
}

# wait_for SECONDS DESCRIPTION CMD...: retries CMD every 0.1 s.
wait_for() {
  local secs=$1 what=$2 i=0
  shift 2
  until "$@" >/dev/null 2>&1; do
    i=$((i + 1))
    [ $i -gt $((secs * 10)) ] && return 1
    sleep 0.1
  done
}

show_logs() {
  local dir=$1 f
  for f in "$dir"/log/*.log "$dir"/munge/*.log; do
    [ -f "$f" ] && { echo "--- $f" >&2; tail -n 30 "$f" >&2; }
  done
}

stop() {
  local dir=$1 p
  unset SLURM_CONF # the processes this runs must not look like the cluster's
  [ -d "$dir" ] || return 0
  for name in slurmd slurmctld munged; do
    [ -f "$dir/run/$name.pid" ] || continue
    p=$(cat "$dir/run/$name.pid")
    [ -n "$p" ] && kill -TERM "$p" 2>/dev/null || true
  done
  for name in slurmd slurmctld munged; do
    [ -f "$dir/run/$name.pid" ] || continue
    p=$(cat "$dir/run/$name.pid")
    [ -n "$p" ] || continue
    # TERM first; what is left after 5 s is killed.
    wait_for 5 "$name to stop" bash -c "! kill -0 $p" || kill -KILL "$p" 2>/dev/null || true
  done
  # What is left of the cluster's jobs (a task whose slurmstepd was killed, a slurmstepd after
  # its slurmd): every process whose environment names this cluster's slurm.conf, except this
  # script and the processes it runs under.
  local keep=" " q=$$ conf="SLURM_CONF=$dir/etc/slurm.conf" left=()
  while [ -n "$q" ] && [ "$q" -gt 1 ]; do
    keep+="$q "
    q=$(awk '/^PPid:/ {print $2}' "/proc/$q/status" 2>/dev/null || true)
  done
  for e in /proc/[0-9]*/environ; do
    p=${e#/proc/}
    p=${p%/environ}
    [[ "$keep" == *" $p "* ]] && continue
    if tr '\0' '\n' 2>/dev/null <"$e" | grep -qxF "$conf"; then
      kill -KILL "$p" 2>/dev/null || true
      left+=("$p")
    fi
  done
  for p in "${left[@]}"; do
    wait_for 5 "process $p to end" bash -c "[ ! -e /proc/$p ] || grep -q '^State:.*Z' /proc/$p/status" || true
  done
  # A daemon that was still saving its state as it went may leave a file behind a first rm.
  wait_for 5 "$dir to be removed" rm -rf "$dir" || rm -rf "$dir"
}

start() {
  local dir=$1 gres=$2 lines=$3 plugstack=${4:-}
  [ "$(id -u)" -eq 0 ] || die "needs root (slurmd runs job steps as their user)"
  for c in munged slurmctld slurmd srun sinfo; do
    command -v "$c" >/dev/null || die "$c is not installed (scripts/deps.sh installs slurmctld slurmd slurm-client munge)"
  done
  id munge >/dev/null 2>&1 || die "no munge user (the munge package creates it)"
  [ -f "$gres" ] || die "no gres.conf lines in $gres"
  [ -f "$lines" ] || die "no slurm.conf lines in $lines"
  local node
  node=$(sed -n 's/^NodeName=\([^ ]*\).*/\1/p' "$lines" | head -n 1)
  [ -n "$node" ] || die "$lines has no NodeName= line"
  mkdir -p "$dir"/{etc,run,log,spool,state,munge}
  chmod 0755 "$dir" "$dir/etc" "$dir/run" "$dir/log"
  dir=$(cd "$dir" && pwd)

  # munge: a key of its own, its socket under DIR; it refuses to run as root.
  chown munge: "$dir/munge"
  chmod 0700 "$dir/munge"
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chown munge: "$dir/munge/munge.key"
  chmod 0400 "$dir/munge/munge.key"
  local msock=$dir/munge/munge.sock
  # The socket's directory must let Slurm's daemons and commands reach it.
  chmod 0711 "$dir/munge"
  runuser -u munge -- munged --force --socket="$msock" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
    --seed-file="$dir/munge/munged.seed" </dev/null >/dev/null 2>&1 || { show_logs "$dir"; die "munged did not start"; }
  wait_for 10 "munged's pid file" test -s "$dir/munge/munged.pid" || die "munged wrote no pid"
  cp "$dir/munge/munged.pid" "$dir/run/munged.pid"

  # Fake GPU device nodes for the File= paths under DIR.
  local f minor=0
  for f in $(sed -n 's/.*File=\([^ ]*\).*/\1/p' "$gres" | sort -u); do
    case "$f" in "$dir"/*) ;; *) continue ;; esac
    [ -e "$f" ] && continue
    mkdir -p "$(dirname "$f")"
    minor=$(basename "$f" | sed 's/[^0-9]*//g')
    mknod "$f" c 240 "${minor:-0}" || die "mknod $f failed"
  done
  # GRES_CONF and PLUGSTACK may be DIR/etc's own files already (written there by
  # `gpum slurm conf --install DIR/etc`): they are then used as they are.
  [ "$gres" -ef "$dir/etc/gres.conf" ] || cp "$gres" "$dir/etc/gres.conf"
  if [ -n "$plugstack" ]; then
    [ "$plugstack" -ef "$dir/etc/plugstack.conf" ] || cp "$plugstack" "$dir/etc/plugstack.conf"
  else
    : >"$dir/etc/plugstack.conf"
  fi

  local cport dport
  cport=$(free_port)
  dport=$(free_port)
  [ "$cport" != "$dport" ] || dport=$(free_port)
  {
    echo "# A loopback test cluster (scripts/slurm-test-cluster.sh)"
    echo "ClusterName=gpumtest"
    echo "SlurmctldHost=$(hostname -s)(127.0.0.1)"
    echo "MailProg=/bin/true"
    echo "SlurmctldPort=$cport"
    echo "SlurmdPort=$dport"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "AuthType=auth/munge"
    echo "CredType=cred/munge"
    echo "AuthInfo=socket=$msock"
    echo "StateSaveLocation=$dir/state"
    echo "SlurmdSpoolDir=$dir/spool"
    echo "SlurmctldPidFile=$dir/run/slurmctld.pid"
    echo "SlurmdPidFile=$dir/run/slurmd.pid"
    echo "SlurmctldLogFile=$dir/log/slurmctld.log"
    echo "SlurmdLogFile=$dir/log/slurmd.log"
    echo "SlurmctldDebug=info"
    echo "SlurmdDebug=info"
    echo "PlugStackConfig=$dir/etc/plugstack.conf"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "MpiDefault=none"
    echo "SwitchType=switch/none"
    echo "JobCompType=jobcomp/none"
    echo "AccountingStorageType=accounting_storage/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "SchedulerType=sched/backfill"
    echo "SelectTypeParameters=CR_Core"
    echo "ReturnToService=2"
    echo "SlurmdParameters=config_overrides"
    echo "MinJobAge=2"
    echo "KillWait=2"
    echo "InactiveLimit=0"
    echo "MessageTimeout=5"
    grep -v '^NodeName=' "$lines" | grep -v '^#' | grep -v '^SelectType=' | grep -v '^$' || true
    echo "SelectType=select/cons_tres"
    # A NodeName line with the node's hardware (`slurmd -C`'s, as gpum slurm conf writes it
    # when slurmd is on PATH) is kept as it is; one without gets enough CPUs that Slurm's
    # placement is limited by the GPUs' shards, not by cores.
    nodeline=$(grep '^NodeName=' "$lines" | head -n 1)
    case " $nodeline " in
      *" CPUs="*) echo "$nodeline NodeAddr=127.0.0.1 State=UNKNOWN" ;;
      *) echo "$nodeline NodeAddr=127.0.0.1 CPUs=16 RealMemory=1000 State=UNKNOWN" ;;
    esac
    echo "PartitionName=gpu Nodes=$node Default=YES MaxTime=INFINITE State=UP"
  } >"$dir/etc/slurm.conf"
  export SLURM_CONF=$dir/etc/slurm.conf

  # The daemons fork; their output goes to the logs, not to whoever waits on ours.
  slurmctld -i -f "$SLURM_CONF" </dev/null >>"$dir/log/slurmctld.out" 2>&1 || { show_logs "$dir"; die "slurmctld did not start"; }
  wait_for 10 "slurmctld's pid file" test -s "$dir/run/slurmctld.pid" || { show_logs "$dir"; die "slurmctld did not start"; }
  slurmd -N "$node" -f "$SLURM_CONF" </dev/null >>"$dir/log/slurmd.out" 2>&1 || { show_logs "$dir"; die "slurmd did not start"; }
  wait_for 10 "slurmd's pid file" test -s "$dir/run/slurmd.pid" || { show_logs "$dir"; die "slurmd did not start"; }
  if ! wait_for 30 "the node to be idle" bash -c "timeout 5 sinfo -h -N -n '$node' -o %t | grep -qx idle"; then
    sinfo -N -o '%N %t %E' >&2 || true
    show_logs "$dir"
    die "node $node is not idle after 30 s"
  fi
  echo "export SLURM_CONF=$SLURM_CONF"
}

case "${1:-}" in
  start)
    [ $# -ge 4 ] || die "usage: $0 start DIR GRES_CONF SLURM_LINES [PLUGSTACK]"
    start "$2" "$3" "$4" "${5:-}"
    ;;
  stop)
    [ $# -eq 2 ] || die "usage: $0 stop DIR"
    stop "$2"
    ;;
  *) die "usage: $0 start DIR GRES_CONF SLURM_LINES [PLUGSTACK] | stop DIR" ;;
esac
