#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `gpum alerts --watch` on memory pressure: an unmanaged process holding 75 of 80 GiB (gpum sim
# hold) raises the memory alert of a "memory_used_pct > 90 ... clear 85" rule (the default
# rule's thresholds with a 300 ms duration), on that device only; killing the holder gives the
# memory back and clears it. The default rules are loaded beside the file's. Text output this
# time. Synchronised on output lines.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
unset GPUM_CONFIG GPUM_BACKEND GPUM_DEVICES GPUM_NVML_LIBRARY GPUM_COLOR NO_COLOR
G=$GPUM_BIN
out=$T_OUT err=$T_ERR
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
N=$GPUM_SIM_NODE

R=$T_SCRATCH/rules
echo 'memory_used_pct > 90 for 300ms WARNING clear 85' >"$R"
t_expect 0 "$G" alerts --list-rules --rules "$R"
[ "$(wc -l <"$out")" -ge 2 ] && tail -1 "$out" | grep -q '^memory_used_pct > 90 for 300ms WARNING clear 85$' ||
  t_fail "defaults plus the file's rule: $(cat "$out")"
nrules=$(wc -l <"$out")

W=$T_SCRATCH/watch
t_bg "$G" alerts --watch --interval 50 --rules "$R" >"$W" 2>"$W.err"
watcher=$T_LAST_PID
t_until 20 grep -q "watching 2 devices with $nrules rules" "$W.err" || t_fail "no readiness line: $(cat "$W.err")"

holder=$("$G" sim hold "$N" --device 1 --bytes 75GiB) || t_fail "sim hold"
[[ "$holder" =~ ^[0-9]+$ ]] || t_fail "sim hold printed '$holder'"
T_PIDS+=("$holder")
fired() { grep -Eq '^[0-9T:.-]+Z  FIRED    WARNING   GPU 1  GPU 1: memory_used_pct (9[0-9]|100)' "$W"; }
t_until 20 fired || t_fail "no memory alert for the 75 GiB hold: $(cat "$W")"
if grep -q 'GPU 0' "$W"; then t_fail "device 0 alerted: $(cat "$W")"; fi
if grep -q 'CLEARED' "$W"; then t_fail "cleared while held: $(cat "$W")"; fi

kill -9 "$holder"
cleared() { grep -Eq '^[0-9T:.-]+Z  CLEARED  WARNING   GPU 1  GPU 1: memory_used_pct .*cleared at' "$W"; }
t_until 20 cleared || t_fail "the alert did not clear after the holder died: $(cat "$W")"
kill -INT "$watcher"
rc=0
wait "$watcher" || rc=$?
[ "$rc" -eq 0 ] || t_fail "alerts --watch exited $rc on SIGINT"
[ "$(grep -c 'FIRED' "$W")" -eq 1 ] && [ "$(grep -c 'CLEARED' "$W")" -eq 1 ] ||
  t_fail "expected exactly one fire and one clear: $(cat "$W")"
t_ok "a memory hold above 90% raises the memory alert; releasing it clears it"
