#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Xid 79 (the GPU fell off the bus) on a simulated node, with the default rules: `gpum alerts
# --watch` raises a CRITICAL Xid alert naming "fallen off the bus" and a CRITICAL alert for the
# device going to ERROR; `gpum status` shows the device ERROR with that reason while the other
# device stays AVAILABLE; a fresh `gpum alerts` sees the device ERROR (CRITICAL, with the
# reason); a non-fatal Xid (13) raises an ERROR-level alert only; after `gpum sim clear` the
# device recovers and the ERROR alert clears. Synchronised on output lines.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
unset GPUM_CONFIG GPUM_BACKEND GPUM_DEVICES GPUM_NVML_LIBRARY GPUM_COLOR NO_COLOR
G=$GPUM_BIN
out=$T_OUT err=$T_ERR
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
N=$GPUM_SIM_NODE

W=$T_SCRATCH/watch
t_bg "$G" alerts --watch --json --interval 50 --log-level error >"$W" 2>"$W.err"
watcher=$T_LAST_PID
t_until 20 grep -q 'watching 2 devices' "$W.err" || t_fail "no readiness line: $(cat "$W.err")"

# The monitor has registered for driver events before the readiness line: one Xid 13 (an
# application error: the device stays usable) must arrive.
"$G" sim inject "$N" --device 0 --xid 13 >/dev/null || t_fail "inject --xid 13"
xid13_seen() { grep -q '"event":"fired".*"level":"ERROR".*"metric":"xid".*"xid":13,' "$W"; }
t_until 20 xid13_seen || t_fail "Xid 13 never raised an alert: $(cat "$W")"
if grep -q '"level":"CRITICAL"' "$W"; then t_fail "Xid 13 raised a CRITICAL alert: $(cat "$W")"; fi

"$G" sim inject "$N" --device 1 --xid 79 >/dev/null || t_fail "inject --xid 79"
has() { grep -Eq "$1" "$W"; }
t_until 20 has '"event":"fired".*"level":"CRITICAL".*"device":1,.*"metric":"xid".*"xid":79,' ||
  t_fail "no CRITICAL Xid 79 alert: $(cat "$W")"
t_until 20 has '"event":"fired".*"level":"CRITICAL".*"device":1,.*"metric":"health"' ||
  t_fail "no CRITICAL alert for device 1 in ERROR: $(cat "$W")"
python3 - "$W" <<'PY' || t_fail "Xid 79 alerts: $(cat "$W")"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
x = [e for e in ev if e["metric"] == "xid" and e["xid"] == 79]
assert len(x) == 1 and x[0]["event"] == "fired", x
assert "fallen off the bus" in x[0]["xid_name"] and "fallen off the bus" in x[0]["message"], x
h = [e for e in ev if e["metric"] == "health" and e["event"] == "fired"]
assert len(h) == 1 and h[0]["device"] == 1 and "ERROR" in h[0]["message"], h
assert not [e for e in ev if e["device"] == 0 and e["level"] == "CRITICAL"], ev
PY
t_ok "Xid 79: CRITICAL alerts naming 'fallen off the bus'"

# gpum status: device 1 ERROR with the reason, device 0 still AVAILABLE.
t_expect 0 "$G" status --log-level error
grep -Eq '^\[1\] .*ERROR +GPU is lost \(fallen off the bus\)' "$out" || t_fail "status text: $(cat "$out")"
grep -Eq '^\[0\] .*AVAILABLE' "$out" || t_fail "device 0: $(cat "$out")"
t_expect 0 "$G" status --json --log-level error
t_pyjson "$out" '
a, b = d["devices"]
assert a["state"] == "AVAILABLE" and a["reason"] is None and a["error"] is None, a
assert b["state"] == "ERROR" and b["error"] == "ELOST", b
assert b["reason"].startswith("GPU is lost (fallen off the bus)"), b
' || t_fail "status JSON: $(cat "$out")"
t_ok "gpum status shows the device ERROR with the reason"

# A fresh one-shot `gpum alerts` (its own monitor, after the Xid): CRITICAL for the device.
t_expect 0 "$G" alerts --json --interval 50 --log-level error
t_pyjson "$out" '
(a,) = d["active"]
assert a["level"] == "CRITICAL" and a["device"] == 1 and a["metric"] == "health", a
assert "fallen off the bus" in a["message"], a
' || t_fail "one-shot alerts after Xid 79: $(cat "$out")"
t_expect 0 "$G" alerts --interval 50 --log-level error
grep -Eq '^  [0-9:.]+  CRITICAL  GPU 1 +active +GPU 1: .*fallen off the bus' "$out" ||
  t_fail "one-shot text: $(cat "$out")"
t_ok "a one-shot gpum alerts reports the lost device"

# Clearing the fault: the device is re-probed, comes back, and the ERROR alert clears.
"$G" sim clear "$N" --device 1 >/dev/null || t_fail "sim clear"
t_until 60 has '"event":"cleared".*"level":"CRITICAL".*"device":1,.*"metric":"health"' ||
  t_fail "the ERROR alert did not clear after the device recovered: $(tail -3 "$W")"
kill -TERM "$watcher"
rc=0
wait "$watcher" || rc=$?
[ "$rc" -eq 0 ] || t_fail "alerts --watch exited $rc"
t_expect 0 "$G" status --json
t_pyjson "$out" 'assert [x["state"] for x in d["devices"]] == ["AVAILABLE"] * 2, d' ||
  t_fail "status after clear: $(cat "$out")"
t_ok "after sim clear the device recovers and its ERROR alert clears"
