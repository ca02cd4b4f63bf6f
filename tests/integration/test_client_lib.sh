#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The client library against a real gpumd (progs/client_demo.c): blocking reserve with list,
# status and release; a non-blocking reserve that is QUEUED, polled on the fd and granted when
# the holder lets go; attach with a wrong token is refused.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"
DEMO="$GPUM_TEST_PROGS/client_demo"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start

t_expect 0 "$DEMO" reserve 10GiB
grep -q "^GRANTED r-[0-9]* GPU-" "$T_OUT" && grep -q "^RELEASED r-" "$T_OUT" ||
  { cat "$T_OUT" "$T_ERR" >&2; t_fail "blocking reserve/list/status/release"; }
t_ok "blocking reserve, list, status, release"

# Hold both GPUs, then reserve without blocking: QUEUED, then granted when the holder exits.
t_bg "$GPUM_BIN" reserve --mem 70GiB --gpus 2 -q >"$T_SCRATCH/hold.id"
HOLD=$T_LAST_PID
t_wait_file "$T_SCRATCH/hold.id" 20
t_bg "$DEMO" async 70GiB >"$T_SCRATCH/async.out" 2>"$T_SCRATCH/async.err"
ASYNC=$T_LAST_PID
t_until 20 grep -q "^QUEUED r-" "$T_SCRATCH/async.out" ||
  { cat "$T_SCRATCH/async.out" "$T_SCRATCH/async.err" >&2; t_fail "async reserve not QUEUED"; }
kill -INT "$HOLD"
wait "$HOLD" || t_fail "gpum reserve (holder) failed"
rc=0
wait "$ASYNC" || rc=$?
[ $rc -eq 0 ] || { cat "$T_SCRATCH/async.out" "$T_SCRATCH/async.err" >&2; t_fail "async: exit $rc"; }
grep -q "^event granted r-.* GRANTED" "$T_SCRATCH/async.out" ||
  { cat "$T_SCRATCH/async.out" >&2; t_fail "no granted event"; }
t_ok "non-blocking reserve: QUEUED, granted event through the polled fd"

# A reservation held by gpum reserve; attach from another connection with a wrong token.
t_bg "$GPUM_BIN" reserve --mem 1GiB -q >"$T_SCRATCH/one.id"
ONE=$T_LAST_PID
t_wait_file "$T_SCRATCH/one.id" 20
t_expect 1 "$DEMO" attach "$(cat "$T_SCRATCH/one.id")" 00000000000000000000000000000000
grep -qE "^E[A-Z]+$" "$T_OUT" || t_fail "attach with a wrong token: '$(cat "$T_OUT")'"
t_ok "attach with a wrong token refused: $(cat "$T_OUT")"
kill -INT "$ONE"
wait "$ONE" || t_fail "gpum reserve failed"
