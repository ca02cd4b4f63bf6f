#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/scale: gpumd holding many reservations (issue 27), on a simulated 8x H100 node. The
# p50/p99 of a reserve+release (one client, bench/broker's `broker rtt`, durable) alone and
# while one reader loops without pause over GET /api/v1/reservations?limit=10000 (the whole
# list in one page: the most one request can ask), over GET /metrics, and
# over `gpum jobs --json --all`: first on the empty gpumd, then with N granted + N/5 queued
# reservations held (N=5000 unless SCALE_N says otherwise), in the same run and the same
# process. gpumd is pinned to CPU 0, the load and the readers to CPU 1 (taskset, when there
# are two CPUs). Aims: p99 under 5 ms with any one reader running, and a reserve+release
# under 2x the empty daemon's cost (cost = 1 / rate of the single closed-loop client), also
# with 64 processes holding memory on the node (the reservation each belongs to is looked up
# at every grant decision).
# Then, where valgrind is installed (SCALE_CALLGRIND=0 skips it), the same empty/full pair under
# callgrind: instructions per reserve+release (gpumd's threads, the simulated driver included),
# a figure a loaded machine does not move; and the instructions of one `gpum jobs` beside its
# time.
# Usage: bench/scale/run.sh BUILD_DIR [SECONDS]. About 8 x SECONDS + the fills + 2 minutes under
# callgrind. Quick run: SCALE_N=1000 SCALE_CALLGRIND=0 bench/scale/run.sh build 2. Not in
# `make test`.
set -euo pipefail
BUILD=$(cd "${1:?usage: run.sh BUILD_DIR [SECONDS]}" && pwd)
SECS=${2:-5}
N=${SCALE_N:-5000}
Q=$((N / 5))
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
GPUM=$BUILD/bin/gpum
GPUMD=$BUILD/bin/gpumd
[ -x "$GPUM" ] && [ -x "$GPUMD" ] || { echo "bench/scale: $BUILD is not built" >&2; exit 1; }
OUT=$BUILD/bench
mkdir -p "$OUT"
for t in broker:"$HERE/../broker/broker.c" scale:"$HERE/scale.c"; do
  if [ ! -x "$OUT/${t%%:*}" ] || [ "${t#*:}" -nt "$OUT/${t%%:*}" ]; then
    "${CC:-cc}" -O2 -std=c17 -D_GNU_SOURCE -Wall -Wextra -I"$HERE/.." -o "$OUT/${t%%:*}" "${t#*:}"
  fi
done
export GPUM_HTTP_LISTEN=127.0.0.1:0 GPUM_LOG_LEVEL=error
source "$HERE/../gpumd_lib.sh"
bench_node bench-scale "$SRC/examples/sim/8xh100.yaml"
bench_gpumd
GADDR=$(cat "$GPUM_STATE_DIR/http.addr")
LOAD=()
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
  taskset -a -p -c 0 "$GD" >/dev/null
  LOAD=(taskset -c 1)
  echo "gpumd pinned to CPU 0, the load and the readers to CPU 1 ($(nproc) CPUs), ${SECS}s per point"
else
  echo "gpumd and the load share the CPUs ($(nproc) CPUs, no pinning), ${SECS}s per point"
fi

# A reader of `gpum jobs --json --all`, looping until killed (exits 1 at its first failure).
jobs_loop() {
  while "$GPUM" jobs --json --all >/dev/null 2>"$TMP/jobs.err"; do :; done
  exit 1
}

