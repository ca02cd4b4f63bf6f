#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/pool: the pool allocator's figures, each beside its baseline measured in the same run
# (issue 3):
#   1. hot path: ns of an alloc+free pair (per run the median batch, then the lowest of five
#      runs) over a training-shaped size mix, one thread,
#      gpum pool (simulated source, warmed) beside glibc malloc, jemalloc and mimalloc running
#      the same binary and sequence (LD_PRELOAD). Aim: within 2x of mimalloc. The pool also
#      on a source that reports a device, so that its cache bound is on (docs/pool.md).
#   2. scaling: ns per pair with 100 and with 100,000 live blocks, the victims drawn from the
#      whole live set (random) and from a hot window of 100 of the 100,000 (window). Aim: ratio
#      < 1.5.
#   3. two threads' throughput (pairs/s, one shared pool) against one thread's.
#   4. fragmentation: every log in ../shared/traces/alloc (when present; $GPUM_POOL_TRACES
#      names another directory) and synthetic
#      transformer-training logs (gpum pool gen-trace), per strategy: peak reserved / peak
#      allocated and the bisected minimum capacity / peak live bytes. Aim: 1.05 on
#      training-shaped logs.
# Usage: bench/pool/run.sh BUILD_DIR. jemalloc and mimalloc come from `scripts/deps.sh bench`
# (missing ones are skipped with a note). Not part of `make test`.
set -euo pipefail
BUILD=$(cd "${1:?usage: run.sh BUILD_DIR}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
GPUM=$BUILD/bin/gpum
LIB=$BUILD/lib
[ -x "$GPUM" ] && [ -e "$LIB/libgpum.so" ] || { echo "bench/pool: $BUILD is not built" >&2; exit 1; }
OUT=$BUILD/bench
mkdir -p "$OUT"
HP=$OUT/pool_hotpath
if [ ! -x "$HP" ] || [ "$HERE/hotpath.c" -nt "$HP" ] || [ "$LIB/libgpum.so" -nt "$HP" ]; then
  "${CC:-cc}" -O2 -std=c17 -D_GNU_SOURCE -I"$SRC/include" -o "$HP" "$HERE/hotpath.c" \
    -L"$LIB" -lgpum -Wl,-rpath,"$LIB" -lpthread -lm
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# find_lib NAME: the path of a shared library known to the loader, or nothing.
find_lib() {
  local p
  p=$(/sbin/ldconfig -p 2>/dev/null | awk -v n="$1" '$1 == n { print $NF; exit }')
  [ -z "$p" ] && for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /usr/local/lib; do
    [ -e "$d/$1" ] && { p=$d/$1; break; }
  done
  echo "$p"
}

# field KEY LINE: the value of KEY=... in a pool_hotpath result line.
field() { sed -E "s/.*$1=([0-9.]+).*/\\1/" <<<"$2"; }

# hot MODE [ARGS...]: the lowest of 5 runs' ns_per_pair (each the median of its batches; the
# preload is in $PRELOAD). The lowest, not the median: on a shared machine other work only ever
# adds time, and every allocator is measured the same way.
hot() {
  local mode=$1 r
  shift
  for _ in 1 2 3 4 5; do
    r=$(LD_PRELOAD=${PRELOAD:-} "$HP" "$mode" "$@")
    field ns_per_pair "$r"
  done | sort -n | sed -n 1p
}

# pps MODE [ARGS...]: median over 3 runs of pairs_per_sec.
pps() {
  local mode=$1 r
  shift
  for _ in 1 2 3; do
    r=$(LD_PRELOAD=${PRELOAD:-} "$HP" "$mode" "$@")
    field pairs_per_sec "$r"
  done | sort -n | sed -n 2p
}

echo "-- hot path: alloc+free pair, 1 thread, 100 live blocks, sizes 50% 512B-64KiB,"
echo "   35% 64KiB-1MiB, 13% 1-8MiB, 2% 8-16MiB (log-uniform), median of 300 batches of 1000"
gp=$(PRELOAD="" hot gpum)
# The same pool on a source that reports a device (80 GiB, and 512 MiB, whose default cache
# bound of 1/8, 64 MiB, is below what the live set leaves cached: empty segments go back on free)
gpb=$(PRELOAD="" hot gpum --capacity-mib 81920)
gpt=$(PRELOAD="" hot gpum --capacity-mib 512)
glibc=$(PRELOAD="" hot malloc)
JE=$(find_lib libjemalloc.so.2)
MI=$(find_lib libmimalloc.so.2)
je=""
mi=""
[ -n "$JE" ] && je=$(PRELOAD=$JE hot malloc)
[ -n "$MI" ] && mi=$(PRELOAD=$MI hot malloc)
row() { # NAME NS
  if [ -z "$2" ]; then
    printf "  %-28s %10s\n" "$1" "skipped (not installed: scripts/deps.sh bench)"
  else
    awk -v n="$1" -v x="$2" -v g="$gp" 'BEGIN { printf "  %-28s %8.1f ns   gpum/this %6.2fx\n", n, x, g / x }'
  fi
}
printf "  %-28s %8.1f ns\n" "gpum pool (simulated, warm)" "$gp"
awk -v x="$gpb" -v y="$gpt" -v g="$gp" 'BEGIN {
  printf "  %-28s %8.1f ns   this/no-bound %5.2fx\n", "  cache bound on (80 GiB)", x, x / g
  printf "  %-28s %8.1f ns   this/no-bound %5.2fx\n", "  bound reached (512 MiB)", y, y / g }'
row "glibc malloc" "$glibc"
row "jemalloc (LD_PRELOAD)" "$je"
row "mimalloc (LD_PRELOAD)" "$mi"
if [ -n "$mi" ]; then
  awk -v g="$gp" -v m="$mi" 'BEGIN { printf "  aim: within 2x of mimalloc -> %.2fx: %s the aim\n", g / m, g <= 2 * m ? "meets" : "MISSES" }'
