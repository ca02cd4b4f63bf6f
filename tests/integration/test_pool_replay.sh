#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `gpum pool replay` and `gpum pool gen-trace` end to end, on logs this test writes itself: a
# generated transformer trace replayed as text and JSON, per strategy and with --strategy all,
# the capacity bisection on a log whose answer is known, OOM counting under a small capacity,
# RMM's clock-string Time, the cache bound (--cache-limit) and the reservation as a limit, and
# every error with its exit code (1 for a missing or malformed log, 2 for usage) and nothing on
# stdout.
source "$(dirname "$0")/lib.sh"

G=$GPUM_BIN
T=$T_SCRATCH/tf.csv

# --- help ---
t_expect 0 "$G" pool --help
grep -Eq '^  replay +Replay an RMM CSV allocation log' "$T_OUT" || t_fail "gpum pool --help lacks replay"
t_expect 0 "$G" pool replay --help
grep -q -- '--find-min-capacity' "$T_OUT" || t_fail "replay --help lacks --find-min-capacity"
t_expect 0 "$G" pool gen-trace --help
grep -q -- '--layers' "$T_OUT" || t_fail "gen-trace --help lacks --layers"
t_expect 0 "$G" --help
grep -q '^  pool ' "$T_OUT" || t_fail "gpum --help lacks the pool command"
t_ok "help"

# --- gen-trace ---
t_expect 0 "$G" pool gen-trace transformer --layers 2 --hidden 256 --heads 4 --seq 128 \
  --batch 2 --vocab 1000 --steps 3 --seed 7 --output "$T"
head -n 1 "$T" | grep -qx 'Thread,Time,Action,Pointer,Size,Stream' || t_fail "bad header"
rows=$(($(wc -l <"$T") - 1))
[ "$rows" -gt 100 ] || t_fail "only $rows rows"
"$G" pool gen-trace transformer --layers 2 --hidden 256 --heads 4 --seq 128 --batch 2 \
  --vocab 1000 --steps 3 --seed 7 | cmp -s - "$T" || t_fail "gen-trace to stdout differs from --output"
t_expect 2 "$G" pool gen-trace transformer --hidden 100 --heads 3
grep -q 'hidden' "$T_ERR" || t_fail "no reason for hidden/heads"
[ ! -s "$T_OUT" ] || t_fail "output on a gen-trace error"
t_expect 2 "$G" pool gen-trace transformer --layers x
t_expect 2 "$G" pool gen-trace transformer --dtype fp8
t_expect 2 "$G" pool gen-trace lstm
t_ok "gen-trace ($rows rows)"

# --- replay: text and JSON ---
t_expect 0 "$G" pool replay "$T"
for k in 'peak live' 'peak allocated' 'peak reserved' 'fragmentation' 'OOMs  ' 'ns per operation' \
  'BALANCED on simulated'; do
  grep -q "$k" "$T_OUT" || { cat "$T_OUT"; t_fail "text output lacks '$k'"; }
done
t_expect 0 "$G" pool replay "$T" --json --strategy greedy
t_pyjson "$T_OUT" '
assert d["strategy"] == "GREEDY", d["strategy"]
assert d["source"] == "simulated" and d["capacity"] is None
assert d["log"]["rows"] == int(args[0]), d["log"]
assert d["log"]["unknown_frees"] == 0
assert d["ooms"] == 0
assert d["peak_live_bytes"] == d["log"]["peak_live_bytes"] > 0
assert d["peak_requested_bytes"] >= d["peak_live_bytes"]
assert d["peak_reserved_bytes"] >= d["peak_allocated_bytes"] >= d["peak_live_bytes"]
assert abs(d["reserved_over_allocated"] - d["peak_reserved_bytes"] / d["peak_allocated_bytes"]) < 1e-9
assert 0 <= d["fragmentation_at_peak"] <= 1
assert d["ops"] == d["log"]["allocations"] + d["log"]["frees"]
assert d["ns_per_op"] > 0
assert "min_capacity" not in d
' "$rows" || t_fail "replay --json"
t_expect 0 "$G" pool replay - --json --source host <"$T"
t_pyjson "$T_OUT" '
assert d["source"] == "host" and d["ooms"] == 0 and d["log"]["path"] == "-", d
assert d["peak_live_bytes"] > 0 and d["peak_reserved_bytes"] >= d["peak_live_bytes"]
' || t_fail "replay of stdin on the host source"
t_ok "replay text and json, stdin, host source"

