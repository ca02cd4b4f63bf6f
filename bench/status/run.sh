#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/status: the median wall time of `gpum status --json` on a simulated 8-GPU node, beside
# the median of /bin/true measured in the same run with the same harness (hyperfine when
# installed, else bench/status/timeexec.c). Aim (issue 2): status < 3x /bin/true + 5 ms.
# Usage: bench/status/run.sh BUILD_DIR [RUNS]. Not part of `make test`.
set -euo pipefail
BUILD=$(cd "${1:?usage: run.sh BUILD_DIR [RUNS]}" && pwd)
RUNS=${2:-50}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
GPUM=$BUILD/bin/gpum
[ -x "$GPUM" ] || { echo "bench/status: $GPUM not built" >&2; exit 1; }
export GPUM_SIM_LIBRARY=${GPUM_SIM_LIBRARY:-$BUILD/lib/libgpum_sim.so}
unset GPUM_CONFIG GPUM_BACKEND GPUM_DEVICES GPUM_NVML_LIBRARY
NODE="bench-status-$$"
export GPUM_SIM_NODE=$NODE
"$GPUM" sim start "$SRC/examples/sim/a100x8.yaml" --name "$NODE" >/dev/null
trap '"$GPUM" sim stop "$NODE" >/dev/null 2>&1 || true' EXIT
"$GPUM" status --json >/dev/null # fail early (and warm the page cache)

TRUE=$(command -v true)
[ -x /bin/true ] && TRUE=/bin/true
if command -v hyperfine >/dev/null 2>&1; then
  tool=hyperfine
  json=$(mktemp)
  hyperfine -N --warmup 5 --runs "$RUNS" --export-json "$json" \
    "$TRUE" "$GPUM status --json" >/dev/null 2>&1
  read -r true_us status_us < <(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["results"]
print(" ".join(str(int(x["median"] * 1e6)) for x in r))' "$json")
  rm -f "$json"
else
  tool="timeexec (posix_spawn + waitpid)"
  TIMER=$BUILD/bench/timeexec
  if [ ! -x "$TIMER" ] || [ "$HERE/timeexec.c" -nt "$TIMER" ]; then
    mkdir -p "$BUILD/bench"
    "${CC:-cc}" -O2 -std=c17 -D_GNU_SOURCE -o "$TIMER" "$HERE/timeexec.c"
  fi
  "$TIMER" 5 "$GPUM" status --json >/dev/null # warm-up
  true_us=$("$TIMER" "$RUNS" "$TRUE" | sed -E 's/^median_us=([0-9]+).*/\1/')
  status_us=$("$TIMER" "$RUNS" "$GPUM" status --json | sed -E 's/^median_us=([0-9]+).*/\1/')
fi

aim_us=$((3 * true_us + 5000))
verdict=$([ "$status_us" -lt "$aim_us" ] && echo "meets" || echo "MISSES")
awk -v s="$status_us" -v t="$true_us" -v a="$aim_us" -v v="$verdict" -v n="$RUNS" -v tool="$tool" '
BEGIN {
  printf "gpum status --json, simulated 8x A100, %d runs (%s)\n", n, tool
  printf "  median gpum status --json : %8.2f ms\n", s / 1000
  printf "  median /bin/true          : %8.2f ms\n", t / 1000
  printf "  ratio                     : %8.2fx\n", (t > 0 ? s / t : 0)
  printf "  aim 3x /bin/true + 5 ms   : %8.2f ms -> %s the aim\n", a / 1000, v
}'
