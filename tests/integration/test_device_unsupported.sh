# SPDX-License-Identifier: Apache-2.0
# NOT_SUPPORTED is routine and must never read as 0: on a simulated device whose spec marks
# metrics unsupported, those metrics and info fields are invalid (null) while the others stay
# valid, memory falls back from v2 to v1 (reserved invalid, used still valid), and an
# unsupported process list is an error, not an empty list. The fallbacks for older drivers
# (no nvmlDeviceGetTemperatureV, no nvmlDeviceGetMemoryInfo_v2) still give valid values, and
# events on devices that support none are GPUM_ENOTSUP.
source "$GPUM_SOURCE_DIR/tests/integration/device_lib.sh"

cat >"$T_SCRATCH/spec.yaml" <<'YAML'
name: unsup
devices:
  - name: Sim UMA
    memory: 8GiB
    unsupported: [power, temperature, clocks, ecc, memory_v2, utilization, processes]
  - name: Sim Full
    memory: 8GiB
YAML
d_sim_start "$T_SCRATCH/spec.yaml"

out=$("$DUMP" --backend nvml)
s0=$(grep '^sample 0 ' <<<"$out")
[ "$(d_val "$s0" rc)" = OK ] || t_fail "sample 0 must succeed with unsupported metrics: $s0"
for m in memory_driver_reserved utilization_gpu utilization_memory temperature power clock_sm clock_mem \
  ecc_corrected ecc_uncorrected; do
  [ "$(d_val "$s0" $m)" = null ] || t_fail "device 0: $m should be invalid, got $(d_val "$s0" $m)"
done
for m in memory_total memory_used memory_free; do
  [ "$(d_val "$s0" $m)" != null ] || t_fail "device 0: $m from memory v1 should be valid"
done
i0=$(grep '^info 0 ' <<<"$out")
d_expect "$i0" "rc=OK .*power_limit_mw=null slowdown=null shutdown=null ecc=null" \
  "device 0 info: unsupported fields invalid"
d_expect "$out" "^procs 0 rc=ENOTSUP" "unsupported process list is an error"
s1=$(grep '^sample 1 ' <<<"$out")
for m in memory_driver_reserved utilization_gpu temperature power clock_sm ecc_corrected; do
  [ "$(d_val "$s1" $m)" != null ] || t_fail "device 1: $m should be valid"
done
t_ok "unsupported metrics invalid, supported ones valid"

out=$(GPUM_TEST_NVML_HIDE=nvmlDeviceGetTemperatureV,nvmlDeviceGetMemoryInfo_v2 "$DUMP" --backend nvml)
s1=$(grep '^sample 1 ' <<<"$out")
[ "$(d_val "$s1" temperature)" != null ] || t_fail "old temperature call: $s1"
[ "$(d_val "$s1" memory_driver_reserved)" = null ] || t_fail "memory v1 has no reserved: $s1"
[ "$(d_val "$s1" memory_used)" != null ] || t_fail "memory v1 used: $s1"
t_ok "fallbacks to the older calls"

# A node where no device supports events: enabling them is GPUM_ENOTSUP.
cat >"$T_SCRATCH/noev.yaml" <<'YAML'
name: noev
devices:
  - name: Sim GPU
    count: 2
    memory: 4GiB
    unsupported: [events]
YAML
d_sim_start "$T_SCRATCH/noev.yaml" "${T_NODE}-noev"
out=$("$GPUM_TEST_PROGS/device_events" "$T_SCRATCH/ready" 1 100 || true)
d_expect "$out" "^enable rc=ENOTSUP$" "events on devices without event support"
t_ok "events not supported"
