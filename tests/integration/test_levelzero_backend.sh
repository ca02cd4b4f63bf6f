#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The levelzero backend (Intel GPUs through Level Zero Sysman) on a simulated node that mixes
# NVIDIA, AMD and Intel devices (examples/sim/mixed3.yaml): `gpum --backend levelzero status`
# (text and JSON) shows the two Intel devices, numbered 0 and 1, with their name, UUID, memory,
# power limit, clocks, a pinned (overheating) temperature and a process holding memory;
# utilisation and power come from counter deltas, so they appear from the second sample of a
# session on (status --watch); ZE_AFFINITY_MASK limits the devices; a loader without zesInit is
# used through zeInit with ZES_ENABLE_SYSMAN=1, which the backend sets when unset; an Intel
# device that fell off the bus (XID 79) is shown as ERROR; a node without Intel devices has no
# device for levelzero (exit 1).
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
unset GPUM_CONFIG GPUM_BACKEND GPUM_DEVICES GPUM_NVML_LIBRARY GPUM_ROCM_SMI_LIBRARY GPUM_COLOR NO_COLOR
unset GPUM_LEVEL_ZERO_LIBRARY ZES_ENABLE_SYSMAN ZE_AFFINITY_MASK
G=$GPUM_BIN
out=$T_OUT

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/mixed3.yaml"

# Node devices 4 and 5 are Level Zero's 0 and 1.
"$G" sim set "$T_NODE" --device 4 --util 60 >/dev/null
"$G" sim inject "$T_NODE" --device 5 --temp 99 >/dev/null
"$G" sim inject "$T_NODE" --device 5 --ecc double --count 3 >/dev/null
holder=$("$G" sim hold "$T_NODE" --device 5 --bytes 10GiB)
[ -n "$holder" ] || t_fail "sim hold printed no pid"

t_expect 0 "$G" --backend levelzero status
[ "$(grep -c '^\[[0-9]\] ' "$out")" -eq 2 ] || t_fail "expected 2 device lines: $(cat "$out")"
grep -Eq '^\[0\] Intel\(R\) Data Center GPU Max 1550 +AVAILABLE ' "$out" || t_fail "device 0: $(cat "$out")"
grep -Eq '^\[1\] Intel\(R\) Data Center GPU Max 1550 +AVAILABLE +99°C' "$out" ||
  t_fail "device 1 and its temperature: $(cat "$out")"
grep -q 'levelzero: ' "$out" || t_fail "the header does not name the levelzero backend: $(cat "$out")"
grep -Eq "^ +$holder .*10\.00 GiB" "$out" || t_fail "the holder under device 1: $(cat "$out")"
if grep -Eq 'H100|MI300X' "$out"; then t_fail "another vendor's device shows through Level Zero"; fi
t_ok "gpum --backend levelzero status shows the two Intel devices"

t_expect 0 "$G" --backend levelzero status --json
cp "$out" "$T_SCRATCH/all.json"
t_pyjson "$out" '
import re
GiB = 1 << 30
assert d["backend"] == "levelzero" and d["simulated"] is True, d
assert d["driver_version"] == "550.54.15", d["driver_version"]
devs = d["devices"]
assert [x["index"] for x in devs] == [0, 1], devs
for x in devs:
    assert x["name"] == "Intel(R) Data Center GPU Max 1550" and x["state"] == "AVAILABLE", x
    assert re.fullmatch(r"8680d50b-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", x["uuid"]), x["uuid"]
    assert x["memory"]["total"] == 128 * GiB, x["memory"]
    assert x["memory"]["used"] + x["memory"]["free"] == x["memory"]["total"], x["memory"]
    assert x["power_limit_w"] == 600.0, x
    assert x["ecc"]["enabled"] is True, x
    # Rates need two reads: the first sample of a session has none (invalid, not 0).
    assert x["utilization"]["gpu"] is None and x["power_w"] is None, x
assert devs[0]["uuid"] != devs[1]["uuid"]
assert devs[0]["pci_bus_id"] != devs[1]["pci_bus_id"]
a, b = devs
assert a["memory"]["used"] == 512 << 20 and a["processes"] == [], a
assert a["clocks"]["memory_mhz"] == 1600 and 900 <= a["clocks"]["sm_mhz"] <= 1600, a
# The overheat: 99 C, above the slowdown threshold (95), so the clocks drop by a third.
assert b["temperature_c"] == 99, b
assert b["clocks"] == {"sm_mhz": 600, "memory_mhz": 1066}, b["clocks"]
assert b["memory"]["used"] == 512 * (1 << 20) + 10 * GiB, b["memory"]
assert b["ecc"]["uncorrected"] == 3 and b["ecc"]["corrected"] == 0, b["ecc"]
p = b["processes"]
assert len(p) == 1 and p[0]["pid"] == int(args[0]) and p[0]["memory"] == 10 * GiB, p
' "$holder" || t_fail "levelzero status --json: $(cat "$out")"
t_ok "JSON: name, UUID, memory, power limit, clocks, RAS, the overheat and the process"

# Utilisation and power from the second sample of a session on.
f=$T_SCRATCH/watch
t_bg "$G" --backend levelzero status --watch=0.05 --json >"$f"
count_frames() { [ "$(grep -c '"devices"' "$1")" -ge "$2" ]; }
t_until 20 count_frames "$f" 3 || t_fail "fewer than three frames: $(cat "$f")"
kill -INT "$T_LAST_PID"
wait "$T_LAST_PID" || true
python3 -c '
import json, sys
last = json.loads(open(sys.argv[1]).read().splitlines()[-1])
a, b = last["devices"]
assert a["utilization"]["gpu"] == 60, a["utilization"]
assert b["utilization"]["gpu"] == 0, b["utilization"]
# Between idle (90 W) and max (580 W), give or take the steps of the microjoule counter.
for x in (a, b):
    assert 89.0 <= x["power_w"] <= 581.0, x["power_w"]
