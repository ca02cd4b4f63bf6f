#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Elastic reservations (gpum run --max-mem) on a one-GPU simulated node:
#   granted: a job allocating past its reservation grows it through gpumd up to its maximum,
#     and fails with CUDA_ERROR_OUT_OF_MEMORY past that;
#   refused: where the GPU has no more room, growth stops and the job's allocations stop at
#     exactly what gpumd granted, with gpumd's reason on stderr;
#   racing: two elastic jobs growing at once get, between them, exactly the room there was,
#     and a reservation asked for meanwhile gets nothing that was given to them;
#   shrink: gpumd's memory pressure makes a job give back what it holds above its base at its
#     next free;
#   every resize is an audit row in the ledger (GRANTED -> GRANTED, old and new size).
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"
# A growth that gpumd answers late must not pass for one it refused: on a loaded machine (a
# sanitizer build beside others) its answer took longer than the default 2 s, the shim gave
# up, and the racing jobs stopped short of the room. The verdicts here are about what gpumd
# grants, not how fast: wait as long as it takes.
export GPUM_RUN_GROW_TIMEOUT=10m

sed 's/count: 2/count: 1/' "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml" >"$T_SCRATCH/h100x1.yaml"
t_sim_start "$T_SCRATCH/h100x1.yaml"
G=$GPUM_BIN
P=$GPUM_TEST_PROGS/enforce_probe
GiB=1073741824
MiB=1048576
RT=$(t_shim_preload | awk 'NF == 2 {print $1}')
if [ -n "$RT" ]; then RUN=(env "LD_PRELOAD=$RT" "$G" run); else RUN=("$G" run); fi
gd_start

# What gpumd can still grant on GPU 0: capacity - (reserved + unmanaged).
room() {
  "$G" status --json >"$T_SCRATCH/st.json"
  /usr/bin/python3 -c 'import json,sys
d=json.load(open(sys.argv[1]))["gpumd"]["devices"][0]
print(d["capacity"]-d["committed"])' "$T_SCRATCH/st.json"
}
linked() { awk '$1 == "linked" {print $2, $3}' "$1"; }
# bytes_per_gpu of the reservation labelled $1, from gpum jobs --json.
bytes_of() {
  "$G" jobs --json >"$T_SCRATCH/jobs.json"
  /usr/bin/python3 -c 'import json,sys
d=json.load(open(sys.argv[1])); rs=d["reservations"] if isinstance(d,dict) else d
print([r["bytes_per_gpu"] for r in rs if r["label"]==sys.argv[2]][0])' "$T_SCRATCH/jobs.json" "$1"
}

# Granted: from 4 GiB to the 8 GiB maximum, then CUDA_ERROR_OUT_OF_MEMORY; every way the same.
t_expect 0 "${RUN[@]}" --mem 4GiB --max-mem 8GiB -q -- "$P" fill 256M 12G
[ "$(linked "$T_OUT")" = "$((8 * GiB)) 2" ] || { cat "$T_OUT" "$T_ERR"; t_fail "not grown to exactly 8 GiB"; }
[ "$(awk '$2 == 8*1073741824 && $3 == 2' "$T_OUT" | wc -l)" -ge 9 ] || { cat "$T_OUT"; t_fail "the ways do not all stop at 8 GiB"; }
t_ok "granted: grown from 4 GiB to its 8 GiB maximum"

# Refused: 1.5 GiB of room beside a 4 GiB job with a 16 GiB maximum.
FILL=$(( $(room) - 4 * GiB - 3 * GiB / 2 ))
t_expect 0 "$G" reserve --mem "$((FILL / MiB))MiB" --ttl 10m --label filler -q
FILLER=$(cat "$T_OUT")
t_expect 0 "${RUN[@]}" --mem 4GiB --max-mem 16GiB -q -- "$P" fill 256M 16G
[ "$(linked "$T_OUT")" = "$((11 * GiB / 2)) 2" ] || { cat "$T_OUT" "$T_ERR"; t_fail "refused: did not stop at exactly 4 + 1.5 GiB"; }
grep -q 'gpumd did not grow it to .*free there' "$T_ERR" || { cat "$T_ERR"; t_fail "no refusal reason on stderr"; }
t_ok "refused: stopped at exactly the 5.5 GiB gpumd could grant, with its reason"
t_expect 0 "$G" release "$FILLER"

