#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/enforce: what the enforcement shim costs an allocating program (issue 12's aim: under 5%
# at 1 thread, under 15% at 16). The same program does cuMemAlloc_v2 + cuMemFree_v2 pairs of
# 2 MiB on a simulated H100 node, with and without libgpum_enforce.so preloaded (fence of
# 64 GiB, never reached), 1 and 16 threads; per case the best of 5 runs, alternating with and
# without so that drift of the machine hits both; printed as pairs/s and the ratio.
# Two ways into the driver: linked calls, and dlopen("libcuda.so.1") + dlsym as the CUDA runtime
# does (a libcuda.so.1 that is the simulated driver is put on the loader's path).
# HAMI_VGPU=/path/to/libvgpu.so (HAMi-core, built from its sources; never committed here) adds
# its figure on the dlsym way, beside ours, when its limit is seen to take effect (a check run
# first: an allocation past CUDA_DEVICE_MEMORY_LIMIT must be refused); else it says so.
# Usage: bench/enforce/run.sh BUILD_DIR [PAIRS_PER_THREAD]. About 40 s. Not part of `make test`.
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
    -L"$BUILD/lib" -lgpum_sim -Wl,-rpath,"$BUILD/lib" -lpthread -ldl
fi
DRV=$(mktemp -d)
ln -s "$BUILD/lib/libgpum_sim.so" "$DRV/libcuda.so.1"
ln -s "$BUILD/lib/libgpum_sim.so" "$DRV/libnvidia-ml.so.1"
export GPUM_SIM_LIBRARY=$BUILD/lib/libgpum_sim.so
NODE="bench-enforce-$$"
export GPUM_SIM_NODE=$NODE
"$GPUM" sim start "$SRC/examples/sim/h100x2.yaml" --name "$NODE" >/dev/null
trap '"$GPUM" sim stop "$NODE" >/dev/null 2>&1 || true; rm -rf "$DRV"' EXIT
export LD_LIBRARY_PATH=$DRV${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
rate() { "$@" | sed -E 's/.*pairs_per_s=([0-9]+).*/\1/'; }
HAMI=${HAMI_VGPU:-}
if [ -n "$HAMI" ]; then
  if ! env LD_PRELOAD="$HAMI" CUDA_DEVICE_MEMORY_LIMIT=1g CUDA_DEVICE_MEMORY_SHARED_CACHE="$DRV/hami.cache" \
      "$P" check 1073741824 dlsym >/dev/null 2>&1; then
    echo "HAMi-core ($HAMI): its 1 GiB limit did not take effect on this driver: no figure for it"
    HAMI=
  fi
fi
for WAY in linked dlsym; do
  for T in 1 16; do
    n=$((PAIRS / T))
    best_off=0 best_on=0 best_hami=0
    for _ in 1 2 3 4 5; do
      off=$(rate "$P" "$T" "$n" 2097152 $WAY)
      on=$(rate env LD_PRELOAD="$SHIM" GPUM_MEM_LIMIT=64GiB "$P" "$T" "$n" 2097152 $WAY)
      [ "$off" -gt "$best_off" ] && best_off=$off
      [ "$on" -gt "$best_on" ] && best_on=$on
      if [ -n "$HAMI" ] && [ $WAY = dlsym ]; then
        rm -f "$DRV/hami.cache"
        h=$(rate env LD_PRELOAD="$HAMI" CUDA_DEVICE_MEMORY_LIMIT=64g \
          CUDA_DEVICE_MEMORY_SHARED_CACHE="$DRV/hami.cache" "$P" "$T" "$n" 2097152 dlsym)
        [ "$h" -gt "$best_hami" ] && best_hami=$h
      fi
    done
    awk -v w="$WAY" -v t="$T" -v off="$best_off" -v on="$best_on" -v h="$best_hami" 'BEGIN {
      printf "%-6s %2d thread(s): without the shim %9d pairs/s, with it %9d pairs/s: %.3fx the time (cost %+.1f%%)",
        w, t, off, on, off / on, (off / on - 1) * 100
      if (h > 0) printf "; HAMi-core %9d pairs/s: %.3fx", h, off / h
      printf "\n" }'
  done
done