# --- --strategy all ---
t_expect 0 "$G" pool replay "$T" --strategy all
for s in BALANCED GREEDY CONSOLIDATED FRAGMENTATION_AWARE; do
  grep -q "^$s " "$T_OUT" || t_fail "table lacks $s"
done
t_expect 0 "$G" pool replay "$T" --strategy all --json
t_pyjson "$T_OUT" '
assert [x["strategy"] for x in d] == ["BALANCED", "GREEDY", "CONSOLIDATED", "FRAGMENTATION_AWARE"]
assert all(x["ooms"] == 0 for x in d)
assert len({x["peak_live_bytes"] for x in d}) == 1
' || t_fail "--strategy all --json"
t_ok "strategy all"

# --- find-min-capacity on a known answer: 30 MiB alone in its segment, freed, again ---
K=$T_SCRATCH/known.csv
printf 'Thread,Time,Action,Pointer,Size,Stream\n0,0,allocate,0x10,31457280,0\n0,1,free,0x10,31457280,0\n0,2,allocate,0x20,31457280,0\n' >"$K"
t_expect 0 "$G" pool replay "$K" --find-min-capacity --json
t_pyjson "$T_OUT" '
m = d["min_capacity"]
MiB = 1 << 20
assert 30 * MiB <= m["bytes"] <= 30 * MiB + m["resolution"], m
assert m["resolution"] == 30 * MiB // 1000, m
assert 1.0 <= m["over_live"] <= 1.001, m
assert m["failed_below"] < 30 * MiB
' || t_fail "find-min-capacity"
t_expect 0 "$G" pool replay "$K" --find-min-capacity
grep -q 'min capacity' "$T_OUT" || t_fail "text lacks min capacity"
t_expect 0 "$G" pool replay "$T" --find-min-capacity --strategy all
grep -q 'MIN/LIVE' "$T_OUT" || t_fail "table lacks MIN/LIVE"
t_ok "find-min-capacity"

# --- OOMs under a capacity; RMM clock times, failures and unknown frees ---
O=$T_SCRATCH/oom.csv
cat >"$O" <<'EOF'
Thread,Time,Action,Pointer,Size,Stream
140230001,10:00:00.000001,allocate,0x7f0000000000,1048576,0x0
140230001,10:00:00.000002,allocate,0x7f0000100000,1048576,0x0
140230002,10:00:00.000003,allocate,0x7f0000200000,512,0x0
140230002,10:00:00.000004,allocate failure,0x0,8589934592,0x0
140230002,10:00:00.000005,free,0x7f0000200000,512,0x0
140230001,10:00:00.000006,free,0x7f00deadbeef,512,0x0
EOF
t_expect 0 "$G" pool replay "$O" --capacity 2MiB --json
t_pyjson "$T_OUT" '
assert d["capacity"] == 2 << 20
assert d["ooms"] == 1 and d["first_oom_line"] == 4, d
assert d["skipped_frees_of_failed"] == 1
assert d["log"]["allocation_failures"] == 1 and d["log"]["unknown_frees"] == 1
assert d["log"]["threads"] == 2
' || t_fail "oom replay"
t_expect 0 "$G" pool replay "$O" --capacity 2MiB --stop-on-oom
grep -q 'replay stopped there' "$T_OUT" || t_fail "no stop note"
t_ok "ooms, clock times"

# --- the cache bound (--cache-limit): requests of growing sizes, each freed before the next, so
# that no cached segment serves a later one: 57 segments, 100 MiB to 1.5 GiB, 44.5 GiB in all ---
C=$T_SCRATCH/grow.csv
/usr/bin/python3 - "$C" <<'EOF'
import sys
MiB = 1 << 20
with open(sys.argv[1], "w") as f:
    f.write("Thread,Time,Action,Pointer,Size,Stream\n")
    t = 0
    for i in range(57):
        size = (100 + 25 * i) * MiB
        f.write(f"0,{t},allocate,{hex(0x1000 + i)},{size},0\n")
        f.write(f"0,{t + 1},free,{hex(0x1000 + i)},{size},0\n")
        t += 2
EOF
cache_run() { # LABEL ARGS...: a BALANCED replay on an 80 GiB simulated device, kept as LABEL
  local label=$1
  shift
  t_expect 0 "$G" pool replay "$C" --capacity 80GiB --json "$@"
  cp "$T_OUT" "$T_SCRATCH/cache-$label.json"
}
cache_run none --cache-limit none
cache_run default
cache_run bytes --cache-limit 2GiB
cache_run fraction --cache-limit 0.05
GPUM_MEM_LIMIT=1073741824 cache_run reservation # the simulated source: not GPU memory
/usr/bin/python3 - "$T_SCRATCH" <<'EOF' || t_fail "--cache-limit"
import json, sys
GiB = 1 << 30
r = {k: json.load(open(f"{sys.argv[1]}/cache-{k}.json"))
     for k in ("none", "default", "bytes", "fraction", "reservation")}