# rtt TAG READER: one reserve+release point with READER running (none/list/metrics/jobs);
# prints its line and sets P50, P99 and RATE.
declare -A P50 P99 RATE
point() {
  local tag=$1 reader=$2 rpid="" line extra=""
  case $reader in
  list) "${LOAD[@]}" "$OUT/scale" get "$GADDR" "/api/v1/reservations?limit=10000" >"$TMP/reader.out" & rpid=$! ;;
  metrics) "${LOAD[@]}" "$OUT/scale" get "$GADDR" /metrics >"$TMP/reader.out" & rpid=$! ;;
  jobs)
    if ! "$GPUM" jobs --json --all >/dev/null 2>"$TMP/jobs.err"; then
      printf '%-5s  reader=jobs    skipped: %s\n' "$tag" "gpum jobs --json --all fails: $(head -c 200 "$TMP/jobs.err")"
      return 0
    fi
    # shellcheck disable=SC2016
    "${LOAD[@]}" bash -c "$(declare -f jobs_loop); GPUM='$GPUM' TMP='$TMP'; jobs_loop" & rpid=$!
    ;;
  esac
  line=$("${LOAD[@]}" "$OUT/broker" rtt "$GPUM_SOCKET" 1 "$SECS")
  if [ -n "$rpid" ]; then
    kill "$rpid" 2>/dev/null || true
    wait "$rpid" 2>/dev/null || true
    [ "$reader" != jobs ] && extra=" reader_$(tr '\n' ' ' <"$TMP/reader.out")"
  fi
  P50[$tag.$reader]=$(sed -E 's/.* p50_us=([0-9]+).*/\1/' <<<"$line")
  P99[$tag.$reader]=$(sed -E 's/.* p99_us=([0-9]+).*/\1/' <<<"$line")
  RATE[$tag.$reader]=$(sed -E 's/.* rate=([0-9]+).*/\1/' <<<"$line")
  printf '%-5s  reader=%-7s p50_ms=%s p99_ms=%s rate=%s/s%s\n' "$tag" "$reader" \
    "$(awk -v u="${P50[$tag.$reader]}" 'BEGIN { printf "%.2f", u / 1000 }')" \
    "$(awk -v u="${P99[$tag.$reader]}" 'BEGIN { printf "%.2f", u / 1000 }')" \
    "${RATE[$tag.$reader]}" "$extra"
}

# jobs_instr ARGS...: the instructions of one `gpum jobs ARGS` (callgrind: the CLI's own figure,
# which a loaded machine does not move), empty when valgrind is not there or SCALE_CALLGRIND=0.
jobs_instr() {
  [ "${SCALE_CALLGRIND:-1}" != 0 ] && command -v valgrind >/dev/null || return 0
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$GPUM" jobs "$@" 2>&1 >/dev/null |
    sed -nE 's/.*Collected : ([0-9]+).*/\1/p'
}

# cost TAG: the time and size of one GET of the list and of /metrics, as a reader sees them,
# and the best of three runs of `gpum jobs --all` and `gpum jobs --json --all` (JOBS_MS[TAG.how]),
# with the instructions of one (JOBS_IR[TAG.how]).
declare -A JOBS_MS JOBS_IR
cost() {
  local p how t0 t1 best k ir
  for p in "/api/v1/reservations?limit=10000" /metrics; do
    curl -sS -f -o /dev/null -w "$1  GET $p: %{size_download} bytes in %{time_total}s\n" "http://$GADDR$p"
  done
  for how in table json; do
    best=
    for k in 1 2 3; do
      t0=$(date +%s%N)
      if [ "$how" = json ]; then "$GPUM" jobs --json --all >/dev/null; else "$GPUM" jobs --all >/dev/null; fi
      t1=$(date +%s%N)
      [ -z "$best" ] || [ $((t1 - t0)) -lt "$best" ] && best=$((t1 - t0))
    done
    JOBS_MS[$1.$how]=$(awk -v n="$best" 'BEGIN { printf "%.1f", n / 1e6 }')
    if [ "$how" = json ]; then ir=$(jobs_instr --json --all); else ir=$(jobs_instr --all); fi
    JOBS_IR[$1.$how]=${ir:+$(awk -v n="$ir" 'BEGIN { printf "%.3f G instructions", n / 1e9 }')}
    echo "$1  gpum jobs $([ "$how" = json ] && echo "--json ")--all: ${JOBS_MS[$1.$how]} ms (best of 3)${ir:+, ${JOBS_IR[$1.$how]}}"
  done
}

# point_procs TAG: point TAG.none with 64 processes holding GPU memory on the node (gpum sim
# hold, outside reservations): each grant decision reads every device's processes afresh and
# looks for the reservation each belongs to, which must not cost more with more reservations.
point_procs() {
  local holders=() i
  for ((i = 0; i < 64; i++)); do
    holders+=("$("$GPUM" sim hold "$NODE" --device $((i % 8)) --bytes 1MiB)")
  done
  point "$1" none
  kill "${holders[@]}" 2>/dev/null || true
}

READERS=(none list metrics jobs)
echo "-- empty gpumd"
for r in "${READERS[@]}"; do point empty "$r"; done
point_procs empty64
cost empty
rss0=$(awk '/VmRSS/ { print $2 }' "/proc/$GD/status")

