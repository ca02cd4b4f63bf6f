#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `gpum alerts` on a thermal excursion (gpum sim inject --temp): with rules "> 80 for 300ms
# WARNING clear 75" and "> 90 for 300ms CRITICAL clear 85", 85 °C raises WARNING (and not
# CRITICAL) only 300 ms after the excursion began, 95 °C then raises CRITICAL 300 ms later;
# 78 °C clears CRITICAL but keeps WARNING (hysteresis: between clear and fire threshold), and
# clearing the fault clears WARNING. --watch prints each change as a JSON line; the one-shot
# form prints the active alerts and the window's history. Synchronised on output lines.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
unset GPUM_CONFIG GPUM_BACKEND GPUM_DEVICES GPUM_NVML_LIBRARY GPUM_COLOR NO_COLOR
G=$GPUM_BIN
out=$T_OUT err=$T_ERR
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
N=$GPUM_SIM_NODE

# The INFO rule fires after 200 ms (4 rounds) below 80 °C: the test waits on it to know that
# the device has been sampled several times at a temperature.
R=$T_SCRATCH/rules
cat >"$R" <<'RULES'
# thermal test rules
temperature > 80 for 300ms WARNING clear 75
temperature > 90 for 300ms CRITICAL clear 85
temperature < 80 for 200ms INFO devices 0
RULES

W=$T_SCRATCH/watch
t_bg "$G" alerts --watch --json --interval 50 --no-defaults --rules "$R" --devices 0 >"$W" 2>"$W.err"
watcher=$T_LAST_PID
t_until 20 grep -q 'watching 1 device with 3 rules' "$W.err" || t_fail "no readiness line: $(cat "$W.err")"

# count EVENT LEVEL: lines of that event and level so far.
count() { grep -Ec "^\{\"event\":\"$1\",\"id\":[0-9]+,\"level\":\"$2\"" "$W" || true; }
at_least() { [ "$(count "$1" "$2")" -ge "$3" ]; }
now_ms() { date +%s%3N; }

t_until 20 at_least fired INFO 1 || t_fail "the INFO rule never fired at idle: $(cat "$W")"

# 85 °C: WARNING, 300 ms after the excursion began; no CRITICAL.
t1=$(now_ms)
"$G" sim inject "$N" --device 0 --temp 85 >/dev/null || t_fail "inject --temp 85"
t_until 20 at_least fired WARNING 1 || t_fail "no WARNING at 85 C: $(cat "$W")"
t_until 20 at_least cleared INFO 1 || t_fail "INFO did not clear at 85 C: $(cat "$W")"
[ "$(count fired CRITICAL)" -eq 0 ] || t_fail "CRITICAL at 85 C: $(cat "$W")"

# 95 °C: CRITICAL, 300 ms later.
t2=$(now_ms)
"$G" sim inject "$N" --device 0 --temp 95 >/dev/null || t_fail "inject --temp 95"
t_until 20 at_least fired CRITICAL 1 || t_fail "no CRITICAL at 95 C: $(cat "$W")"

# 78 °C: CRITICAL clears (78 < 85), WARNING stays (78 >= 75) for as long as it lasts: at least
# until the INFO rule has seen 200 ms below 80 °C again.
t3=$(now_ms)
"$G" sim inject "$N" --device 0 --temp 78 >/dev/null || t_fail "inject --temp 78"
t_until 20 at_least cleared CRITICAL 1 || t_fail "CRITICAL did not clear at 78 C: $(cat "$W")"
t_until 20 at_least fired INFO 2 || t_fail "INFO did not fire again at 78 C: $(cat "$W")"
[ "$(count cleared WARNING)" -eq 0 ] || t_fail "WARNING cleared at 78 C (hysteresis): $(cat "$W")"