' "$f" || t_fail "utilisation and power in later frames: $(tail -n 1 "$f")"
t_ok "utilisation and power from engine activity and energy deltas"

# ZE_AFFINITY_MASK: the visible devices, numbered from 0 again.
ZE_AFFINITY_MASK=1 t_expect 0 "$G" --backend levelzero status --json
t_pyjson "$out" '
import json
full = json.load(open(args[0]))["devices"]
devs = d["devices"]
assert len(devs) == 1 and devs[0]["index"] == 0, devs
assert devs[0]["uuid"] == full[1]["uuid"] and devs[0]["temperature_c"] == 99, devs
' "$T_SCRATCH/all.json" || t_fail "ZE_AFFINITY_MASK=1: $(cat "$out")"
ZE_AFFINITY_MASK= t_expect 0 "$G" --backend levelzero status --json
t_pyjson "$out" 'assert len(d["devices"]) == 2, d["devices"]' || t_fail "empty ZE_AFFINITY_MASK"
t_ok "ZE_AFFINITY_MASK selects the Intel devices"

# A loader without zesInit: Sysman through zeInit, ZES_ENABLE_SYSMAN=1 set by the backend.
legacy=$GPUM_TEST_PROGS/ze_legacy_loader.so
GPUM_LEVEL_ZERO_LIBRARY=$legacy t_expect 0 "$G" --backend levelzero status --json
t_pyjson "$out" '
devs = d["devices"]
assert len(devs) == 2 and all(x["state"] == "AVAILABLE" for x in devs), devs
assert devs[1]["memory"]["total"] == 128 << 30 and devs[1]["temperature_c"] == 99, devs[1]
assert devs[0]["clocks"]["sm_mhz"] is None, devs[0]  # not forwarded by the stand-in
' || t_fail "legacy loader: $(cat "$out")"
ZES_ENABLE_SYSMAN=0 GPUM_LEVEL_ZERO_LIBRARY=$legacy t_expect 1 "$G" --backend levelzero status
grep -q '0x78000001' "$T_ERR" || t_fail "Sysman off: $(cat "$T_OUT" "$T_ERR")"
t_ok "a loader without zesInit is used through zeInit and ZES_ENABLE_SYSMAN"

# The other backends on the same node see their own devices only.
t_expect 0 "$G" --backend nvml status --json
t_pyjson "$out" 'assert [x["name"] for x in d["devices"]] == ["NVIDIA H100 80GB HBM3"] * 2, d' ||
  t_fail "nvml on the mixed node: $(cat "$out")"
t_expect 0 "$G" --backend rocm status --json
t_pyjson "$out" 'assert [x["name"] for x in d["devices"]] == ["AMD Instinct MI300X"] * 2, d' ||
  t_fail "rocm on the mixed node: $(cat "$out")"
t_ok "NVML and ROCm SMI see only their own devices"

# The simulator's Level Zero conventions (tests/integration/progs/ze_probe.c), with a second
# process on device 1.
holder2=$("$G" sim hold "$T_NODE" --device 5 --bytes 1GiB)
[ -n "$holder2" ] || t_fail "second sim hold printed no pid"
t_expect 0 "$GPUM_TEST_PROGS/ze_probe"
grep -qx ok "$out" || t_fail "ze_probe: $(cat "$out" "$T_ERR")"
t_ok "zeInit, zesInit, ZES_ENABLE_SYSMAN, stable handles and the count conventions"

"$G" sim inject "$T_NODE" --device 4 --xid 79 >/dev/null
t_expect 0 "$G" --backend levelzero status --json
t_pyjson "$out" '
a, b = d["devices"]
assert a["state"] == "ERROR" and "lost" in (a["reason"] or "") + (a["error"] or ""), a
assert b["state"] == "AVAILABLE", b
' || t_fail "lost Intel device: $(cat "$out")"
t_ok "a lost Intel device is ERROR"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml" "$T_NODE-nv"
t_expect 1 "$G" --backend levelzero status
grep -q 'zeInit' "$T_ERR" || t_fail "why levelzero found nothing: $(cat "$T_ERR")"
t_ok "no Intel device: --backend levelzero fails and says why"

# Metrics the device does not support (ZE_RESULT_ERROR_UNSUPPORTED_FEATURE) are invalid, and
# the device is still AVAILABLE; a spec's defaults make an Intel device a Max 1550.
spec=$T_SCRATCH/unsup.yaml
cat >"$spec" <<'YAML'
name: unsup
devices:
  - vendor: intel
    unsupported: [temperature, clocks, ecc, processes]
YAML
t_sim_start "$spec" "$T_NODE-unsup"
t_expect 0 "$G" --backend levelzero status --json
t_pyjson "$out" '
(x,) = d["devices"]
assert x["state"] == "AVAILABLE" and x["name"] == "Intel(R) Data Center GPU Max 1550", x
assert x["memory"]["total"] == 128 << 30, x["memory"]
assert x["temperature_c"] is None and x["clocks"] == {"sm_mhz": None, "memory_mhz": None}, x
assert x["ecc"]["corrected"] is None and x["ecc"]["uncorrected"] is None, x["ecc"]
' || t_fail "unsupported metrics: $(cat "$out")"
t_ok "unsupported metrics are invalid, the device AVAILABLE"
