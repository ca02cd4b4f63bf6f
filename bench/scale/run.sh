#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/scale: gpumd holding many reservations (issue 27), on a simulated 8x H100 node. The
# p50/p99 of a reserve+release (one client, bench/broker's `broker rtt`, durable) alone and
# while one reader loops without pause over GET /api/v1/reservations, over GET /metrics, and
# over `gpum jobs --json --all`: first on the empty gpumd, then with N granted + N/5 queued
# reservations held (N=5000 unless SCALE_N says otherwise), in the same run and the same
# process. gpumd is pinned to CPU 0, the load and the readers to CPU 1 (taskset, when there
# are two CPUs). Aims: p99 under 5 ms with any one reader running, and a reserve+release
# under 2x the empty daemon's cost (cost = 1 / rate of the single closed-loop client).
# Usage: bench/scale/run.sh BUILD_DIR [SECONDS]. About 8 x SECONDS + the fill (a few s).
# Quick run: SCALE_N=1000 bench/scale/run.sh build 2. Not in `make test`.
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
    "${CC:-cc}" -O2 -std=c17 -D_GNU_SOURCE -Wall -Wextra -o "$OUT/${t%%:*}" "${t#*:}"
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
  list) "${LOAD[@]}" "$OUT/scale" get "$GADDR" /api/v1/reservations >"$TMP/reader.out" & rpid=$! ;;
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

# cost TAG: the time and size of one GET of the list and of /metrics, as a reader sees them.
cost() {
  local p
  for p in /api/v1/reservations /metrics; do
    curl -sS -f -o /dev/null -w "$1  GET $p: %{size_download} bytes in %{time_total}s\n" "http://$GADDR$p"
  done
}

READERS=(none list metrics jobs)
echo "-- empty gpumd"
for r in "${READERS[@]}"; do point empty "$r"; done
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
c=$(awk -v a="${RATE[empty.none]}" -v b="${RATE[full.none]}" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 99) }')
echo "cost of a reserve+release, full / empty = $c (aim < 2): $(verdict "$(awk -v c="$c" 'BEGIN { print (c < 2) }')")"
