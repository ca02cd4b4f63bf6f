#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/enforce: what the enforcement shim costs an allocating program (issue 12's aim: under 5%
# at 1 thread, under 15% at 16). The same program does cuMemAlloc_v2 + cuMemFree_v2 pairs of
# 2 MiB on a simulated H100 node, with and without libgpum_enforce.so preloaded (fence of
# 64 GiB, never reached), 1 and 16 threads; per case the best of 5 runs, alternating with and
# without so that drift of the machine hits both; printed as pairs/s and the ratio.
# HAMi-core's libvgpu.so is not built here: it needs the CUDA toolkit's headers and a fetched
# source tree this machine's network does not reach (docs/enforce.md says how to add it).
# Usage: bench/enforce/run.sh BUILD_DIR [PAIRS_PER_THREAD]. About 20 s. Not part of `make test`.
set -euo pipefail
BUILD=$(cd "${1:?usage: run.sh BUILD_DIR [PAIRS]}" && pwd)
PAIRS=${2:-50000}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
GPUM=$BUILD/bin/gpum
SHIM=$BUILD/lib/libgpum_enforce.so
[ -x "$GPUM" ] && [ -f "$SHIM" ] || { echo "bench/enforce: build first (make build)" >&2; exit 1; }
OUT=$BUILD/bench
mkdir -p "$OUT"
P=$OUT/enforce_pairs
if [ ! -x "$P" ] || [ "$HERE/pairs.c" -nt "$P" ]; then
  "${CC:-cc}" -O2 -std=c17 -D_GNU_SOURCE -I"$SRC/src/abi" -o "$P" "$HERE/pairs.c" \
    -L"$BUILD/lib" -lgpum_sim -Wl,-rpath,"$BUILD/lib" -lpthread
fi
export GPUM_SIM_LIBRARY=$BUILD/lib/libgpum_sim.so
NODE="bench-enforce-$$"
export GPUM_SIM_NODE=$NODE
"$GPUM" sim start "$SRC/examples/sim/h100x2.yaml" --name "$NODE" >/dev/null
trap '"$GPUM" sim stop "$NODE" >/dev/null 2>&1 || true' EXIT
rate() { "$@" | sed -E 's/.*pairs_per_s=([0-9]+).*/\1/'; }
for T in 1 16; do
  n=$((PAIRS / T))
  best_off=0 best_on=0
  for _ in 1 2 3 4 5; do
    off=$(rate "$P" "$T" "$n" 2097152)
    on=$(rate env LD_PRELOAD="$SHIM" GPUM_MEM_LIMIT=64GiB "$P" "$T" "$n" 2097152)
    [ "$off" -gt "$best_off" ] && best_off=$off
    [ "$on" -gt "$best_on" ] && best_on=$on
  done
  awk -v t="$T" -v off="$best_off" -v on="$best_on" 'BEGIN {
    printf "%2d thread(s): without the shim %9d pairs/s, with it %9d pairs/s: %.3fx the time (cost %+.1f%%)\n",
      t, off, on, off / on, (off / on - 1) * 100 }'
done
