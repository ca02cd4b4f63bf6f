#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/monitor: what the monitor costs on a simulated 8x A100 node (issue 4), each figure
# beside a baseline measured in the same run:
#   1. CPU time of a running gpum_monitor_t (sampler, 8 device workers, event thread) per second
#      of wall time, as a share of one core, at 1 Hz and 10 Hz; beside the CPU time of the same
#      number of gpum_device_sample calls made in a plain loop (the driver's own cost) and of an
#      idle process. Aim: under 0.1% at 1 Hz (issue 27).
#   1b. Instructions per sample (valgrind --tool=callgrind, when installed: scripts/deps.sh
#      bench; skipped with a note otherwise): the running monitor's (all its threads, counted
#      after its first rounds) beside the same sample calls in a loop. Instructions do not move
#      with the machine's load as CPU times do; they leave out the kernel's time (thread
#      wake-ups), which the CPU share includes.
#   2. Memory for 1 h of history of 8 GPUs at 1 Hz: the heap a monitor allocates for it
#      (mallinfo2), and the RSS growth of a monitor whose rings are full (3600 samples per
#      device, filled at 1 kHz). Aim: under 8 MiB.
# Usage: bench/monitor/run.sh BUILD_DIR [SECONDS_AT_1HZ]. About 40 s. Not part of `make test`.
set -euo pipefail
BUILD=$(cd "${1:?usage: run.sh BUILD_DIR [SECONDS_AT_1HZ]}" && pwd)
SECS=${2:-15}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
GPUM=$BUILD/bin/gpum
LIB=$BUILD/lib
[ -x "$GPUM" ] && [ -e "$LIB/libgpum.so" ] || { echo "bench/monitor: $BUILD is not built" >&2; exit 1; }
OUT=$BUILD/bench
mkdir -p "$OUT"
P=$OUT/monitor_sampler_cpu
if [ ! -x "$P" ] || [ "$HERE/sampler_cpu.c" -nt "$P" ] || [ "$LIB/libgpum.so" -nt "$P" ]; then
  "${CC:-cc}" -O2 -std=c17 -D_GNU_SOURCE -I"$SRC/include" -o "$P" "$HERE/sampler_cpu.c" \
    -L"$LIB" -lgpum -Wl,-rpath,"$LIB" -lpthread
fi
export GPUM_SIM_LIBRARY=${GPUM_SIM_LIBRARY:-$LIB/libgpum_sim.so}
unset GPUM_CONFIG GPUM_BACKEND GPUM_DEVICES GPUM_NVML_LIBRARY
NODE="bench-monitor-$$"
export GPUM_SIM_NODE=$NODE
"$GPUM" sim start "$SRC/examples/sim/a100x8.yaml" --name "$NODE" >/dev/null
trap '"$GPUM" sim stop "$NODE" >/dev/null 2>&1 || true' EXIT

# field KEY LINE: the value of KEY=... in a result line.
field() { sed -E "s/.*(^| )$1=([^ ]+).*/\\2/" <<<"$2"; }

echo "gpum monitor on a simulated 8x A100 node ($(nproc) CPUs)"
echo "-- CPU per second of wall time, share of one core"
idle=$("$P" idle 0 2)
printf "  %-46s %8.4f %%\n" "idle process (sleeps 2 s)" "$(field share_pct "$idle")"
for hz in 1 10; do
  secs=$SECS
  [ "$hz" -eq 10 ] && secs=$(((SECS + 1) / 2))
  mon=$("$P" monitor "$hz" "$secs")
  loop=$("$P" loop "$hz" "$secs")
  printf "  %-46s %8.4f %%   (%s samples in %s s)\n" "monitor, 8 GPUs at $hz Hz" \
    "$(field share_pct "$mon")" "$(field samples "$mon")" "$(field wall_s "$mon")"
  printf "  %-46s %8.4f %%\n" "baseline: the same sample calls in a loop" "$(field share_pct "$loop")"
  if [ "$hz" -eq 1 ]; then
    verdict=$(awk -v s="$(field share_pct "$mon")" 'BEGIN { print (s < 0.1 ? "meets" : "MISSES") }')
    echo "  aim at 1 Hz: under 0.1% -> $verdict the aim"
  fi
done

echo "-- instructions per sample at 1 Hz (callgrind)"
if ! command -v valgrind >/dev/null; then
  echo "  skipped: valgrind is not installed (scripts/deps.sh bench)"
else
  # cg MODE: "IR SAMPLES" of a callgrind run of MODE: the totals line of the dump the program
  # asks for (the costs counted since its zero; stable per sample, unlike the summary line).
  cg() {
    local out=$OUT/callgrind-$1 line
    rm -f "$out" "$out".*
    line=$(valgrind --tool=callgrind --callgrind-out-file="$out" "$P" "$1" 1 "${CG_SECS:-6}" 2>/dev/null) ||
      return 1
    echo "$(awk '/^totals:/ { print $2 }' "$out".1) $(field samples "$line")"
  }
  if mon_cg=$(cg cgmonitor) && loop_cg=$(cg cgloop); then
    read -r mir msamples <<<"$mon_cg"
    read -r lir lsamples <<<"$loop_cg"
    awk -v a="$mir" -v n="$msamples" -v b="$lir" -v m="$lsamples" 'BEGIN {
      if (n == 0 || m == 0) { print "  no samples under callgrind"; exit 1 }
      printf "  %-46s %8.0f   (%d samples)\n", "monitor, 8 GPUs at 1 Hz (all its threads)", a / n, n
      printf "  %-46s %8.0f   (%.2fx)\n", "baseline: the same sample calls in a loop", b / m, (a / n) / (b / m)
    }'
  else
    echo "  skipped: the callgrind run failed (sampler_cpu built without valgrind/callgrind.h?)"
  fi
fi

echo "-- memory for 1 h of history of 8 GPUs at 1 Hz (3600 samples per device)"
mem=$("$P" memory 1 3600)
fill=$("$P" fill 0 3600)
heap=$(field heap_bytes "$mem")
rss=$(field rss_delta_bytes "$fill")
awk -v h="$heap" -v r="$rss" 'BEGIN {
  printf "  %-46s %8.2f MiB\n", "heap allocated by the monitor (mallinfo2)", h / 1048576
  printf "  %-46s %8.2f MiB\n", "RSS growth with full rings (incl. threads)", r / 1048576
  printf "  %-46s %8.2f MiB\n", "payload: 8 x 3600 samples x 64 B", 8 * 3600 * 64 / 1048576
  printf "  aim: under 8 MiB -> %s the aim\n", ((h > r ? h : r) < 8 * 1048576 ? "meets" : "MISSES")
}'
