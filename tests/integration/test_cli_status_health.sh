#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The health state in `gpum status` (the monitor's single-probe classifier): BUSY at 90% GPU
# utilisation or memory use, with the reason naming the threshold, in text and JSON; AVAILABLE
# again under the thresholds; a failed row remap (Xid 64) is ERROR with its reason while the
# metrics still show; a device whose transient errors outlast the retries is not ERROR on one
# probe (AVAILABLE with the reason) but counts as unreadable for the exit code.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
unset GPUM_CONFIG GPUM_BACKEND GPUM_DEVICES GPUM_NVML_LIBRARY GPUM_COLOR NO_COLOR
G=$GPUM_BIN
out=$T_OUT err=$T_ERR
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/a100x8.yaml"
N=$GPUM_SIM_NODE

# BUSY by utilisation (device 2) and by memory (device 5: 38 of 40 GiB held).
"$G" sim set "$N" --device 2 --util 95 >/dev/null || t_fail "sim set --util"
holder=$("$G" sim hold "$N" --device 5 --bytes 38GiB) || t_fail "sim hold"
T_PIDS+=("$holder")
t_expect 0 "$G" status
grep -Eq '^\[2\] .* BUSY .*95 %.*\(GPU utilisation 95% >= 90%\)$' "$out" || t_fail "device 2: $(cat "$out")"
grep -Eq '^\[5\] .* BUSY .*\(memory used 9[0-9]\.[0-9]% >= 90%\)$' "$out" || t_fail "device 5: $(cat "$out")"
[ "$(grep -Ec '^\[[0-9]\] .* AVAILABLE +[0-9]+°C' "$out")" -eq 6 ] || t_fail "the others: $(cat "$out")"
if grep -E '^\[[0-9]\] .* AVAILABLE ' "$out" | grep -q '('; then t_fail "a reason on an AVAILABLE device"; fi
t_expect 0 "$G" status --json
t_pyjson "$out" '
for x in d["devices"]:
    if x["index"] == 2:
        assert x["state"] == "BUSY" and x["reason"] == "GPU utilisation 95% >= 90%", x
        assert x["error"] is None and x["utilization"]["gpu"] == 95, x
    elif x["index"] == 5:
        assert x["state"] == "BUSY" and x["reason"].startswith("memory used 9"), x
        assert x["error"] is None and x["memory"]["used"] >= 38 * 2**30, x
    else:
        assert x["state"] == "AVAILABLE" and x["reason"] is None and x["error"] is None, x
' || t_fail "BUSY in JSON: $(cat "$out")"
t_ok "BUSY at the utilisation and memory thresholds, with the reason"

# Back under the thresholds: AVAILABLE.
"$G" sim set "$N" --device 2 --util 89 >/dev/null || t_fail "sim set --util 89"
kill -9 "$holder"
released() {
  "$G" status --json >"$T_SCRATCH/poll.json" 2>/dev/null &&
    t_pyjson "$T_SCRATCH/poll.json" 'assert d["devices"][5]["state"] == "AVAILABLE"'
}
t_until 20 released || t_fail "device 5 stayed BUSY after the holder died"
t_expect 0 "$G" status --json --devices 2
t_pyjson "$out" '(x,) = d["devices"]; assert x["state"] == "AVAILABLE" and x["reason"] is None, x' ||
  t_fail "89% is not BUSY: $(cat "$out")"
t_ok "AVAILABLE again under the thresholds"

# A failed row remap: ERROR with the reason, metrics still shown; exit 0 while other devices
# are readable, 1 when it is the only one selected.
"$G" sim inject "$N" --device 3 --xid 64 >/dev/null || t_fail "inject --xid 64"
t_expect 0 "$G" status
grep -Eq '^\[3\] .* ERROR +[0-9]+°C .*\(row remapping failed: the GPU needs service\)$' "$out" ||
  t_fail "row remap failure: $(cat "$out")"
t_expect 1 "$G" status --json --devices 3
t_pyjson "$out" '
(x,) = d["devices"]
assert x["state"] == "ERROR" and x["reason"].startswith("row remapping failed"), x
assert x["error"] is not None and x["memory"]["total"] > 0, x
' || t_fail "row remap failure in JSON: $(cat "$out")"
t_ok "a failed row remap is ERROR with the reason"

# Every call failing transiently: one probe is not ERROR, but nothing could be read: exit 1.
"$G" sim inject "$N" --device 6 --error-rate 1 >/dev/null || t_fail "inject --error-rate 1"
t_expect 1 "$G" status --devices 6 --retry-count 1 --retry-base 1ms
grep -Eq '^\[6\] .* AVAILABLE .*\(transient driver errors' "$out" || t_fail "transient: $(cat "$out")"
grep -q 'no device could be read: transient driver errors' "$err" || t_fail "exit reason: $(cat "$err")"
t_expect 1 "$G" status --json --devices 6 --retry-count 1 --retry-base 1ms
t_pyjson "$out" '
(x,) = d["devices"]
assert x["state"] == "AVAILABLE" and x["error"] == "EAGAIN", x
assert x["reason"].startswith("transient driver errors"), x
assert x["memory"]["used"] is None and x["temperature_c"] is None, x
' || t_fail "transient in JSON: $(cat "$out")"
t_expect 0 "$G" status --devices 6,7 --retry-count 1 --retry-base 1ms
t_ok "transient errors: not ERROR on one probe, but unreadable"
