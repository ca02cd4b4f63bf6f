# SPDX-License-Identifier: Apache-2.0
# Injected faults: XID 79 arrives as an event and makes later calls fail with GPU_IS_LOST (and
# CUDA calls with CUDA_ERROR_UNKNOWN); a reset-required XID; ECC events and counters; the
# error rate; slow calls that do not hold the lock; the fail-after budget; clear.
source "$(dirname "$0")/lib.sh"
C="$GPUM_TEST_PROGS/sim_client"
S=$T_SCRATCH
G="$GPUM_BIN"
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"

# XID 79.
t_bg "$C" nvml-init nvml-events 0 cu-init cu-ctx 0 cu-alloc 1MiB ready "$S/r" \
  nvml-wait 20000 8 79 0 nvml-expect 0 memory GPU_IS_LOST nvml-expect 0 name GPU_IS_LOST \
  nvml-handle-expect 0 GPU_IS_LOST cu-expect-lost UNKNOWN cu-free-expect SUCCESS \
  nvml-expect 1 memory SUCCESS
W=$T_LAST_PID
t_wait_file "$S/r"
"$G" sim inject "$T_NODE" --device 0 --xid 79 || t_fail "inject xid 79"
wait "$W" || t_fail "XID 79 event and GPU_IS_LOST"
"$C" nvml-init nvml-handle-expect 0 GPU_IS_LOST cu-init cu-ctx 1 || t_fail "lost for new callers"
"$G" sim status "$T_NODE" | grep -q "LOST" || t_fail "status shows the lost GPU"
"$G" sim clear "$T_NODE" --device 0 || t_fail "clear"
"$C" nvml-init nvml-expect 0 memory SUCCESS cu-init cu-ctx 0 cu-alloc 1MiB ||
  t_fail "device usable after clear"
t_ok "XID 79: event, GPU_IS_LOST, CUDA_ERROR_UNKNOWN, clear"

# Nothing injected: the wait times out.
"$C" nvml-init nvml-events 1 nvml-wait 50 TIMEOUT || t_fail "EventSetWait_v2 TIMEOUT"

# Reset required (XID 48, double-bit ECC).
"$G" sim inject "$T_NODE" --device 1 --xid 48 || t_fail "inject xid 48"
"$C" nvml-init nvml-handle-expect 1 RESET_REQUIRED || t_fail "RESET_REQUIRED"
"$C" cu-init cu-ctx 0 cu-alloc 1MiB || t_fail "device 0 unaffected by device 1's XID"
"$G" sim clear "$T_NODE" || t_fail "clear all"
t_ok "XID 48 needs a reset"

# ECC: event and counters.
t_bg "$C" nvml-init nvml-events 1 ready "$S/e" nvml-wait 20000 2 0 1 nvml-wait 20000 1 0 1
W=$T_LAST_PID
t_wait_file "$S/e"
"$G" sim inject "$T_NODE" --device 1 --ecc double || t_fail "inject ecc double"
"$G" sim inject "$T_NODE" --device 1 --ecc single --count 3 || t_fail "inject ecc single"
wait "$W" || t_fail "ECC events"
J=$("$G" sim status "$T_NODE" --json)
echo "$J" | grep -q '"double_bit_volatile": 1' || t_fail "DBE counter"
echo "$J" | grep -q '"single_bit_aggregate": 3' || t_fail "SBE counter"
t_ok "ECC errors raise events and counters"

# Error rate: some calls fail with UNKNOWN, the others succeed.
"$G" sim inject "$T_NODE" --device 0 --error-rate 50% || t_fail "inject error rate"
"$C" nvml-init nvml-rate 0 400 || t_fail "error rate"
"$C" nvml-init nvml-expect 1 memory SUCCESS || t_fail "device 1 has no error rate"
"$G" sim clear "$T_NODE" --device 0
t_ok "error rate gives transient UNKNOWN errors"

# Temperature override.
"$G" sim inject "$T_NODE" --device 0 --temp 97 || t_fail "inject temp"
"$C" nvml-init nvml-print 0 | grep -q '|97|' || t_fail "temperature 97"
"$G" sim clear "$T_NODE" --device 0

# A slow (here: hanging) call on device 0 does not hold the node's lock.
"$G" sim inject "$T_NODE" --device 0 --slow 20000 || t_fail "inject slow"
t_bg "$C" nvml-init ready "$S/slow-start" nvml-expect 0 memory SUCCESS ready "$S/slow-done"
t_wait_file "$S/slow-start"
timeout 10 "$C" nvml-init nvml-expect 1 memory SUCCESS || t_fail "device 1 blocked by a slow call"
timeout 10 "$G" sim status "$T_NODE" >/dev/null || t_fail "status blocked by a slow call"
[ ! -e "$S/slow-done" ] || t_fail "the slow call was not slow"
"$G" sim clear "$T_NODE" --device 0
t_ok "slow calls delay their caller only"

# Fail after 3 MiB more.
"$G" sim inject "$T_NODE" --device 1 --fail-after 3MiB || t_fail "inject fail-after"
"$C" cu-init cu-ctx 1 cu-alloc 2MiB cu-alloc-expect 2MiB OUT_OF_MEMORY cu-alloc 1MiB \
  cu-alloc-expect 1 OUT_OF_MEMORY || t_fail "fail-after"
"$G" sim clear "$T_NODE" --device 1
"$C" cu-init cu-ctx 1 cu-alloc 2MiB cu-alloc 2MiB || t_fail "fail-after cleared"
t_ok "fail-after"

# Utilisation drives temperature and power, with a lag.
read -r t0 < <("$C" nvml-init nvml-print 0 | cut -d'|' -f4)
"$G" sim set "$T_NODE" --device 0 --util 100 || t_fail "set util"
hot() { t=$("$C" nvml-init nvml-print 0 | cut -d'|' -f4); [ "$t" -ge $((t0 + 3)) ]; }
t_until 30 hot || t_fail "temperature did not follow utilisation"
"$G" sim status "$T_NODE" --json | grep -q '"gpu": 100' || t_fail "utilisation 100"
t_ok "temperature follows utilisation"
