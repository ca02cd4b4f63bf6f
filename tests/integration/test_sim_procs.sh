# SPDX-License-Identifier: Apache-2.0
# The simulated driver accounts memory per process like a real one: two processes allocating on
# the same GPU see each other in NVML's process list; a process killed with SIGKILL gives its
# memory back; `gpum sim hold` shows up as an unmanaged process and goes away when killed.
source "$(dirname "$0")/lib.sh"
C="$GPUM_TEST_PROGS/sim_client"
S=$T_SCRATCH
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"

# A allocates 1 GiB, B 2 GiB on device 0; each waits for the other, then checks the other.
# A's parent never reaps it (it execs into a client that only blocks), so that A stays a zombie
# once killed.
t_bg sh -c '"$0" nvml-init cu-init cu-ctx 0 cu-alloc 1GiB ready "$1/a" wait-file "$1/b" \
  nvml-expect-proc 0 @"$1/b" 2GiB nvml-expect-proc 0 self 1GiB ready "$1/a-done" block &
  exec "$0" block' "$C" "$S"
t_bg "$C" nvml-init cu-init cu-ctx 0 cu-alloc 2GiB ready "$S/b" wait-file "$S/a" \
  nvml-expect-proc 0 @"$S/a" 1GiB nvml-expect-proc 0 self 2GiB ready "$S/b-done" block
B=$T_LAST_PID
t_wait_file "$S/a-done" 20
t_wait_file "$S/b-done" 20
A=$(cat "$S/a")
T_PIDS+=("$A")
t_ok "two processes see each other in the process list"

"$C" nvml-init nvml-expect-used 0 3GiB nvml-expect-used 1 0 || t_fail "3 GiB used on device 0"
"$GPUM_BIN" sim status "$T_NODE" | grep -q "pid $A " || t_fail "sim status lists pid $A"

# SIGKILL A: while it is a zombie its memory is already free, as with the real driver.
kill -9 "$A"
zombie() { [ "$(ps -o stat= -p "$A" | cut -c1)" = Z ]; }
t_until 10 zombie || t_fail "killed process $A did not become a zombie"
"$C" nvml-init nvml-expect-used 0 2GiB nvml-expect-noproc 0 "$A" nvml-expect-proc 0 "$B" 2GiB \
  || t_fail "memory of the killed process came back"
t_ok "a SIGKILLed process's memory comes back"

# A clean exit gives memory back too (the process never freed it).
"$C" cu-init cu-ctx 1 cu-alloc 512MiB || t_fail "allocation in a short-lived process"
"$C" nvml-init nvml-expect-used 1 0 || t_fail "memory of an exited process came back"

# An unmanaged holder.
H=$("$GPUM_BIN" sim hold "$T_NODE" --device 1 --bytes 5GiB) || t_fail "sim hold"
T_PIDS+=("$H")
"$C" nvml-init nvml-expect-proc 1 "$H" 5GiB nvml-expect-used 1 5GiB || t_fail "holder listed"
kill "$H"
t_until 10 "$C" nvml-init nvml-expect-noproc 1 "$H" nvml-expect-used 1 0 || t_fail "holder gone"
t_ok "sim hold shows an unmanaged process and lets go when killed"

# A holder with a duration ends by itself; one that does not fit is refused.
H=$("$GPUM_BIN" sim hold "$T_NODE" --device 1 --bytes 1GiB --for 300ms) || t_fail "hold --for"
T_PIDS+=("$H")
t_until 10 "$C" nvml-init nvml-expect-noproc 1 "$H" || t_fail "holder with --for did not end"
if "$GPUM_BIN" sim hold "$T_NODE" --device 1 --bytes 200GiB 2>"$S/err"; then
  t_fail "holding more than the device has succeeded"
fi
grep -q "not enough" "$S/err" || t_fail "unclear hold error: $(cat "$S/err")"
"$C" nvml-init nvml-expect-used 1 0 || t_fail "a refused hold changed nothing"
t_ok "hold --for ends, hold beyond capacity is refused"