assert all(x["ooms"] == 0 and x["source_allocs"] == 57 for x in r.values()), r
assert r["none"]["peak_reserved_bytes"] > 44 * GiB, r["none"]
assert r["default"]["peak_reserved_bytes"] <= 10 * GiB + 1.5 * GiB, r["default"]
assert r["bytes"]["peak_reserved_bytes"] <= 2 * GiB + 1.5 * GiB, r["bytes"]
assert r["fraction"]["peak_reserved_bytes"] <= 4 * GiB + 1.5 * GiB, r["fraction"]
assert r["reservation"]["peak_reserved_bytes"] == r["default"]["peak_reserved_bytes"]
EOF
expect_bad_limit() {
  t_expect 2 "$G" pool replay "$C" --cache-limit "$1"
  grep -q "bad value '$1' for --cache-limit" "$T_ERR" || t_fail "no reason for --cache-limit $1"
}
for v in 0 1.5 -1 lots; do expect_bad_limit "$v"; done
t_ok "cache limit"

# --- errors: exit codes, reasons, nothing on stdout ---
expect_err() { # CODE PATTERN ARGS...
  local code=$1 pat=$2
  shift 2
  t_expect "$code" "$G" pool "$@"
  [ ! -s "$T_OUT" ] || { cat "$T_OUT"; t_fail "stdout not empty for: $*"; }
  grep -q -- "$pat" "$T_ERR" || { cat "$T_ERR"; t_fail "stderr lacks '$pat' for: $*"; }
}
expect_err 1 "cannot open $T_SCRATCH/missing.csv" replay "$T_SCRATCH/missing.csv"
B=$T_SCRATCH/bad.csv
printf 'Thread,Time,Action,Pointer,Size,Stream\n0,0,allocate,0x10,512,0\n\n0,2,allocate,0x20,12Q,0\n' >"$B"
expect_err 1 "bad.csv:4: bad Size '12Q'" replay "$B"
expect_err 1 "bad.csv:4: bad Size" replay "$B" --json --strategy all
printf 'a,b,c\n' >"$B"
expect_err 1 "bad.csv:1: not an RMM CSV log" replay "$B"
: >"$B"
expect_err 1 "empty" replay "$B"
expect_err 2 "bad value '12X' for --capacity" replay "$T" --capacity 12X
expect_err 2 "bad value 'fastest' for --strategy" replay "$T" --strategy fastest
expect_err 2 "bad value 'gpu' for --source" replay "$T" --source gpu
expect_err 2 "unknown option '--bogus'" replay "$T" --bogus
expect_err 2 "missing LOG.csv" replay
expect_err 2 "unexpected argument" replay "$T" "$T"
expect_err 2 "needs a value" replay "$T" --capacity
expect_err 2 "unknown command 'replya'" replya "$T"
t_expect 2 "$G" pool
t_ok "errors"

# --- the cuda source on a simulated GPU (the driver sees the replay's segments) ---
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
t_expect 0 "$G" pool replay "$T" --source cuda --device 1 --json
t_pyjson "$T_OUT" '
assert d["source"] == "cuda" and d["ooms"] == 0, d
assert d["peak_reserved_bytes"] >= d["peak_live_bytes"] > 0
' || t_fail "replay on the cuda source"
# Under a reservation (gpum run sets GPUM_MEM_LIMIT) a pool of GPU memory is limited by it; the
# same log on the simulated source is not.
GPUM_MEM_LIMIT=1048576 t_expect 0 "$G" pool replay "$T" --source cuda --json
t_pyjson "$T_OUT" 'assert d["ooms"] > 0, d' || t_fail "the cuda source ignored GPUM_MEM_LIMIT"
GPUM_MEM_LIMIT=1048576 t_expect 0 "$G" pool replay "$T" --json
t_pyjson "$T_OUT" 'assert d["ooms"] == 0, d' || t_fail "the simulated source took GPUM_MEM_LIMIT"
t_expect 1 "$G" pool replay "$T" --source cuda --device 7
[ ! -s "$T_OUT" ] || t_fail "output for a missing device"
t_ok "cuda source on a simulated node"
