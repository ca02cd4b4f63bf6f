#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/tiercache: the tiered cache on a Zipf key popularity trace, read-through, on a simulated
# H100 node (tiercache.c says how): hit rate per tier against Belady's MIN on the same trace with
# the same capacity, the ratios, and operations per second. No GPU needed. A few seconds.
# Usage: bench/tiercache/run.sh BUILD_DIR [KEYS OPS S SIZE DEV PIN SEED]. Not part of `make test`.
set -euo pipefail
BUILD=$(cd "${1:?usage: run.sh BUILD_DIR [KEYS OPS S SIZE DEV PIN SEED]}" && pwd)
shift
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
GPUM=$BUILD/bin/gpum
[ -x "$GPUM" ] && [ -f "$BUILD/lib/libgpum.so" ] || { echo "bench/tiercache: build first (make build)" >&2; exit 1; }
OUT=$BUILD/bench
mkdir -p "$OUT"
P=$OUT/tiercache
if [ ! -x "$P" ] || [ "$HERE/tiercache.c" -nt "$P" ] || [ "$SRC/include/gpum/tiercache.h" -nt "$P" ]; then
  "${CC:-cc}" -O2 -std=c17 -D_GNU_SOURCE -I"$SRC/include" -I"$BUILD/include" -o "$P" \
    "$HERE/tiercache.c" -L"$BUILD/lib" -lgpum -Wl,-rpath,"$BUILD/lib" -lm
fi
export GPUM_SIM_LIBRARY=$BUILD/lib/libgpum_sim.so
NODE="bench-tiercache-$$"
export GPUM_SIM_NODE=$NODE
unset GPUM_CUDA_LIBRARY GPUM_MEM_LIMIT
"$GPUM" sim start "$SRC/examples/sim/h100x2.yaml" --name "$NODE" >/dev/null
trap '"$GPUM" sim stop "$NODE" >/dev/null 2>&1 || true' EXIT
"$P" "$@"
