#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `gpum doctor`: on a simulated node every check passes (exit 0) and the node is named;
# CUDA_VISIBLE_DEVICES is checked against the devices (bad index, unknown UUID, empty); a lost
# device and uncorrected ECC errors fail; without a driver it says so and explains the simulated
# node; --json carries the same findings.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
unset GPUM_CONFIG GPUM_BACKEND GPUM_DEVICES GPUM_NVML_LIBRARY GPUM_CUDA_LIBRARY GPUM_COLOR
unset NO_COLOR CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER
G=$GPUM_BIN
out=$T_SCRATCH/out err=$T_SCRATCH/err

expect() {
  local want=$1 rc=0
  shift
  "$@" >"$out" 2>"$err" || rc=$?
  [ "$rc" -eq "$want" ] || { cat "$out" "$err" >&2; t_fail "'$*' exited $rc, expected $want"; }
}
pyjson() {
  local file=$1 script=$2
  shift 2
  python3 -c "import json, sys
d = json.load(open(sys.argv[1]))
args = sys.argv[2:]
f = d[\"findings\"]
def status(check): return [x[\"status\"] for x in f if x[\"check\"] == check]
$script" "$file" "$@"
}

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/a100x8.yaml"
expect 0 "$G" doctor
grep -q "simulated node '$GPUM_SIM_NODE'" "$out" || t_fail "sim node not named: $(cat "$out")"
grep -q '0 failures' "$out" || t_fail "failures on a healthy node: $(cat "$out")"
grep -Eq '^\[OK *\] nvml .*driver [0-9]+\.' "$out" || t_fail "NVML finding: $(cat "$out")"
grep -Eq '^\[OK *\] cuda .*CUDA driver API' "$out" || t_fail "CUDA finding: $(cat "$out")"
expect 0 "$G" doctor --json
pyjson "$out" '
assert d["fail"] == 0, f
for c in ("config", "nvml", "cuda", "cuda_visible", "device", "ecc", "sim"):
    assert status(c) and "FAIL" not in status(c), (c, f)
for x in f:
    assert x["status"] in ("OK", "WARN", "FAIL") and x["message"], x
    assert x["status"] == "OK" or x["suggestion"], x
' || t_fail "doctor --json on a healthy node: $(cat "$out")"
t_ok "doctor on a healthy simulated node"

# CUDA_VISIBLE_DEVICES against the devices.
CUDA_VISIBLE_DEVICES=9 expect 1 "$G" doctor
grep -Eq "^\[FAIL\] cuda_visible .*'9'" "$out" || t_fail "CVD=9: $(cat "$out")"
grep -q -- '->' "$out" || t_fail "no suggestion for CVD=9"
CUDA_VISIBLE_DEVICES=GPU-00000000-dead-beef expect 1 "$G" doctor --json
pyjson "$out" 'assert "FAIL" in status("cuda_visible") and d["fail"] >= 1, f' ||
  t_fail "unknown UUID: $(cat "$out")"
uuid=$("$G" status --json --devices 2 | python3 -c 'import json,sys; print(json.load(sys.stdin)["devices"][0]["uuid"])')
CUDA_VISIBLE_DEVICES="$uuid,0" CUDA_DEVICE_ORDER=PCI_BUS_ID expect 0 "$G" doctor --json
pyjson "$out" 'assert status("cuda_visible") == ["OK"], f' || t_fail "valid CVD: $(cat "$out")"
CUDA_VISIBLE_DEVICES= expect 1 "$G" doctor --json
pyjson "$out" '
assert status("cuda_visible") == ["WARN"], f
assert "FAIL" in status("cuda"), f  # cuInit finds no device
' || t_fail "empty CVD: $(cat "$out")"
t_ok "CUDA_VISIBLE_DEVICES is checked against the devices"

# Config: the loaded file is named; a library option pointing nowhere fails.
printf 'retry:\n  count: 2\n' >"$T_SCRATCH/gpum.yaml"
expect 0 "$G" doctor --config "$T_SCRATCH/gpum.yaml"
grep -q "loaded $T_SCRATCH/gpum.yaml" "$out" && grep -q 'retry.count (file)' "$out" ||
  t_fail "config finding: $(cat "$out")"
expect 1 "$G" doctor --cuda-library "$T_SCRATCH/nope.so"
grep -Eq '^\[FAIL\] config .*cuda.library' "$out" || t_fail "bad cuda.library: $(cat "$out")"
t_ok "configuration findings"

# A lost device fails with a suggestion to reset it.
"$G" sim inject "$GPUM_SIM_NODE" --device 6 --xid 79 >/dev/null || t_fail "inject xid 79"
expect 1 "$G" doctor
grep -Eq '^\[FAIL\] device .*GPU 6' "$out" || t_fail "lost device: $(cat "$out")"
grep -q 'nvidia-smi -r -i 6' "$out" || t_fail "no reset suggestion: $(cat "$out")"
t_ok "a lost device fails"

# Without a driver: no devices, the reason, and how to use a simulated node.
unset GPUM_SIM_NODE
GPUM_NVML_LIBRARY=$T_SCRATCH/libnvidia-ml.so.1 expect 1 "$G" doctor
grep -q 'gpum sim start examples/sim/h100x2.yaml' "$out" || t_fail "no sim hint: $(cat "$out")"
grep -q "$T_SCRATCH/libnvidia-ml.so.1" "$out" || t_fail "library not named: $(cat "$out")"
if ! ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml.so.1 '; then
  # A machine without the NVIDIA driver: a warning, not a failure, and the same hint.
  expect 0 "$G" doctor --json
  pyjson "$out" '
assert status("nvml") == ["WARN"], f
assert any("gpum sim start" in (x["suggestion"] or "") for x in f), f
' || t_fail "doctor without a driver: $(cat "$out")"
fi
t_ok "doctor without a driver explains the simulated node"
