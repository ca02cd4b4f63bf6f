#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/suspend: the time to suspend (gpum_ckpt_lock + checkpoint) and resume (restore + unlock)
# a job holding 1, 8 and 32 GiB on the simulated driver (issue 28), through libgpum's
# gpum/checkpoint.h, each beside a plain memcpy of the same bytes measured in the same run (the
# floor): seconds, the ratios to the memcpy, GB/s; the job's pattern is checked after resume
# (suspend.c says how). On a simulated 2x H100 80GB node. The simulated device memory is host
# memory: a size this machine's MemAvailable cannot hold with a margin is skipped with the
# reason, and so is one the time budget would not cover. The real driver's figures come from the
# device check's `checkpoint` check (docs/hardware.md), not from here.
# Usage: bench/suspend/run.sh BUILD_DIR [SIZES_MIB [BUDGET_S [CYCLES]]] (default 1024,8192,32768,
# 120 s, 5 cycles). 15-30 s with 1 and 8 GiB (mostly the target writing its pattern, untimed).
# Not part of `make test`.
set -euo pipefail
BUILD=$(cd "${1:?usage: run.sh BUILD_DIR [SIZES_MIB [BUDGET_S [CYCLES]]]}" && pwd)
shift
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
GPUM=$BUILD/bin/gpum
[ -x "$GPUM" ] && [ -f "$BUILD/lib/libgpum.so" ] && [ -f "$BUILD/lib/libgpum_sim.so" ] ||
  { echo "bench/suspend: build first (make build)" >&2; exit 1; }
OUT=$BUILD/bench
mkdir -p "$OUT"
P=$OUT/suspend
if [ ! -x "$P" ] || [ "$HERE/suspend.c" -nt "$P" ] || [ "$SRC/include/gpum/checkpoint.h" -nt "$P" ]; then
  "${CC:-cc}" -O2 -std=c17 -D_GNU_SOURCE -Wall -Wextra -Werror -I"$SRC/include" -I"$BUILD/include" \
    -I"$SRC/src/abi" -o "$P" "$HERE/suspend.c" -L"$BUILD/lib" -lgpum_sim -lgpum \
    -Wl,-rpath,"$BUILD/lib" -lpthread -ldl
fi
export GPUM_SIM_LIBRARY=$BUILD/lib/libgpum_sim.so
unset GPUM_CUDA_LIBRARY GPUM_MEM_LIMIT GPUM_CONFIG GPUM_BACKEND GPUM_DEVICES GPUM_NVML_LIBRARY
NODE="bench-suspend-$$"
export GPUM_SIM_NODE=$NODE
"$GPUM" sim start "$SRC/examples/sim/h100x2.yaml" --name "$NODE" >/dev/null
trap '"$GPUM" sim stop "$NODE" >/dev/null 2>&1 || true' EXIT
thp=$(sed -E 's/.*\[(.*)\].*/\1/' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo unknown)
echo "suspend/resume on a simulated 2x H100 80GB node ($(nproc) CPUs, $(awk '/MemAvailable/ { printf "%.1f", $2 / 1048576 }' /proc/meminfo) GiB available, THP $thp),"
echo "the target's memory in 256 MiB allocations; lowest of ${3:-5} cycles; memcpy: the same bytes, host to host"
"$P" "$@"
echo "The simulator's checkpoint moves pages with mremap (no copy): these times say what gpum and"
echo "the simulated driver add, not what a GPU costs (docs/hardware.md has the real driver's)."
