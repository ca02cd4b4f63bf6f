# SPDX-License-Identifier: Apache-2.0
# The simulated driver holds a full 8 x H100-80GB node: every device filled in 2 MiB VMM granules
# by one process (cuMemCreate: 40,704 per device, 325,632 in all), then every device filled at
# once with cuMemAlloc_v2 by one process per device (20,352 pieces of 4 MiB each, 162,816 in
# all); each time the next piece gets CUDA_ERROR_OUT_OF_MEMORY, NVML reports the memory as used
# by the process, and everything is given back. A SIGKILLed process holding tens of thousands of
# allocations gives its memory and its table entries back, while the memory of another process
# with as many stays accounted.
# (cuMemAlloc memory is a host mapping per allocation: ThreadSanitizer adds mappings of its own
# to each, and 40,704 of them in one process would pass vm.max_map_count under it.)
source "$(dirname "$0")/lib.sh"
C="$GPUM_TEST_PROGS/sim_client"
S=$T_SCRATCH
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/8xh100.yaml"

FULL=81408MiB # 80 GiB - 512 MiB reserved
N=40704       # FULL / 2 MiB
HALF=$((N / 2))
DEVS="0 1 2 3 4 5 6 7"
# Under ThreadSanitizer two of the eight devices: the same calls and races (TSan's purpose),
# without the run time of half a million instrumented allocations, which on a busy machine
# passed the test's time limit; the full node is covered by the other builds.
[ "${GPUM_SANITIZE:-}" = thread ] && DEVS="0 1"
NDEV=$(wc -w <<<"$DEVS")

steps=(nvml-init cu-init)
for d in $DEVS; do steps+=(cu-fill "$d" vmm "$N"); done
for d in $DEVS; do steps+=(nvml-expect-used "$d" "$FULL" nvml-expect-proc "$d" self "$FULL"); done
steps+=(cu-unfill)
for d in $DEVS; do steps+=(nvml-expect-used "$d" 0 nvml-expect-noproc "$d" self); done
start=$(date +%s)
"$C" "${steps[@]}" || t_fail "filling every device of an 8 x H100 node with VMM granules"
t_ok "$NDEV x H100 filled with $((NDEV * N)) VMM granules of 2 MiB and emptied ($(($(date +%s) - start)) s)"

start=$(date +%s)
P=()
for d in $DEVS; do
  t_bg "$C" nvml-init cu-init cu-ctx "$d" cu-fill "$d" mem=4MiB "$HALF" cu-expect-free 0 \
    ready "$S/full$d" wait-file "$S/go" cu-unfill nvml-expect-used "$d" 0 ready "$S/done$d"
  P+=("$T_LAST_PID")
done
for d in $DEVS; do t_wait_file "$S/full$d" 500; done
steps=(nvml-init)
for d in $DEVS; do steps+=(nvml-expect-used "$d" "$FULL" nvml-expect-proc "$d" "${P[$d]}" "$FULL"); done
"$C" "${steps[@]}" || t_fail "NVML on an 8 x H100 node filled with cuMemAlloc"
echo go >"$S/go"
for d in $DEVS; do t_wait_file "$S/done$d" 500; done
t_ok "$NDEV x H100 filled at once with $((NDEV * HALF)) cuMemAlloc pieces of 4 MiB and emptied ($(($(date +%s) - start)) s)"

# A holds device 0 in VMM handles and half of device 1 in cuMemAlloc pieces; B holds device 2.
t_bg "$C" cu-init cu-fill 0 vmm "$N" cu-ctx 1 cu-take 1 mem "$HALF" ready "$S/a" block
A=$T_LAST_PID
t_bg "$C" cu-init cu-fill 2 vmm "$N" ready "$S/b" block
B=$T_LAST_PID
t_wait_file "$S/a" 120
t_wait_file "$S/b" 120
"$C" nvml-init nvml-expect-proc 0 "$A" "$FULL" nvml-expect-proc 1 "$A" $((HALF * 2))MiB \
  nvml-expect-proc 2 "$B" "$FULL" || t_fail "both holders listed"
kill -9 "$A"
t_until 30 "$C" nvml-init nvml-expect-used 0 0 nvml-expect-used 1 0 ||
  t_fail "the memory of the killed process did not come back"
"$C" nvml-init nvml-expect-noproc 0 "$A" nvml-expect-noproc 1 "$A" nvml-expect-used 2 "$FULL" \
  nvml-expect-proc 2 "$B" "$FULL" || t_fail "reaping the killed process touched another one"
t_ok "a SIGKILLed process with $((N + HALF)) allocations gives them back; the other keeps its $N"

# Its table entries came back too: devices 0 and 1 fill up completely again.
"$C" cu-init cu-fill 0 vmm "$N" cu-ctx 1 cu-fill 1 mem=4MiB "$HALF" nvml-init \
  nvml-expect-used 0 "$FULL" nvml-expect-used 1 "$FULL" cu-unfill nvml-expect-used 0 0 \
  nvml-expect-used 1 0 || t_fail "the killed process's table entries were not reusable"
kill -9 "$B"
t_until 30 "$C" nvml-init nvml-expect-used 2 0 nvml-expect-noproc 2 "$B" ||
  t_fail "the memory of the second killed process did not come back"
t_ok "the table entries of a killed process are reused"
