#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/broker: gpumd as a broker (issue 5), on a simulated 2x H100 node, each figure beside a
# baseline measured in the same run:
#   1. reserve+release round trips per second with 1, 16 and 256 concurrent clients (each op is
#      two requests, each committed to the SQLite ledger before its reply), p50 and p99
#      latency; the clients are driven by one epoll thread (bench/broker/broker.c), as
#      redis-benchmark drives its own, and share the machine's CPUs with gpumd. Beside
#      `redis-benchmark -t set` against a local redis-server (in memory, no persistence) with
#      the same client counts (when installed: scripts/deps.sh bench). Aim: at least half of
#      Redis's rate at 16 clients, each durable request against one SET (issue 27; the ratio of
#      reserve+release pairs per SET is printed beside it), p99 under 2 ms at 256 clients.
#      At 16 clients it also prints gpumd's user and system time per request by thread (/proc):
#      the kernel's share, which the instruction counts below leave out.
#      Then the 16-client point again with 64 processes holding GPU memory on the node (what
#      each grant decision's fresh read of the devices' processes costs), beside it (no aim).
#   2. gpumd's resident memory with 10,000 live reservations. Aim: under 32 MiB.
#   3. Instructions per durable request at 16 clients (valgrind --tool=callgrind, when
#      installed: scripts/deps.sh bench; skipped with a note otherwise), for the loop thread and
#      the ledger's threads: a figure that holds on a loaded machine, where the rates move.
# Usage: bench/broker/run.sh BUILD_DIR [SECONDS]. About 5 x SECONDS + 30 s. Not in `make test`.
set -euo pipefail
BUILD=$(cd "${1:?usage: run.sh BUILD_DIR [SECONDS]}" && pwd)
SECS=${2:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
GPUM=$BUILD/bin/gpum
GPUMD=$BUILD/bin/gpumd
[ -x "$GPUM" ] && [ -x "$GPUMD" ] || { echo "bench/broker: $BUILD is not built" >&2; exit 1; }
OUT=$BUILD/bench
mkdir -p "$OUT"
P=$OUT/broker
if [ ! -x "$P" ] || [ "$HERE/broker.c" -nt "$P" ]; then
  "${CC:-cc}" -O2 -std=c17 -D_GNU_SOURCE -Wall -Wextra -I"$HERE/.." -o "$P" "$HERE/broker.c"
fi
export GPUM_HTTP_LISTEN=off # the socket protocol is what is measured (and no port clash)
source "$HERE/../gpumd_lib.sh"
bench_node bench-broker "$SRC/examples/sim/h100x2.yaml"
bench_gpumd
echo "gpumd on a simulated 2x H100 node ($(nproc) CPUs), ${SECS}s per point"
echo "-- reserve+release round trips (durable: SQLite WAL, one commit per loop turn)"
# threads_cpu FILE: each of gpumd's threads as "TID NAME UTIME STIME VCSW" (clock ticks,
# voluntary context switches), from /proc, in tid order.
threads_cpu() {
  local t f
  for t in /proc/"$GD"/task/*; do
    read -r -a f < <(cut -d')' -f2 "$t/stat")
    echo "${t##*/} $(cat "$t/comm") ${f[11]} ${f[12]} $(awk '/^voluntary_ctxt_switches/ { print $2 }' "$t/status")"
  done | sort >"$1"
}
# cpu_per_request BEFORE AFTER REQUESTS: gpumd's user and system time per request by thread
# (the loop, the ledger's writer and checkpointer, and the unnamed others: the device readers
# and the event thread), from /proc: the kernel's share (system calls, wake-ups) that
# callgrind's instructions leave out. Threads present in both snapshots only.
cpu_per_request() {
  join "$1" "$2" | awk -v r="$3" -v hz="$(getconf CLK_TCK)" -v pid="$GD" '
    { k = $1 == pid ? "loop" : $2 == "gpumd" ? "others" : $2
      u[k] += ($7 - $3) * 1e6 / hz / r; s[k] += ($8 - $4) * 1e6 / hz / r; v[k] += ($9 - $5) / r }
    END { for (k in u) { printf "  %-13s user %5.2f us  system %5.2f us  wake-ups %4.2f per request\n", k, u[k], s[k], v[k]
                         tu += u[k]; ts += s[k] }
          printf "  %-13s user %5.2f us  system %5.2f us per request\n", "all", tu, ts }' | sort
}
declare -A RATE P99
for n in 1 16 256; do
  [ "$n" = 16 ] && threads_cpu "$TMP/cpu0"
  line=$("$P" rtt "$GPUM_SOCKET" "$n" "$SECS")
  echo "gpumd  $line"
  RATE[$n]=$(sed -E 's/.* rate=([0-9]+).*/\1/' <<<"$line")
  P99[$n]=$(sed -E 's/.* p99_us=([0-9]+).*/\1/' <<<"$line")
  if [ "$n" = 16 ]; then
    threads_cpu "$TMP/cpu1"
    echo "gpumd's CPU at 16 clients (/proc, per durable request):"
    cpu_per_request "$TMP/cpu0" "$TMP/cpu1" "$((2 * $(sed -E 's/.* ops=([0-9]+).*/\1/' <<<"$line")))"
  fi
