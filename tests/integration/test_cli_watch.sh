#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `gpum status --watch`: redraws at the interval (at least two frames, in text and as JSON
# lines), stops cleanly with exit 0 on SIGTERM and SIGINT, and keeps going (showing the error)
# when the device session fails mid-watch. Synchronised on the output appearing.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
unset GPUM_CONFIG GPUM_BACKEND GPUM_DEVICES GPUM_NVML_LIBRARY GPUM_COLOR NO_COLOR
G=$GPUM_BIN
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/a100x8.yaml"

# count_at_least N FILE PATTERN: true once FILE has N lines matching PATTERN.
count_at_least() { [ "$(grep -c -- "$3" "$2" 2>/dev/null)" -ge "$1" ]; }

# stop_and_check PID SIGNAL: sends SIGNAL and checks the exit code is 0.
stop_and_check() {
  local pid=$1 sig=$2 rc=0
  kill -"$sig" "$pid"
  wait "$pid" || rc=$?
  [ "$rc" -eq 0 ] || t_fail "watch exited $rc on SIG$sig, expected 0"
}

# Text frames: device 7's line appears once per frame.
f=$T_SCRATCH/text
t_bg "$G" status --watch 0.05 >"$f" 2>"$T_SCRATCH/text.err"
t_until 20 count_at_least 2 "$f" '^\[7\] ' || t_fail "fewer than two frames: $(cat "$f")"
stop_and_check "$T_LAST_PID" TERM
if grep -q $'\033' "$f"; then t_fail "screen-clearing escapes written to a pipe"; fi
[ "$(grep -c '^\[0\] ' "$f")" -eq "$(grep -c '^\[7\] ' "$f")" ] || t_fail "a frame was cut short"
t_ok "--watch draws frames and exits 0 on SIGTERM"

# JSON lines: one complete document per frame; SIGINT stops it with exit 0.
f=$T_SCRATCH/json
t_bg "$G" status --watch=0.05 --json --devices 1 >"$f"
t_until 20 count_at_least 3 "$f" '"devices"' || t_fail "fewer than three JSON frames: $(cat "$f")"
stop_and_check "$T_LAST_PID" INT
python3 -c '
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) >= 3, lines
for l in lines:
    d = json.loads(l)
    assert [x["index"] for x in d["devices"]] == [1], d
' "$f" || t_fail "JSON watch output: $(head -c 600 "$f")"
t_ok "--watch --json writes one document per line and exits 0 on SIGINT"

# The interval defaults to status.interval.
f=$T_SCRATCH/interval
t_bg "$G" status --watch --status-interval 50ms >"$f"
t_until 20 count_at_least 2 "$f" '^\[7\] ' || t_fail "status.interval not used as the default"
stop_and_check "$T_LAST_PID" TERM
t_ok "--watch without a value uses status.interval"

# The node goes away mid-watch: the error is shown and watch keeps going; it recovers when the
# node is back.
f=$T_SCRATCH/fail
t_bg "$G" status --watch 0.05 >"$f"
watcher=$T_LAST_PID
t_until 20 count_at_least 1 "$f" '^\[7\] ' || t_fail "no first frame"
"$G" sim stop "$GPUM_SIM_NODE" >/dev/null || t_fail "sim stop"
t_until 20 count_at_least 2 "$f" '^gpum status: ' || t_fail "no error frames after the node stopped: $(tail -5 "$f")"
kill -0 "$watcher" 2>/dev/null || t_fail "watch died when the node went away"
"$G" sim start "$GPUM_SOURCE_DIR/examples/sim/a100x8.yaml" --name "$GPUM_SIM_NODE" >/dev/null ||
  t_fail "sim restart"
frames=$(grep -c '^\[7\] ' "$f")
t_until 20 count_at_least $((frames + 1)) "$f" '^\[7\] ' || t_fail "watch did not recover: $(tail -5 "$f")"
stop_and_check "$watcher" TERM
t_ok "watch shows the error when the node goes away and recovers when it is back"
