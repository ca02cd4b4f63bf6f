# SPDX-License-Identifier: Apache-2.0
# The node's state lock is a robust process-shared mutex: a process SIGKILLed while holding it
# does not block the next caller.
source "$(dirname "$0")/lib.sh"
C="$GPUM_TEST_PROGS/sim_client"
S=$T_SCRATCH
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
"$C" cu-init cu-ctx 0 cu-alloc 1GiB ready "$S/alloc" block &
T_PIDS+=($!)
t_wait_file "$S/alloc"

t_bg "$C" hold-lock "$T_NODE" "$S/locked"
HOLDER=$T_LAST_PID
t_wait_file "$S/locked"
# While it is held, callers wait (so the hook really holds the lock).
if timeout 1 "$GPUM_BIN" sim status "$T_NODE" >/dev/null 2>&1; then
  t_fail "sim status returned while another process held the lock"
fi
kill -9 "$HOLDER"
wait "$HOLDER" 2>/dev/null || true
timeout 10 "$C" nvml-init nvml-count 2 nvml-expect-used 0 1GiB ||
  t_fail "the next NVML caller after the lock holder died"
timeout 10 "$GPUM_BIN" sim status "$T_NODE" >/dev/null || t_fail "sim status after the holder died"
timeout 10 "$C" cu-init cu-ctx 0 cu-alloc 1MiB || t_fail "the next CUDA caller"
t_ok "a process killed while holding the lock does not block others"
