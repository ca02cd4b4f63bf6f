#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/adaptive: the adaptive batch runner against a fixed batch, the 85%/50% rule it
# replaces, and an oracle, on 10 million simulated items under a pressure trace (adaptive.c
# says how). Prints OOMs, items per second, peak memory, lost and duplicated items for each,
# and gpum's ratios against the aims. No GPU needed. About 20 s.
# Usage: bench/adaptive/run.sh BUILD_DIR [ITEMS] [SEED]. Not part of `make test`.
set -euo pipefail
BUILD=$(cd "${1:?usage: run.sh BUILD_DIR [ITEMS] [SEED]}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
[ -f "$BUILD/lib/libgpum.so" ] || { echo "bench/adaptive: build first (make build)" >&2; exit 1; }
OUT=$BUILD/bench
mkdir -p "$OUT"
P=$OUT/adaptive
if [ ! -x "$P" ] || [ "$HERE/adaptive.c" -nt "$P" ] || [ "$SRC/include/gpum/batch.h" -nt "$P" ]; then
  "${CC:-cc}" -O2 -std=c17 -D_GNU_SOURCE -I"$SRC/include" -I"$BUILD/include" -o "$P" \
    "$HERE/adaptive.c" -L"$BUILD/lib" -lgpum -Wl,-rpath,"$BUILD/lib" -lm
fi
"$P" "${2:-10000000}" "${3:-42}"
