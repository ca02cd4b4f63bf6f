#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `gpum doctor`: on a simulated node every check passes (exit 0) and the node is named;
# CUDA_VISIBLE_DEVICES is checked against the devices (bad index, unknown UUID, empty); a lost
# device and uncorrected ECC errors fail; a pending row remap or page retirement warns and a
# failed remap fails; without a driver it says so and explains the simulated node; --json
# carries the same findings.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
unset GPUM_CONFIG GPUM_BACKEND GPUM_DEVICES GPUM_NVML_LIBRARY GPUM_CUDA_LIBRARY GPUM_COLOR
unset NO_COLOR CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER
G=$GPUM_BIN
out=$T_OUT err=$T_ERR

# pyjson FILE SCRIPT: t_pyjson with f = the findings and status(check) = their statuses.
pyjson() {
  local file=$1 script=$2
  shift 2
  t_pyjson "$file" "f = d[\"findings\"]
def status(check): return [x[\"status\"] for x in f if x[\"check\"] == check]
$script" "$@"
}

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/a100x8.yaml"
t_expect 0 "$G" doctor
grep -q "simulated node '$GPUM_SIM_NODE'" "$out" || t_fail "sim node not named: $(cat "$out")"
grep -q '0 failures' "$out" || t_fail "failures on a healthy node: $(cat "$out")"
grep -Eq '^\[OK *\] nvml .*driver [0-9]+\.' "$out" || t_fail "NVML finding: $(cat "$out")"
grep -Eq '^\[OK *\] cuda .*CUDA driver API' "$out" || t_fail "CUDA finding: $(cat "$out")"
t_expect 0 "$G" doctor --json
pyjson "$out" '
assert d["fail"] == 0, f
for c in ("config", "nvml", "cuda", "cuda_visible", "device", "ecc", "memory", "sim"):
    assert status(c) and "FAIL" not in status(c), (c, f)
for x in f:
    assert x["status"] in ("OK", "WARN", "FAIL") and x["message"], x
    assert x["status"] == "OK" or x["suggestion"], x
' || t_fail "doctor --json on a healthy node: $(cat "$out")"
t_ok "doctor on a healthy simulated node"

# CUDA_VISIBLE_DEVICES against the devices.
CUDA_VISIBLE_DEVICES=9 t_expect 1 "$G" doctor
grep -Eq "^\[FAIL\] cuda_visible .*'9'" "$out" || t_fail "CVD=9: $(cat "$out")"
grep -q -- '->' "$out" || t_fail "no suggestion for CVD=9"
CUDA_VISIBLE_DEVICES=GPU-00000000-dead-beef t_expect 1 "$G" doctor --json
pyjson "$out" 'assert "FAIL" in status("cuda_visible") and d["fail"] >= 1, f' ||
  t_fail "unknown UUID: $(cat "$out")"
uuid=$("$G" status --json --devices 2 | python3 -c 'import json,sys; print(json.load(sys.stdin)["devices"][0]["uuid"])')
CUDA_VISIBLE_DEVICES="$uuid,0" CUDA_DEVICE_ORDER=PCI_BUS_ID t_expect 0 "$G" doctor --json
pyjson "$out" 'assert status("cuda_visible") == ["OK"], f' || t_fail "valid CVD: $(cat "$out")"
CUDA_VISIBLE_DEVICES= t_expect 1 "$G" doctor --json
pyjson "$out" '
assert status("cuda_visible") == ["WARN"], f
assert "FAIL" in status("cuda"), f  # cuInit finds no device
' || t_fail "empty CVD: $(cat "$out")"
t_ok "CUDA_VISIBLE_DEVICES is checked against the devices"

# Config: the loaded file is named; a library option pointing nowhere fails.
printf 'retry:\n  count: 2\n' >"$T_SCRATCH/gpum.yaml"
t_expect 0 "$G" doctor --config "$T_SCRATCH/gpum.yaml"
grep -q "loaded $T_SCRATCH/gpum.yaml" "$out" && grep -q 'retry.count (file)' "$out" ||
  t_fail "config finding: $(cat "$out")"
t_expect 1 "$G" doctor --cuda-library "$T_SCRATCH/nope.so"
grep -Eq '^\[FAIL\] config .*cuda.library' "$out" || t_fail "bad cuda.library: $(cat "$out")"
t_ok "configuration findings"

# Retired pages and remapped rows: a pending remap warns (exit 0) with the reset to do; a failed
# remap fails (exit 1) and asks for service; a reset applies the remap but not the failure.
N=$GPUM_SIM_NODE
"$G" sim inject "$N" --device 1 --xid 63 >/dev/null || t_fail "inject xid 63"
t_expect 0 "$G" doctor
grep -Eq '^\[WARN\] memory .*GPU 1 .*row remap is pending' "$out" || t_fail "pending remap: $(cat "$out")"
grep -q "nvidia-smi -r -i 1" "$out" || t_fail "no reset suggestion: $(cat "$out")"
"$G" sim inject "$N" --device 2 --xid 64 >/dev/null || t_fail "inject xid 64"
t_expect 1 "$G" doctor --json
pyjson "$out" '
m = [x for x in f if x["check"] == "memory"]
assert [x["status"] for x in m] == ["WARN", "FAIL"], m
assert "GPU 1 " in m[0]["message"] and "GPU 2 " in m[1]["message"], m
assert "RMA" in m[1]["suggestion"], m
assert d["fail"] == 1, f
' || t_fail "remap failure: $(cat "$out")"
"$G" sim clear "$N" --device 1 >/dev/null || t_fail "clear 1"
"$G" sim clear "$N" --device 2 >/dev/null || t_fail "clear 2"
t_expect 1 "$G" doctor --json
pyjson "$out" '
m = [x for x in f if x["check"] == "memory"]
assert [x["status"] for x in m] == ["FAIL"] and "GPU 2 " in m[0]["message"], m
' || t_fail "after a reset: $(cat "$out")"
t_ok "pending remap warns, remap failure fails and survives a reset"

# Pre-Ampere boards retire pages instead; a node with neither scheme says so, without a warning.
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/mixed-t4-v100.yaml" "v$T_NODE"
t_expect 0 "$G" doctor
grep -Eq '^\[OK *\] memory .*no pending page retirement .* on 4 devices' "$out" ||
  t_fail "healthy mixed node: $(cat "$out")"
"$G" sim inject "v$T_NODE" --device 3 --ecc double >/dev/null || t_fail "inject ecc double"
t_expect 1 "$G" doctor # uncorrected ECC errors fail on their own
grep -Eq '^\[WARN\] memory .*GPU 3 .*page retirement is pending' "$out" ||
  t_fail "pending retirement: $(cat "$out")"
# One verdict for the ecc check: the FAIL for GPU 3, and no "[OK] ecc" after it.
grep -Eq '^\[FAIL\] ecc .*GPU 3 .*uncorrected' "$out" || t_fail "ecc FAIL: $(cat "$out")"
! grep -Eq '^\[OK *\] ecc' "$out" || t_fail "ecc both FAIL and OK: $(grep ecc "$out")"
printf 'name: c\ndevices:\n  - {name: Sim RTX, memory: 8GiB, ecc: false, unsupported: [remapped_rows]}\n' \
  >"$T_SCRATCH/consumer.yaml"
t_sim_start "$T_SCRATCH/consumer.yaml" "c$T_NODE"
t_expect 0 "$G" doctor
grep -Eq '^\[OK *\] memory .*not reported by this device' "$out" || t_fail "neither: $(cat "$out")"
export GPUM_SIM_NODE=$N
t_ok "retired pages on older GPUs; nothing to report on consumer boards"

# A lost device fails with a suggestion to reset it.
"$G" sim inject "$GPUM_SIM_NODE" --device 6 --xid 79 >/dev/null || t_fail "inject xid 79"
t_expect 1 "$G" doctor
grep -Eq '^\[FAIL\] device .*GPU 6' "$out" || t_fail "lost device: $(cat "$out")"
grep -q 'nvidia-smi -r -i 6' "$out" || t_fail "no reset suggestion: $(cat "$out")"
t_ok "a lost device fails"

# Without a driver: no devices, the reason, and how to use a simulated node.
unset GPUM_SIM_NODE
GPUM_NVML_LIBRARY=$T_SCRATCH/libnvidia-ml.so.1 t_expect 1 "$G" doctor
grep -q 'gpum sim start examples/sim/h100x2.yaml' "$out" || t_fail "no sim hint: $(cat "$out")"
grep -q "$T_SCRATCH/libnvidia-ml.so.1" "$out" || t_fail "library not named: $(cat "$out")"
if ! grep -q 'libnvidia-ml.so.1 ' <<<"$(ldconfig -p 2>/dev/null)"; then
  # A machine without the NVIDIA driver: a warning, not a failure, and the same hint.
  t_expect 0 "$G" doctor --json
  pyjson "$out" '
assert status("nvml") == ["WARN"], f
assert any("gpum sim start" in (x["suggestion"] or "") for x in f), f
' || t_fail "doctor without a driver: $(cat "$out")"
fi
t_ok "doctor without a driver explains the simulated node"
