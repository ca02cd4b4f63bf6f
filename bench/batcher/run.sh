#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/batcher: the dynamic request batcher against calling the model once per request (a plain
# queue), with a model costing a fixed launch time plus a time per request (a busy spin), at
# offered loads from 25% of the unbatched capacity to 10 times it (batcher.c says how): the
# throughput of each way and their ratio, p50/p99 latency, the batcher's CPU per request, and
# the check p99 <= max_queue_delay + one batch's execution + the p99 wake-up lateness of a
# timed wait measured during the same run; then the batcher's own CPU cost with a model of no cost against the plain queue
# (aim < 2 us a request). No GPU needed. About 7 s (SECONDS, 0.5 by default, a load and way).
# Usage: bench/batcher/run.sh BUILD_DIR [SECONDS WORKERS SEED]. Not part of `make test`.
set -euo pipefail
BUILD=$(cd "${1:?usage: run.sh BUILD_DIR [SECONDS WORKERS SEED]}" && pwd)
shift
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
[ -f "$BUILD/lib/libgpum.so" ] || { echo "bench/batcher: build first (make build)" >&2; exit 1; }
OUT=$BUILD/bench
mkdir -p "$OUT"
P=$OUT/batcher
if [ ! -x "$P" ] || [ "$HERE/batcher.c" -nt "$P" ] || [ "$SRC/include/gpum/batcher.h" -nt "$P" ]; then
  "${CC:-cc}" -O2 -std=c17 -D_GNU_SOURCE -Wall -Wextra -Werror -I"$SRC/include" -I"$BUILD/include" \
    -o "$P" "$HERE/batcher.c" -L"$BUILD/lib" -lgpum -Wl,-rpath,"$BUILD/lib" -lpthread -lm
fi
"$P" "$@"
