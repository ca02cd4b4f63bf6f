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

# A process that dies in the middle of an update leaves the derived parts of the tables (the
# free list, each process's list of entries, its counts and bytes) half-done: the next process
# to take the lock rebuilds them from the entries.
t_bg "$C" cu-init cu-take 0 vmm 100 cu-ctx 1 cu-take 1 mem 50 ready "$S/many" block
M=$T_LAST_PID
t_wait_file "$S/many"
"$GPUM_TEST_PROGS/sim_scramble" "$T_NODE" || t_fail "scrambling the node's tables"
timeout 10 "$C" nvml-init nvml-expect-used 0 1224MiB nvml-expect-used 1 100MiB \
  nvml-expect-proc 0 "$M" 200MiB nvml-expect-proc 1 "$M" 100MiB ||
  t_fail "the tables were not rebuilt after a half-done update"
# The free list is whole again: device 0 fills up to the byte, and everything goes back.
timeout 60 "$C" cu-init cu-fill 0 vmm $(((80 * 1024 - 512 - 1224) / 2)) cu-unfill \
  nvml-init nvml-expect-used 0 1224MiB || t_fail "allocations after the tables were rebuilt"
# The rebuilt list of a process is what the reaper frees when it dies.
kill -9 "$M"
t_until 10 "$C" nvml-init nvml-expect-used 0 1GiB nvml-expect-used 1 0 ||
  t_fail "the memory of a process whose entries were relinked did not come back"
t_ok "a half-done update of the tables is repaired by the next locker"