# Clearing the fault: the temperature falls below 75 °C and WARNING clears.
t4=$(now_ms)
"$G" sim clear "$N" --device 0 >/dev/null || t_fail "sim clear"
t_until 30 at_least cleared WARNING 1 || t_fail "WARNING did not clear: $(cat "$W")"
kill -TERM "$watcher"
rc=0
wait "$watcher" || rc=$?
[ "$rc" -eq 0 ] || t_fail "alerts --watch exited $rc on SIGTERM"

python3 - "$W" "$t1" "$t2" "$t3" "$t4" <<'PY' || t_fail "alert timing or values: $(cat "$W")"
import json, sys
from datetime import datetime
def ms(ns):  # the alert object's times are CLOCK_REALTIME ns, as gpumd writes them
    return ns // 1000000
ev = [json.loads(l) for l in open(sys.argv[1])]
t1, t2, t3, t4 = map(int, sys.argv[2:6])
def one(event, level):
    m = [e for e in ev if e["event"] == event and e["level"] == level]
    assert len(m) == 1, (event, level, m)
    return m[0]
w, c = one("fired", "WARNING"), one("fired", "CRITICAL")
assert w["device"] == 0 and w["metric"] == "temperature" and w["value"] == 85, w
assert w["threshold"] == 80 and w["clear_threshold"] == 75 and w["state"] == "active", w
# only after the rule's duration: from the first sample above 80 (after t1) to firing, 300 ms
assert ms(w["since_ns"]) >= t1 and ms(w["fired_ns"]) - ms(w["since_ns"]) >= 299, w
assert ms(w["fired_ns"]) - t1 >= 299 and ms(w["fired_ns"]) < t2, (t1, t2, w)
assert c["value"] == 95 and c["threshold"] == 90, c
assert ms(c["since_ns"]) >= t2 and ms(c["fired_ns"]) - t2 >= 299, (t2, c)
cc, wc = one("cleared", "CRITICAL"), one("cleared", "WARNING")
assert cc["id"] == c["id"] and cc["clear_value"] == 78 and ms(cc["cleared_ns"]) >= t3, cc
# WARNING stayed active through 78 C: it cleared only after the fault was cleared, below 75
assert wc["id"] == w["id"] and ms(wc["cleared_ns"]) >= t4 and wc["clear_value"] < 75, wc
assert "cleared at" in wc["message"], wc
order = [(e["event"], e["level"]) for e in ev if e["level"] != "INFO"]
assert order == [("fired", "WARNING"), ("fired", "CRITICAL"), ("cleared", "CRITICAL"),
                 ("cleared", "WARNING")], order
PY
t_ok "WARNING then CRITICAL after the rule's duration; hysteresis; clearing the fault clears"

# The one-shot form: at 95 °C an evaluation window of 1 s ends with both alerts active.
"$G" sim inject "$N" --device 0 --temp 95 >/dev/null || t_fail "inject --temp 95"
t_expect 0 "$G" alerts --json --interval 50 --for 1s --no-defaults --rules "$R"
t_pyjson "$out" '
act = sorted((a["level"], a["device"]) for a in d["active"])
assert act == [("CRITICAL", 0), ("WARNING", 0)], d["active"]
assert all(a["state"] == "active" and a["cleared_ns"] is None for a in d["active"]), d
assert len(d["rules"]) == 3 and d["rules"][0].startswith("temperature > 80"), d["rules"]
assert d["devices"] == 2 and d["interval_ms"] == 50 and d["window_ms"] >= 1000, d
assert {a["id"] for a in d["history"]} >= {a["id"] for a in d["active"]}, d
' || t_fail "one-shot JSON: $(cat "$out")"
t_expect 0 "$G" alerts --interval 50 --for 1s --no-defaults --rules "$R"
grep -q '^active alerts: 2$' "$out" || t_fail "one-shot text: $(cat "$out")"
grep -Eq '^  [0-9:.]+  CRITICAL  GPU 0 +active +GPU 0: temperature 95' "$out" ||
  t_fail "one-shot text line: $(cat "$out")"
"$G" sim clear "$N" --device 0 >/dev/null
t_ok "the one-shot form shows the active alerts and the history"
