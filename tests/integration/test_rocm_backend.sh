#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The rocm backend (ROCm SMI) on a simulated node that mixes one NVIDIA and two AMD devices:
# `gpum --backend rocm status` (text and JSON) shows the two AMD devices, numbered 0 and 1, with
# their memory, utilisation, pinned temperature, power, clocks, ECC counts and a process holding
# VRAM; the NVML backend on the same node sees only the NVIDIA device; an AMD device that fell
# off the bus (XID 79) is shown as ERROR; an all-NVIDIA node has no device for rocm (exit 1).
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
unset GPUM_CONFIG GPUM_BACKEND GPUM_DEVICES GPUM_NVML_LIBRARY GPUM_ROCM_SMI_LIBRARY GPUM_COLOR NO_COLOR
G=$GPUM_BIN
out=$T_OUT

spec=$T_SCRATCH/mixed.yaml
cat >"$spec" <<'YAML'
name: mixed
driver_version: "6.7.0"
devices:
  - name: "NVIDIA H100 80GB HBM3"
    memory: 80GiB
    compute_capability: "9.0"
  - count: 2
    vendor: amd
    name: "AMD Instinct MI300X"
    memory: 192GiB
    reserved: 512MiB
    power_limit: 750
    power: {idle: 140, max: 740}
    clocks: {sm_idle: 500, sm_max: 2100, mem_idle: 900, mem_max: 1300}
    ecc: true
YAML
t_sim_start "$spec"

# Node devices 1 and 2 are ROCm SMI's 0 and 1.
"$G" sim set "$T_NODE" --device 1 --util 60 >/dev/null
"$G" sim inject "$T_NODE" --device 1 --temp 66 >/dev/null
"$G" sim inject "$T_NODE" --device 2 --ecc double --count 2 >/dev/null
holder=$("$G" sim hold "$T_NODE" --device 2 --bytes 10GiB)
[ -n "$holder" ] || t_fail "sim hold printed no pid"

t_expect 0 "$G" --backend rocm status
[ "$(grep -c '^\[[0-9]\] ' "$out")" -eq 2 ] || t_fail "expected 2 device lines: $(cat "$out")"
grep -Eq '^\[0\] AMD Instinct MI300X +AVAILABLE +66°C +60 %' "$out" || t_fail "device 0: $(cat "$out")"
grep -Eq '^\[1\] AMD Instinct MI300X ' "$out" || t_fail "device 1: $(cat "$out")"
grep -q 'rocm: ' "$out" || t_fail "the header does not name the rocm backend: $(cat "$out")"
grep -Eq "^ +$holder .*10\.00 GiB" "$out" || t_fail "the holder under device 1: $(cat "$out")"
if grep -q 'H100' "$out"; then t_fail "the NVIDIA device shows through ROCm SMI"; fi
t_ok "gpum --backend rocm status shows the two AMD devices"

t_expect 0 "$G" --backend rocm status --json
t_pyjson "$out" '
GiB = 1 << 30
assert d["backend"] == "rocm" and d["simulated"] is True, d
assert d["driver_version"] == "6.7.0", d["driver_version"]
devs = d["devices"]
assert [x["index"] for x in devs] == [0, 1], devs
for x in devs:
    assert x["name"] == "AMD Instinct MI300X" and x["state"] == "AVAILABLE", x
    assert x["uuid"].startswith("GPU-") and len(x["uuid"]) == 20, x["uuid"]
    assert x["memory"]["total"] == 192 * GiB, x["memory"]
    assert x["memory"]["used"] + x["memory"]["free"] == x["memory"]["total"], x["memory"]
    assert x["power_limit_w"] == 750.0, x
    assert 140.0 <= x["power_w"] <= 740.0, x["power_w"]
    assert 500 <= x["clocks"]["sm_mhz"] <= 2100 and 900 <= x["clocks"]["memory_mhz"] <= 1300, x
    assert x["ecc"]["enabled"] is True, x
assert devs[0]["uuid"] != devs[1]["uuid"]
a, b = devs
assert a["temperature_c"] == 66 and a["utilization"]["gpu"] == 60, a
assert a["memory"]["used"] == 512 << 20 and a["processes"] == [], a
assert b["memory"]["used"] == 512 * (1 << 20) + 10 * GiB, b["memory"]
assert b["ecc"]["uncorrected"] == 2 and b["ecc"]["corrected"] == 0, b["ecc"]
p = b["processes"]
assert len(p) == 1 and p[0]["pid"] == int(args[0]) and p[0]["memory"] == 10 * GiB, p
' "$holder" || t_fail "rocm status --json: $(cat "$out")"
t_ok "JSON: memory, utilisation, temperature, power, clocks, ECC and the process"

t_expect 0 "$G" --backend nvml status --json
t_pyjson "$out" '
devs = d["devices"]
assert d["backend"] == "nvml" and len(devs) == 1, devs
assert devs[0]["name"] == "NVIDIA H100 80GB HBM3" and devs[0]["processes"] == [], devs
' || t_fail "nvml status on the mixed node: $(cat "$out")"
t_ok "NVML sees only the NVIDIA device"

"$G" sim inject "$T_NODE" --device 2 --xid 79 >/dev/null
t_expect 0 "$G" --backend rocm status --json
t_pyjson "$out" '
a, b = d["devices"]
assert a["state"] == "AVAILABLE", a
assert b["state"] == "ERROR" and "lost" in (b["reason"] or "") + (b["error"] or ""), b
' || t_fail "lost AMD device: $(cat "$out")"
t_ok "a lost AMD device is ERROR"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml" "$T_NODE-nv"
t_expect 1 "$G" --backend rocm status
grep -q 'no device' "$T_ERR" || t_fail "why rocm found nothing: $(cat "$T_ERR")"
t_ok "no AMD device: --backend rocm fails and says why"
