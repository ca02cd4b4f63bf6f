# SPDX-License-Identifier: Apache-2.0
# Faults on a simulated node: transient NVML errors at a 20% rate are absorbed by the retries
# (and surface as failures without them); an injected XID 79 arrives as an XID event followed
# by one GPU_LOST event, after which the device answers GPUM_ELOST while the others work; a
# single-bit ECC error arrives as an ECC event; waiting before enabling is a state error; XID 48
# makes reads fail with GPUM_ERESET at once. (Threads: test_device_threads.sh.)
source "$GPUM_SOURCE_DIR/tests/integration/device_lib.sh"

cat >"$T_SCRATCH/spec.yaml" <<'YAML'
name: faults
devices:
  - name: Sim GPU
    count: 2
    memory: 8GiB
YAML
d_sim_start "$T_SCRATCH/spec.yaml"

"$SIMCTL" inject "$T_NODE" 0 error_rate 0.2 || t_fail "inject error rate"
out=$("$DUMP" --backend nvml --retries 20 --retry-base 1 --samples 30)
d_expect "$out" "^samples ok=60 fail=0 " "retries absorb a 20% transient error rate"
out=$("$DUMP" --backend nvml --retries 0 --samples 30)
d_expect "$out" "^samples ok=[0-9]+ fail=[1-9][0-9]* " "without retries transient errors surface"
"$SIMCTL" clear "$T_NODE" 0 || t_fail "clear"
t_ok "transient errors retried"

ev_out="$T_SCRATCH/events.txt"
t_bg bash -c "\"$GPUM_TEST_PROGS/device_events\" \"$T_SCRATCH/ready1\" 1 10000 >\"$ev_out\""
t_wait_file "$T_SCRATCH/ready1"
"$SIMCTL" inject "$T_NODE" 0 ecc_single 1 || t_fail "inject ecc"
t_until 10 grep -q '^final ' "$ev_out" || t_fail "no ECC event: $(cat "$ev_out")"
out=$(cat "$ev_out")
d_expect "$out" "^wait-before-enable rc=ESTATE$" "wait before enable"
d_expect "$out" "^enable rc=OK$" "events enabled"
d_expect "$out" "^event kind=ecc_single device=0 " "ECC event"
t_ok "ECC event"

ev_out="$T_SCRATCH/events2.txt"
t_bg bash -c "\"$GPUM_TEST_PROGS/device_events\" \"$T_SCRATCH/ready2\" 2 10000 >\"$ev_out\""
t_wait_file "$T_SCRATCH/ready2"
"$SIMCTL" inject "$T_NODE" 1 xid 79 || t_fail "inject xid"
t_until 10 grep -q '^final ' "$ev_out" || t_fail "no XID events: $(cat "$ev_out")"
out=$(cat "$ev_out")
d_expect "$out" "^event kind=xid device=1 xid=79$" "XID 79 event with its number"
d_expect "$out" "^event kind=gpu_lost device=1 " "GPU_LOST event after XID 79"
d_expect "$out" "^after device=1 rc=ELOST$" "lost device answers ELOST"
d_expect "$out" "^final rc=ETIMEDOUT" "GPU_LOST is delivered once"
out=$("$DUMP" --backend nvml)
d_expect "$out" "^sample 1 rc=ELOST" "sample of the lost device"
d_expect "$out" "^info 1 rc=ELOST" "info of the lost device"
d_expect "$out" "^sample 0 rc=OK" "the other device still works"
t_ok "XID 79: event, GPU_LOST, ELOST"

"$SIMCTL" clear "$T_NODE" 1 || t_fail "clear the lost device"

# XID 48 (double-bit ECC): the device needs a reset; reads fail with GPUM_ERESET, not retried.
"$SIMCTL" inject "$T_NODE" 0 xid 48 || t_fail "inject xid 48"
out=$("$DUMP" --backend nvml --retry-base 1000 --no-procs)
d_expect "$out" "^sample 0 rc=ERESET" "reset-required device"
d_expect "$out" "^sample 1 rc=OK" "the other device still works"
t_ok "XID 48: ERESET"
