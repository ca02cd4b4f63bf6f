#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpum run --fallback cpu on a simulated 2xH100 node: a request no GPU can ever hold, one whose
# wait times out, and one made while gpumd is not there each run CMD anyway, on the CPU: its
# exit status is CMD's, it sees CUDA_VISIBLE_DEVICES empty, GPUM_FALLBACK=cpu and the reason in
# GPUM_FALLBACK_REASON, no reservation variables, and gpum run says so on stderr. Without the
# flag the same requests fail (exit 1) and CMD does not run. A request that fits runs on the GPU
# as always (no GPUM_FALLBACK); a bad --fallback value is a usage error.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
G="$GPUM_BIN"
# shows CMD's view: the variables that say where it runs, then exits 3 (its own status).
SHOW='echo "CVD=[${CUDA_VISIBLE_DEVICES-unset}] FB=[${GPUM_FALLBACK-}] RID=[${GPUM_RESERVATION_ID-}] WHY=[${GPUM_FALLBACK_REASON-}]"; exit 3'

# gpumd not running.
t_expect 3 "$G" run --mem 1GiB --fallback cpu -q -- sh -c "$SHOW"
grep -q '^CVD=\[\] FB=\[cpu\] RID=\[\] WHY=\[.\+\]$' "$T_OUT" || t_fail "no gpumd: $(cat "$T_OUT" "$T_ERR")"
grep -q 'running it on the CPU (--fallback cpu)' "$T_ERR" || t_fail "not said: $(cat "$T_ERR")"
t_expect 1 "$G" run --mem 1GiB -q -- sh -c "$SHOW"
[ ! -s "$T_OUT" ] || t_fail "CMD ran without --fallback: $(cat "$T_OUT")"
t_ok "gpumd not there: CMD on the CPU with --fallback cpu (its exit status), not run without"

gd_start
# Can never fit: 500 GiB on an 80 GiB GPU.
t_expect 3 "$G" run --mem 500GiB --fallback cpu -q -- sh -c "$SHOW"
grep -q '^CVD=\[\] FB=\[cpu\] RID=\[\] WHY=\[.*can ever hold that.*\]$' "$T_OUT" ||
  t_fail "never fits: $(cat "$T_OUT" "$T_ERR")"
t_expect 1 "$G" run --mem 500GiB -q -- sh -c "$SHOW"
t_ok "a request no GPU can hold: CMD on the CPU with --fallback cpu, exit 1 without"

# Its wait times out: both GPUs held, a 1 s timeout.
t_expect 0 "$G" reserve --mem 70GiB --gpus 2 --ttl 10m -q
HELD=$(cat "$T_OUT")
t_expect 3 "$G" run --mem 40GiB --timeout 1s --fallback cpu -q -- sh -c "$SHOW"
grep -q '^CVD=\[\] FB=\[cpu\] RID=\[\] WHY=\[.\+\]$' "$T_OUT" || t_fail "timeout: $(cat "$T_OUT" "$T_ERR")"
t_expect 0 "$G" release "$HELD"
t_ok "a wait that times out: CMD on the CPU"

# A request that fits runs on the GPU as always.
t_expect 3 "$G" run --mem 1GiB --fallback cpu -q -- sh -c "$SHOW"
grep -q '^CVD=\[GPU-[^]]*\] FB=\[\] RID=\[r-[0-9]*\] WHY=\[\]$' "$T_OUT" || t_fail "fits: $(cat "$T_OUT" "$T_ERR")"
t_expect 2 "$G" run --mem 1GiB --fallback gpu -- true
grep -q -- '--fallback needs cpu' "$T_ERR" || t_fail "bad value: $(cat "$T_ERR")"
t_ok "a request that fits runs on its GPU; --fallback gpu is a usage error"
