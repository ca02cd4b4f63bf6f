#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `gpum status` when things go wrong: metrics a device does not support are n/a in text and
# null in JSON (never 0); a device lost with Xid 79 shows ERROR with the reason while the others
# still show; when no device can be read (all lost, no driver library) status exits 1 with the
# reason; the host fallback is marked as host.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
unset GPUM_CONFIG GPUM_BACKEND GPUM_DEVICES GPUM_NVML_LIBRARY GPUM_COLOR NO_COLOR
G=$GPUM_BIN
out=$T_OUT err=$T_ERR


# A node whose second device reports neither temperature, power, utilisation nor processes.
cat >"$T_SCRATCH/partial.yaml" <<YAML
name: partial
devices:
  - name: "Test GPU full"
    memory: 16GiB
  - name: "Test GPU partial"
    memory: 16GiB
    unsupported: [temperature, power, utilization, processes, clocks, ecc]
YAML
t_sim_start "$T_SCRATCH/partial.yaml" "${T_NODE}p"
t_expect 0 "$G" status --json
t_pyjson "$out" '
full, part = d["devices"]
for k in ("temperature_c", "power_w"):
    assert full[k] is not None and part[k] is None, (k, full[k], part[k])
assert part["utilization"] == {"gpu": None, "memory": None}, part["utilization"]
assert part["processes"] is None and full["processes"] == [], part
assert part["ecc"]["uncorrected"] is None and part["clocks"]["sm_mhz"] is None, part
assert part["state"] == "AVAILABLE" and part["memory"]["total"] == 16 * 2**30, part
' || t_fail "nulls for unsupported metrics: $(cat "$out")"
t_expect 0 "$G" status
line=$(grep '^\[1\] ' "$out")
[ "$(grep -o 'n/a' <<<"$line" | wc -l)" -ge 3 ] || t_fail "unsupported metrics not n/a: $line"
if grep -Eq ' 0°C| 0 %|  0 W' <<<"$line"; then t_fail "an unsupported metric shows as 0: $line"; fi
grep -q '°C' <<<"$(grep '^\[0\] ' "$out")" || t_fail "device 0 lost its temperature"
t_ok "unsupported metrics are n/a and null, never 0"

# Xid 79 on device 5 of eight: ERROR with the reason; the other seven still show; exit 0.
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/a100x8.yaml"
"$G" sim inject "$GPUM_SIM_NODE" --device 5 --xid 79 >/dev/null || t_fail "sim inject --xid 79"
t_expect 0 "$G" status
grep -Eq '^\[5\] .*ERROR.*(lost|LOST)' "$out" || t_fail "device 5 not ERROR with the reason: $(cat "$out")"
[ "$(grep -c 'AVAILABLE' "$out")" -eq 7 ] || t_fail "the other devices: $(cat "$out")"
t_expect 0 "$G" status --json
t_pyjson "$out" '
for x in d["devices"]:
    if x["index"] == 5:
        assert x["state"] == "ERROR" and "lost" in x["reason"].lower(), x
        assert x["error"] == "ELOST", x
        assert x["memory"]["used"] is None and x["temperature_c"] is None, x
    else:
        assert x["state"] == "AVAILABLE" and x["reason"] is None, x
' || t_fail "lost device in JSON: $(cat "$out")"
t_expect 0 "$G" status --devices 4,5
t_ok "a lost device shows ERROR with the reason, the others still show"

# Only the lost device selected, or every device lost: nothing can be read, exit 1.
t_expect 1 "$G" status --devices 5
grep -qi 'no device could be read.*lost' "$err" || t_fail "all lost: $(cat "$err")"
grep -q '^\[5\] .*ERROR' "$out" || t_fail "the lost device is not shown: $(cat "$out")"
t_expect 1 "$G" status --json --devices 5
t_pyjson "$out" 'assert d["devices"][0]["state"] == "ERROR"' || t_fail "JSON of an all-lost node"
t_ok "exit 1 when every selected device is lost"

# No driver library: exit 1 with the reason naming the library, whether from env or flag.
GPUM_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 t_expect 1 "$G" status --backend nvml
grep -q '/nonexistent/libnvidia-ml.so.1' "$err" || t_fail "missing library not named: $(cat "$err")"
[ ! -s "$out" ] || t_fail "a status was printed without a driver"
t_expect 1 "$G" status --json --backend nvml --nvml-library /nonexistent/libnvidia-ml.so.1
grep -q 'cannot read any device' "$err" || t_fail "no reason: $(cat "$err")"
t_ok "no driver library: exit 1 with the reason"

# The host backend: one device marked as host everywhere.
t_expect 0 "$G" status --backend host
# The host device's utilisation is the CPU load: on a loaded machine it is BUSY, with the reason.
grep -Eq '^\[0\] cpu \(host\) +(AVAILABLE  |BUSY  .*\((GPU utilisation|memory used) [0-9.]+% >= [0-9]+%\)$)' "$out" ||
  t_fail "host device line: $(cat "$out")"
t_expect 0 "$G" status --backend host --json
t_pyjson "$out" '
assert d["backend"] == "host" and d["simulated"] is False, d
(x,) = d["devices"]
assert x["is_host"] is True and x["name"] == "cpu" and x["memory"]["total"] > 0, x
' || t_fail "host in JSON: $(cat "$out")"
t_ok "the host fallback is marked as host"

# A simulated node that is not running, with backend auto: the host is shown, with a note why.
GPUM_SIM_NODE="${T_NODE}-never-started" t_expect 0 "$G" status
grep -q 'cpu (host)' "$out" || t_fail "no host fallback: $(cat "$out")"
grep -q "simulated node '${T_NODE}-never-started' cannot be used" "$err" ||
  t_fail "no note about the missing node: $(cat "$err")"
t_ok "a missing simulated node is pointed out"