done
verdict() { if [ "$1" = 1 ]; then echo MEETS; else echo MISSES; fi; }

# start_redis NAME ARGS...: a redis-server on the Unix socket $TMP/NAME.sock (data in
# $TMP/NAME), waited for.
start_redis() {
  local name=$1 i=0
  shift
  mkdir -p "$TMP/$name"
  redis-server --port 0 --unixsocket "$TMP/$name.sock" --save "" --dir "$TMP/$name" "$@" \
    --daemonize no >"$TMP/$name.log" 2>&1 &
  BENCH_PIDS+=("$!")
  until [ -S "$TMP/$name.sock" ]; do
    i=$((i + 1))
    [ $i -gt 1000 ] && { echo "redis-server ($name) did not start" >&2; exit 1; }
    sleep 0.01
  done
}

if command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null; then
  start_redis redis --appendonly no
  echo "-- baseline: redis-benchmark -t set (in memory, no persistence), same client counts"
  for n in 1 16 256; do
    csv=$(redis-benchmark -s "$TMP/redis.sock" -t set -c "$n" -n $((n * 20000 > 200000 ? n * 20000 : 200000)) --csv | tail -1)
    rate=$(cut -d, -f2 <<<"$csv" | tr -d '"')
    p50=$(cut -d, -f5 <<<"$csv" | tr -d '"')
    p99=$(cut -d, -f7 <<<"$csv" | tr -d '"')
    echo "redis  clients=$n rate=${rate%.*} p50_ms=$p50 p99_ms=$p99"
    if [ "$n" = 16 ]; then
      # Two readings of the ratio: each durable request (a reserve or a release) against one
      # SET, which is how the verdict is given (issue 27), and a reserve+release pair per SET,
      # printed beside it.
      r=$(awk -v a="${RATE[16]}" -v b="$rate" 'BEGIN { printf "%.2f", a / b }')
      rq=$(awk -v a="${RATE[16]}" -v b="$rate" 'BEGIN { printf "%.2f", 2 * a / b }')
      echo "ratio at 16 clients: $((2 * RATE[16])) durable requests/s = $rq of Redis's SET rate (aim >= 0.5 per request): $(verdict "$(awk -v r="$rq" 'BEGIN { print (r >= 0.5) }')")"
      echo "  as pairs: gpumd/redis = $r (reserve+release pairs per SET)"
    fi
    if [ "$n" = 256 ]; then
      # Closed loop: each client waits for its reply, so latency = clients / rate (Little's
      # law); Redis's own p99 here shows what the machine allows.
      echo "p99 at 256 clients: gpumd $(awk -v u="${P99[256]}" 'BEGIN { printf "%.2f", u / 1000 }') ms, redis ${p99} ms (aim < 2 ms): $(verdict "$(awk -v u="${P99[256]}" 'BEGIN { print (u < 2000) }')")"
    fi
  done
  # For reference (not the aim's baseline): Redis as durable as gpumd's ledger — every write
  # in its log before the reply, so a crash of the server loses nothing, and the log synced
  # to disk in the background (appendonly yes, appendfsync everysec; gpumd: WAL with
  # synchronous=NORMAL).
  start_redis redis-aof --appendonly yes --appendfsync everysec
  csv=$(redis-benchmark -s "$TMP/redis-aof.sock" -t set -c 16 -n 100000 --csv | tail -1)
  rate=$(cut -d, -f2 <<<"$csv" | tr -d '"')
  p99=$(cut -d, -f7 <<<"$csv" | tr -d '"')
  echo "redis  clients=16 rate=${rate%.*} p99_ms=$p99 (appendonly yes, appendfsync everysec: as durable as gpumd, for reference)"
  echo "ratio at 16 clients: gpumd/durable redis = $(awk -v a="${RATE[16]}" -v b="$rate" 'BEGIN { printf "%.2f", a / b }') (no aim)"
