#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `gpum monitor`: --json writes one valid JSON object per device per round, with the field
# names of `gpum status --json` and null (never 0) for metrics a device does not report; text
# mode has a header and one line per device per round with n/a for those metrics; --count N
# stops after N rounds; --devices filters; SIGTERM and SIGINT stop it with exit 0; a lost
# device shows ERROR with its reason while the others keep being sampled; bad flags exit 2 and
# a device that does not exist exits 1. Synchronised on the output, never on sleeps.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
unset GPUM_CONFIG GPUM_BACKEND GPUM_DEVICES GPUM_NVML_LIBRARY GPUM_COLOR NO_COLOR
G=$GPUM_BIN
out=$T_OUT err=$T_ERR

# A node whose second device reports neither temperature, power, utilisation, clocks nor ECC.
cat >"$T_SCRATCH/partial.yaml" <<YAML
name: partial
devices:
  - name: "Test GPU full"
    memory: 16GiB
  - name: "Test GPU partial"
    memory: 16GiB
    unsupported: [temperature, power, utilization, clocks, ecc]
YAML
t_sim_start "$T_SCRATCH/partial.yaml"

# --json --count 3: six lines (2 devices x 3 rounds), each a valid object.
t_expect 0 timeout 30 "$G" monitor --json --interval 50 --count 3
python3 -c '
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 6, lines
rounds = {}
for l in lines:
    x = json.loads(l)
    for k in ("time", "round", "index", "uuid", "name", "state", "reason", "memory",
              "utilization", "temperature_c", "power_w", "clocks", "ecc"):
        assert k in x, (k, x)
    assert x["time"].endswith("Z") and x["state"] == "AVAILABLE" and x["reason"] is None, x
    assert set(x["memory"]) == {"total", "used", "free", "driver_reserved"}, x
    assert x["memory"]["total"] == 16 * 2**30, x
    rounds.setdefault(x["round"], []).append(x["index"])
    if x["index"] == 0:
        assert isinstance(x["temperature_c"], int) and isinstance(x["power_w"], float), x
        assert isinstance(x["utilization"]["gpu"], int), x
        assert isinstance(x["clocks"]["sm_mhz"], int), x
        assert x["ecc"]["uncorrected"] == 0, x
    else:
        assert x["temperature_c"] is None and x["power_w"] is None, x
        assert x["utilization"] == {"gpu": None, "memory": None}, x
        assert x["clocks"] == {"sm_mhz": None, "memory_mhz": None}, x
        assert x["ecc"] == {"corrected": None, "uncorrected": None}, x
        assert x["name"] == "Test GPU partial", x
assert rounds == {1: [0, 1], 2: [0, 1], 3: [0, 1]}, rounds
' "$out" || t_fail "monitor --json: $(cat "$out")"
t_ok "--json: one valid object per device per round, null for unsupported metrics"

# Text: a header, then one line per device per round; n/a for the unsupported metrics.
t_expect 0 timeout 30 "$G" monitor --interval 50ms --count 2
head -1 "$out" | grep -Eq '^TIME +GPU +STATE +TEMP_C' || t_fail "no header: $(cat "$out")"
[ "$(wc -l <"$out")" -eq 5 ] || t_fail "expected header + 4 lines: $(cat "$out")"
[ "$(grep -Ec '^[0-9T:.-]+Z +0 AVAILABLE +[0-9]+ ' "$out")" -eq 2 ] || t_fail "device 0 lines: $(cat "$out")"
line=$(grep -E '^[0-9T:.-]+Z +1 ' "$out" | head -1)
[ "$(grep -o 'n/a' <<<"$line" | wc -l)" -eq 6 ] || t_fail "device 1 not n/a: $line"
t_expect 0 timeout 30 "$G" monitor --interval 50 --count 1 --no-header
[ "$(wc -l <"$out")" -eq 2 ] && ! grep -q '^TIME' "$out" || t_fail "--no-header: $(cat "$out")"
t_ok "text: header and n/a columns"

