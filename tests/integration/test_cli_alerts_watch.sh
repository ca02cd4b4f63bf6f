#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `gpum alerts --watch` with gpumd running follows gpumd's alerts (its "alert" events on a
# watching connection): a thermal excursion on the simulated node gives a FIRED line and, once
# cleared, a CLEARED line; --json gives one object per line with the same fields as gpumd's
# `alerts` (and as the local evaluation's); SIGINT ends it with 0; when gpumd stops the watcher
# says so and follows the new gpumd once it is back. Synchronised on output lines.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"
unset GPUM_CONFIG GPUM_COLOR NO_COLOR
G=$GPUM_BIN

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
N=$GPUM_SIM_NODE
RULE='temperature > 80 for 100ms WARNING clear 75'
gd_start --monitor-interval 50ms --alerts-defaults=false --alerts-rules "$RULE"

W=$T_SCRATCH/watch
t_bg "$G" alerts --watch >"$W" 2>"$W.err"
text=$T_LAST_PID
WJ=$T_SCRATCH/watch.json
t_bg "$G" alerts --watch --json >"$WJ" 2>"$WJ.err"
js=$T_LAST_PID
t_until 20 grep -q "watching gpumd's alerts at $GPUM_SOCKET" "$W.err" || t_fail "no readiness line: $(cat "$W.err")"
t_until 20 grep -q "watching gpumd's alerts" "$WJ.err" || t_fail "no readiness line: $(cat "$WJ.err")"

"$G" sim inject "$N" --device 1 --temp 85 >/dev/null || t_fail "inject --temp 85"
fired() { grep -Eq '^[0-9T:.-]+Z  FIRED    WARNING   GPU 1  GPU 1: temperature 85' "$W"; }
t_until 20 fired || t_fail "no FIRED line: $(cat "$W") $(cat "$W.err")"
"$G" sim clear "$N" --device 1 >/dev/null || t_fail "sim clear"
cleared() { grep -Eq '^[0-9T:.-]+Z  CLEARED  WARNING   GPU 1  ' "$W"; }
t_until 20 cleared || t_fail "no CLEARED line: $(cat "$W")"
t_until 20 grep -q '"event":"cleared"' "$WJ" || t_fail "no cleared JSON line: $(cat "$WJ")"
t_ok "gpumd's alert raised and cleared, a text line each"

# The JSON lines: the same object as gpumd's `alerts` and as the local evaluation's.
"$G" alerts --json >"$T_SCRATCH/doc.json" || t_fail "alerts --json"
t_expect 0 "$G" alerts --local --json --for 300ms --interval 50 --no-defaults \
  --rules <(echo "temperature > 0 WARNING")
python3 - "$WJ" "$T_SCRATCH/doc.json" "$T_OUT" <<'PY' || t_fail "alert objects: $(cat "$WJ")"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
assert [(e["event"], e["level"], e["device"]) for e in ev] == [("fired", "WARNING", 1), ("cleared", "WARNING", 1)], ev
f, c = ev
assert f["id"] == c["id"] and f["metric"] == "temperature" and f["value"] == 85, f
assert f["threshold"] == 80 and f["clear_threshold"] == 75 and f["state"] == "active", f
assert c["state"] == "cleared" and c["cleared_ns"] >= f["fired_ns"] > 0 and c["clear_value"] < 75, c
gpumd = json.load(open(sys.argv[2]))
local = json.load(open(sys.argv[3]))
assert gpumd["source"] == "gpumd" and local["source"] == "local", (gpumd, local)
keys = lambda a: set(a) - {"event", "xid_name", "repeats"}
g = gpumd["history"][-1]
assert g["id"] == f["id"] and keys(g) == keys(f), (g, f)
assert local["active"] and keys(local["active"][0]) == keys(g), (local["active"][0], g)
PY
t_ok "--json: one object a line, the fields of gpumd's alerts and of the local ones"

# gpumd goes away: the watcher says so, goes on, and follows the next gpumd.
gd_stop TERM
t_until 20 grep -q "gpumd went away" "$W.err" || t_fail "no 'went away' line: $(cat "$W.err")"
kill -0 "$text" || t_fail "the watcher exited when gpumd stopped"
gd_start --monitor-interval 50ms --alerts-defaults=false --alerts-rules "$RULE"
t_until 20 grep -q "gpumd is back" "$W.err" || t_fail "no 'back' line: $(cat "$W.err")"
"$G" sim inject "$N" --device 0 --temp 86 >/dev/null || t_fail "inject --temp 86"
t_until 20 grep -Eq 'FIRED    WARNING   GPU 0  GPU 0: temperature 86' "$W" ||
  t_fail "no alert after gpumd came back: $(cat "$W")"
t_ok "gpumd stopped: said so; followed again once back"

for p in "$text" "$js"; do
  kill -INT "$p"
  rc=0
  wait "$p" || rc=$?
  [ "$rc" -eq 0 ] || t_fail "alerts --watch exited $rc on SIGINT"
done
t_ok "Ctrl-C ends the watch with 0"