else
  echo "-- baseline skipped: redis-server / redis-benchmark not installed (scripts/deps.sh bench)"
fi

# A node whose GPUs many processes use (inference workers, notebooks): each grant decision
# reads every device's processes afresh and looks for the reservation each belongs to (it or
# an ancestor holds one), so /proc and the driver's process lists count. 64 processes holding
# memory outside reservations (gpum sim hold), 16 clients, beside the figure with none above.
echo "-- 16 clients with 64 processes holding GPU memory on the node (gpum sim hold)"
holders=()
for ((i = 0; i < 64; i++)); do
  holders+=("$("$GPUM" sim hold "$NODE" --device $((i % 2)) --bytes 1MiB)")
done
line=$("$P" rtt "$GPUM_SOCKET" 16 "$SECS")
echo "gpumd  $line"
echo "with 64 processes / with none: $(awk -v a="$(sed -E 's/.* rate=([0-9]+).*/\1/' <<<"$line")" -v b="${RATE[16]}" 'BEGIN { printf "%.2f", a / b }') (no aim)"
kill "${holders[@]}" 2>/dev/null || true

echo "-- resident memory"
base=$(awk '/VmRSS/ { print $2 }' "/proc/$GD/status")
coproc HOLD { "$P" hold "$GPUM_SOCKET" 10000; }
hold_pid=$HOLD_PID
read -r held <&"${HOLD[0]}"
rss=$(awk '/VmRSS/ { print $2 }' "/proc/$GD/status")
echo "gpumd RSS: ${base} KiB idle, ${rss} KiB with $held live reservations (aim < 32768 KiB)"
exec {HOLD[1]}>&-
wait "$hold_pid" 2>/dev/null || true

# Instructions per request (callgrind counts instructions, so the figure holds on a loaded
# machine where the rates above move by ±20%): a gpumd of its own (fresh state) run under
# valgrind --tool=callgrind, counts zeroed once it is ready, 16 clients for CG_SECS seconds
# (default 3), counts dumped; per durable request (a reserve or a release), for the loop thread
# (parsing, scheduler, replies, events) and the other threads (the ledger's writer: SQLite).
echo "-- instructions per durable request (callgrind, 16 clients)"
if ! command -v valgrind >/dev/null || ! command -v callgrind_control >/dev/null; then
  echo "skipped: valgrind is not installed (scripts/deps.sh bench)"
else
  kill "$GD" 2>/dev/null && wait "$GD" 2>/dev/null || true
  GD=""
  export GPUM_STATE_DIR=$TMP/cg-state GPUM_SOCKET=$TMP/cg.sock
  CG=$TMP/callgrind
  bench_gpumd valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$CG"
  callgrind_control -z "$GD" >/dev/null 2>&1
  line=$("$P" rtt "$GPUM_SOCKET" 16 "${CG_SECS:-3}")
  callgrind_control -d "$GD" >/dev/null 2>&1
  kill "$GD" 2>/dev/null && wait "$GD" 2>/dev/null || true
  GD=""
  ops=$(sed -E 's/.* ops=([0-9]+).*/\1/' <<<"$line")
  # The dump: one file per thread; $CG.1-01 is the loop (the main thread), the ledger's threads
  # (writer, checkpoints) are those running its code; the rest (the monitor's readers) count
  # time, not requests, and are left out.
  sum() { cat "$@" 2>/dev/null | awk '/^totals:/ { s += $2 } END { print s + 0 }'; }
  loop=$(sum "$CG".1-01)
  mapfile -t ledger < <(grep -l 'ledger_writer\.c\|ledger_ckpt\.c' "$CG".1-* | grep -v -- '-01$' || true)
  led=$(sum "${ledger[@]}")
  awk -v l="$loop" -v w="$led" -v o="$ops" 'BEGIN {
    r = 2 * o
    if (r == 0) { print "no request completed under callgrind"; exit 1 }
    printf "gpumd  %d requests: %.0f instructions per request: loop thread %.0f, ledger threads %.0f (SQLite)\n", r, (l + w) / r, l / r, w / r
  }'
fi