# --devices: only device 1, from the flag and from the environment.
t_expect 0 timeout 30 "$G" monitor --json --interval 50 --count 2 --devices 1
python3 -c '
import json, sys
idx = [json.loads(l)["index"] for l in open(sys.argv[1])]
assert idx == [1, 1], idx' "$out" || t_fail "--devices 1: $(cat "$out")"
GPUM_DEVICES=0 t_expect 0 timeout 30 "$G" monitor --json --interval 50 --count 1
python3 -c '
import json, sys
assert [json.loads(l)["index"] for l in open(sys.argv[1])] == [0]' "$out" || t_fail "GPUM_DEVICES=0"
t_ok "--devices filters"

# Streaming until a signal: SIGTERM and SIGINT both exit 0 after complete lines.
count_at_least() { [ "$(grep -c -- "$3" "$2" 2>/dev/null)" -ge "$1" ]; }
for sig in TERM INT; do
  f=$T_SCRATCH/stream.$sig
  t_bg "$G" monitor --json --interval 20 >"$f"
  t_until 20 count_at_least 6 "$f" '"index":1' || t_fail "SIG$sig: fewer than 6 rounds: $(cat "$f")"
  kill -"$sig" "$T_LAST_PID"
  rc=0
  wait "$T_LAST_PID" || rc=$?
  [ "$rc" -eq 0 ] || t_fail "monitor exited $rc on SIG$sig"
  python3 -c '
import json, sys
for l in open(sys.argv[1]):
    json.loads(l)' "$f" || t_fail "SIG$sig: a cut line: $(tail -2 "$f")"
done
t_ok "SIGTERM and SIGINT stop the stream with exit 0"

# Xid 79 on device 1 of an 8-GPU node: it shows ERROR with the reason, the others go on.
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/a100x8.yaml" "${T_NODE}x"
"$G" sim inject "$GPUM_SIM_NODE" --device 1 --xid 79 >/dev/null || t_fail "sim inject --xid 79"
t_expect 0 timeout 30 "$G" monitor --json --interval 50 --count 3 --log-level error
python3 -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert len(lines) == 24, len(lines)
for x in lines:
    if x["index"] == 1:
        assert x["state"] == "ERROR" and "fallen off the bus" in x["reason"], x
        assert x["memory"]["used"] is None and x["temperature_c"] is None, x
    else:
        assert x["state"] == "AVAILABLE" and x["memory"]["total"] > 0, x
' "$out" || t_fail "lost device in monitor: $(cat "$out")"
t_expect 0 timeout 30 "$G" monitor --interval 50 --count 1 --devices 1 --log-level error
grep -Eq '^[0-9T:.-]+Z +1 ERROR .*fallen off the bus' "$out" || t_fail "text reason: $(cat "$out")"
t_ok "a lost device shows ERROR with the reason, the others are sampled"

# Bad flags: exit 2 with a message naming the problem; a missing device: exit 1.
t_expect 2 "$G" monitor --interval 0
grep -q "invalid interval '0'" "$err" || t_fail "--interval 0: $(cat "$err")"
t_expect 2 "$G" monitor --interval abc
grep -q "invalid interval 'abc'" "$err" || t_fail "--interval abc: $(cat "$err")"
t_expect 2 "$G" monitor --interval
t_expect 2 "$G" monitor --interval 2h
t_expect 2 "$G" monitor --count 0
grep -q "count: invalid value '0'" "$err" || t_fail "--count 0: $(cat "$err")"
t_expect 2 "$G" monitor --count -3
t_expect 2 "$G" monitor --count 1x
t_expect 2 "$G" monitor --bogus
grep -q "unknown option '--bogus'" "$err" || t_fail "--bogus: $(cat "$err")"
t_expect 2 "$G" monitor extra
t_expect 2 "$G" monitor --devices 1,,2
[ ! -s "$out" ] || t_fail "a bad flag printed samples: $(cat "$out")"
t_expect 1 timeout 30 "$G" monitor --devices 9 --count 1
grep -q 'no device 9' "$err" || t_fail "--devices 9: $(cat "$err")"
t_expect 0 "$G" monitor --help
grep -q 'usage: gpum monitor' "$out" || t_fail "--help"
t_ok "bad flags exit 2, a missing device exits 1"