fi

echo "-- scaling: ns per pair with 100 and with 100,000 live blocks (same size mix)"
echo "   random victim: each pair frees a block drawn from the whole live set, so at 100,000 live"
echo "   every pair touches metadata that is not in cache (nodes, map, the benchmark's own array)"
s1=$(PRELOAD="" hot gpum --live 100)
s2=$(PRELOAD="" hot gpum --live 100000)
echo "   hot window: 100,000 live, the pairs free only among 100 of them (the rest stay allocated,"
echo "   like weights while activations churn): the pool is as large, the working set is small"
s3=$(PRELOAD="" hot gpum --live 100000 --window 100)
awk -v a="$s1" -v b="$s2" -v c="$s3" 'BEGIN {
  printf "  gpum pool   100 live %7.1f ns   100,000 random %7.1f ns  ratio %5.2f (aim < 1.5: %s)\n",
    a, b, b / a, b / a < 1.5 ? "meets" : "MISSES"
  printf "  %-11s %20s   100,000 window %7.1f ns  ratio %5.2f (aim < 1.5: %s)\n", "", "",
    c, c / a, c / a < 1.5 ? "meets" : "MISSES" }'
# Baselines: the same live-set sizes and orders for the mallocs; the part of the random ratio
# they share with the pool is cache misses on a larger working set, not the algorithm.
scale_row() { # NAME PRELOAD
  local a b c
  a=$(PRELOAD=$2 hot malloc --live 100)
  b=$(PRELOAD=$2 hot malloc --live 100000)
  c=$(PRELOAD=$2 hot malloc --live 100000 --window 100)
  awk -v n="$1" -v a="$a" -v b="$b" -v c="$c" 'BEGIN {
    printf "  %-11s 100 live %7.1f ns   100,000 random %7.1f ns  ratio %5.2f (baseline)\n", n, a, b, b / a
    printf "  %-11s %20s   100,000 window %7.1f ns  ratio %5.2f (baseline)\n", "", "", c, c / a }'
}
[ -n "$MI" ] && scale_row mimalloc "$MI"
scale_row "glibc" ""

echo "-- threads: aggregate pairs/s, 2 threads on one pool against 1 thread ($(nproc) cores)"
t1=$(PRELOAD="" pps gpum --threads 1)
t2=$(PRELOAD="" pps gpum --threads 2)
awk -v a="$t1" -v b="$t2" 'BEGIN { printf "  gpum pool   1T %.2f M/s  2T %.2f M/s  2T/1T %.2f\n", a / 1e6, b / 1e6, b / a }'
if [ -n "$MI" ]; then
  m1=$(PRELOAD=$MI pps malloc --threads 1)
  m2=$(PRELOAD=$MI pps malloc --threads 2)
  awk -v a="$m1" -v b="$m2" 'BEGIN { printf "  mimalloc    1T %.2f M/s  2T %.2f M/s  2T/1T %.2f (baseline: per-thread heaps)\n", a / 1e6, b / 1e6, b / a }'
fi

echo "-- fragmentation: per strategy, peak reserved / peak allocated and min capacity / peak live"
TRACES=()
# The recorded traces: $GPUM_POOL_TRACES, else ../shared/traces/alloc beside the checkout (for a
# worktree under wt/, beside the directory that holds it).
SHARED=${GPUM_POOL_TRACES:-"$(dirname "$SRC")/shared/traces/alloc"}
[ -n "${GPUM_POOL_TRACES:-}" ] || [ -d "$SHARED" ] ||
  SHARED="$(dirname "$(dirname "$SRC")")/shared/traces/alloc"
if [ -d "$SHARED" ]; then
  for f in "$SHARED"/*.csv; do TRACES+=("$f"); done
else
  echo "  (no $SHARED: recorded traces skipped)"
fi
"$GPUM" pool gen-trace transformer --steps 40 --output "$TMP/transformer-12L-h1024.csv"
"$GPUM" pool gen-trace transformer --layers 24 --hidden 2048 --heads 16 --seq 2048 --batch 4 \
  --steps 6 --flash --seed 3 --output "$TMP/transformer-24L-h2048-flash.csv"
TRACES+=("$TMP/transformer-12L-h1024.csv" "$TMP/transformer-24L-h2048-flash.csv")
for f in "${TRACES[@]}"; do
  "$GPUM" pool replay "$f" --strategy all --find-min-capacity --json >"$TMP/r.json" ||
    { echo "  $(basename "$f"): replay failed" >&2; continue; }
  python3 - "$TMP/r.json" "$(basename "$f" .csv)" <<'EOF'
import json, sys
runs = json.load(open(sys.argv[1]))
name = sys.argv[2]
static = name.startswith("minimalloc")
live = runs[0]["peak_live_bytes"]
print(f"  {name}: {runs[0]['log']['rows']} rows, peak live {live / 2**20:.2f} MiB"
      + ("  (static 1 MiB packing problem: an online allocator cannot reach 1.0)" if static else ""))
for r in runs:
    m = r["min_capacity"]
    tag = "" if static else ("  meets 1.05" if m["over_live"] <= 1.05 else "  above 1.05")
    print(f"    {r['strategy']:<20} reserved/alloc {r['reserved_over_allocated']:6.3f}"
          f"   min-capacity/live {m['over_live']:6.3f}   OOM-free at {m['bytes'] / 2**20:10.2f} MiB"
          f"   {r['ns_per_op']:6.1f} ns/op{tag}")
EOF
done
echo "  aim: min-capacity/live <= 1.05 on training-shaped traces (PyTorch reaches ~1.13 on a real run)"