# Racing: two jobs of 2 GiB (maximum 30 GiB) grow at once into 10 GiB of room.
ROOM=$(room)
t_expect 0 "$G" reserve --mem "$(( (ROOM - 14 * GiB) / MiB ))MiB" --ttl 10m --label filler2 -q
FILLER=$(cat "$T_OUT")
[ "$(room)" -lt $((14 * GiB + 256 * MiB)) ] || t_fail "room left: $(room)"
EXTRA=$(( $(room) - 14 * GiB ))   # below one 256 MiB step: never grantable
# Both are granted their 2 GiB and running before either grows: on a loaded machine one job
# started late found the other grown into all the room and waited in the queue.
GATE=$T_SCRATCH/go
t_bg "${RUN[@]}" --mem 2GiB --max-mem 30GiB -q --label a -- "$P" fillhold 256M 30G "$T_SCRATCH/a" "$T_SCRATCH/a.ready" "$GATE"
A=$T_LAST_PID
t_bg "${RUN[@]}" --mem 2GiB --max-mem 30GiB -q --label b -- "$P" fillhold 256M 30G "$T_SCRATCH/b" "$T_SCRATCH/b.ready" "$GATE"
B=$T_LAST_PID
t_wait_file "$T_SCRATCH/a.ready" 60
t_wait_file "$T_SCRATCH/b.ready" 60
touch "$GATE"
t_wait_file "$T_SCRATCH/a" 60
t_wait_file "$T_SCRATCH/b" 60
HA=$(cat "$T_SCRATCH/a") HB=$(cat "$T_SCRATCH/b")
[ $((HA + HB)) -eq $((14 * GiB)) ] || t_fail "racing: the jobs hold $HA + $HB, the room was 14 GiB"
[ "$(bytes_of a)" -eq "$HA" ] && [ "$(bytes_of b)" -eq "$HB" ] || t_fail "racing: reservations $(bytes_of a), $(bytes_of b) vs held $HA, $HB"
t_expect 1 "$G" reserve --mem 256MiB --no-wait -q
[ "$(room)" -eq "$EXTRA" ] || t_fail "racing: room $(room) after, expected $EXTRA"
kill -TERM "$A" "$B"
wait "$A" "$B" 2>/dev/null || true
t_ok "racing: $HA + $HB bytes, exactly the room; nothing more granted"
t_expect 0 "$G" release "$FILLER"

# Shrink: a job grown to 6 GiB gives it back when gpumd reports pressure on its GPU.
t_bg "${RUN[@]}" --mem 2GiB --max-mem 8GiB --label s -- "$P" shrink 6G 2G "$T_SCRATCH/grown" "$T_SCRATCH/shrunk"
S=$T_LAST_PID
t_wait_file "$T_SCRATCH/grown" 30
[ "$(bytes_of s)" -ge $((6 * GiB)) ] || t_fail "shrink: not grown ($(bytes_of s))"
"$G" sim hold "$GPUM_SIM_NODE" --device 0 --bytes 74GiB >"$T_SCRATCH/holder" || t_fail "sim hold"
T_PIDS+=("$(cat "$T_SCRATCH/holder")")
t_wait_file "$T_SCRATCH/shrunk" 30
[ "$(bytes_of s)" -eq $((2 * GiB)) ] || t_fail "shrink: reservation is $(bytes_of s), not back at 2 GiB"
kill -TERM "$S"
wait "$S" 2>/dev/null || true
t_ok "shrink: back to its 2 GiB base after pressure"

# The ledger: one audit row per resize, GRANTED -> GRANTED with the sizes.
/usr/bin/python3 - "$GPUM_STATE_DIR/ledger.db" <<'PY' || t_fail "audit rows"
import sqlite3, sys
db = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
rows = db.execute("SELECT from_state, to_state, reason FROM audit WHERE reason LIKE 'resized from %'").fetchall()
assert rows, "no resize audit row"
assert all(f == t == "GRANTED" for f, t, _ in rows), rows
assert any("to 8.00 GiB" in r for _, _, r in rows), rows
assert any("from 6.00 GiB to 2.00 GiB" in r or "to 2.00 GiB" in r for _, _, r in rows), rows
print("%d resize rows" % len(rows))
PY
t_ok "each resize is an audit row"