echo "-- filling: $N granted + $Q queued (one connection holds them)"
coproc FILL { "${LOAD[@]}" "$OUT/scale" fill "$GPUM_SOCKET" "$N" "$Q"; }
fill_pid=$FILL_PID
read -r held <&"${FILL[0]}"
echo "held: $held"
rss1=$(awk '/VmRSS/ { print $2 }' "/proc/$GD/status")
echo "gpumd RSS: ${rss0} KiB empty, ${rss1} KiB full: $(((rss1 - rss0) * 1024 / (N + Q))) bytes per reservation"
for r in "${READERS[@]}"; do point full "$r"; done
point_procs full64
cost full
exec {FILL[1]}>&-
wait "$fill_pid" 2>/dev/null || true

verdict() { if [ "$1" = 1 ]; then echo MEETS; else echo MISSES; fi; }
echo "-- aims ($N granted + $Q queued)"
for r in "${READERS[@]}"; do
  [ -n "${P99[full.$r]:-}" ] || { echo "p99 with reader=$r: not measured"; continue; }
  u=${P99[full.$r]}
  echo "p99 with reader=$r: $(awk -v u="$u" 'BEGIN { printf "%.2f", u / 1000 }') ms (empty: $(awk -v u="${P99[empty.$r]}" 'BEGIN { printf "%.2f", u / 1000 }') ms; aim < 5 ms): $(verdict "$(awk -v u="$u" 'BEGIN { print (u < 5000) }')")"
done
for how in table json; do
  m=${JOBS_MS[full.$how]}
  ir=${JOBS_IR[full.$how]:+, ${JOBS_IR[full.$how]} (empty: ${JOBS_IR[empty.$how]})}
  echo "gpum jobs $([ "$how" = json ] && echo "--json ")--all over $((N + Q)): $m ms (empty: ${JOBS_MS[empty.$how]} ms)$ir; aim < 100 ms for 6,000: $(verdict "$(awk -v m="$m" 'BEGIN { print (m < 100) }')")"
done
c=$(awk -v a="${RATE[empty.none]}" -v b="${RATE[full.none]}" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 99) }')
echo "cost of a reserve+release, full / empty = $c (aim < 2): $(verdict "$(awk -v c="$c" 'BEGIN { print (c < 2) }')")"
c=$(awk -v a="${RATE[empty64.none]}" -v b="${RATE[full64.none]}" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 99) }')
echo "the same with 64 processes using the GPUs, full / empty = $c (aim < 2): $(verdict "$(awk -v c="$c" 'BEGIN { print (c < 2) }')")"

# ---- instructions per reserve+release (callgrind) -----------------------------------------
if [ "${SCALE_CALLGRIND:-1}" = 0 ] || ! command -v valgrind >/dev/null || ! command -v callgrind_control >/dev/null; then
  echo "-- callgrind: skipped (SCALE_CALLGRIND=0, or valgrind not installed)"
  exit 0
fi
kill "$GD" 2>/dev/null && wait "$GD" 2>/dev/null || true
export GPUM_STATE_DIR=$TMP/state-cg GPUM_SOCKET=$TMP/cg.sock GPUM_HTTP_LISTEN=off
bench_gpumd valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$TMP/cg.out.%p"
# cg_point TAG: instructions per reserve+release over SECONDS of the one-client load.
declare -A IPO
cg_point() {
  local line ops ir f
  callgrind_control -z "$GD" >/dev/null 2>&1
  callgrind_control -i on "$GD" >/dev/null 2>&1
  line=$("$OUT/broker" rtt "$GPUM_SOCKET" 1 "$SECS")
  callgrind_control -i off "$GD" >/dev/null 2>&1
  callgrind_control -d "$1" "$GD" >/dev/null 2>&1
  ops=$(sed -E 's/.* ops=([0-9]+).*/\1/' <<<"$line")
  f=$(ls -t "$TMP"/cg.out.* | head -1)
  ir=$(awk '/^totals:/ { print $2; exit }' "$f")
  IPO[$1]=$((ir / (ops > 0 ? ops : 1)))
  echo "$1  callgrind: $ops reserve+release, ${IPO[$1]} instructions each"
}
echo "-- callgrind (gpumd under valgrind; ${SECS}s per point)"
cg_point empty
coproc FILL2 { "$OUT/scale" fill "$GPUM_SOCKET" "$N" "$Q"; }
fill2_pid=$FILL2_PID
read -r held <&"${FILL2[0]}"
cg_point full
exec {FILL2[1]}>&-
wait "$fill2_pid" 2>/dev/null || true
c=$(awk -v a="${IPO[empty]}" -v b="${IPO[full]}" 'BEGIN { printf "%.2f", (a > 0 ? b / a : 99) }')
echo "instructions per reserve+release, full / empty = $c (aim < 2): $(verdict "$(awk -v c="$c" 'BEGIN { print (c < 2) }')")"
