#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scripts/run.sh (`make run`): starts a simulated 2xH100 node and gpumd in the foreground,
# prints first the dashboard's address (the port gpumd really listens on, here a free one),
# then the socket and commands to try; gpum run works against it; Ctrl-C (SIGINT to its
# process group) stops gpumd and the node is stopped with it.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
G="$GPUM_BIN"
command -v setsid >/dev/null || t_fail "setsid (util-linux) is needed"

export GPUM_SOCKET="$T_SCRATCH/gpumd.sock" GPUM_STATE_DIR="$T_SCRATCH/state"
export GPUM_HTTP_LISTEN=127.0.0.1:0 # a free port: tests run in parallel
export GPUM_DEMO_NODE="run$$-$RANDOM"
unset GPUM_SIM_NODE
# In its own session, so that the test can send SIGINT to its whole group as a terminal would.
setsid "$GPUM_SOURCE_DIR/scripts/run.sh" "$GPUM_BUILD_DIR" >"$T_SCRATCH/run.out" 2>"$T_SCRATCH/run.err" &
RUN=$!
T_NODES+=("$GPUM_DEMO_NODE")
# On failure, end run.sh's whole session (gpumd included), then the usual cleanup.
r_cleanup() {
  local rc=$?
  kill -KILL -- "-$RUN" 2>/dev/null || true
  (exit $rc)
  t_cleanup
}
trap r_cleanup EXIT
t_until 20 grep -q "^gpumd ready" "$T_SCRATCH/run.out" ||
  { cat "$T_SCRATCH/run.out" "$T_SCRATCH/run.err" >&2; t_fail "gpumd not ready under run.sh"; }
addr=$(cat "$GPUM_STATE_DIR/http.addr")
first=$(grep -m 1 '^run: ' "$T_SCRATCH/run.err")
[ "$first" = "run: dashboard: http://$addr/" ] ||
  { cat "$T_SCRATCH/run.err" >&2; t_fail "run.sh's first line is '$first', not the dashboard at $addr"; }
grep -q "gpumd socket: $GPUM_SOCKET" "$T_SCRATCH/run.err" || t_fail "run.sh does not print the socket"
grep -q "gpum run --mem 20GiB" "$T_SCRATCH/run.err" || t_fail "run.sh does not show how to try gpum run"
"$G" sim list | grep -q "$GPUM_DEMO_NODE" || t_fail "run.sh did not start node $GPUM_DEMO_NODE"
t_ok "run.sh: node $GPUM_DEMO_NODE and gpumd at $GPUM_SOCKET"

t_expect 0 "$G" run --mem 20GiB -- sh -c 'echo "$CUDA_VISIBLE_DEVICES"'
grep -q "^GPU-" "$T_OUT" || t_fail "gpum run against make run's gpumd: '$(cat "$T_OUT")'"
t_ok "gpum run works against it"

kill -INT -- "-$RUN"
rc=0
wait "$RUN" || rc=$?
[ $rc -eq 0 ] || { cat "$T_SCRATCH/run.err" >&2; t_fail "run.sh exited $rc after Ctrl-C"; }
"$G" sim list | grep -q "$GPUM_DEMO_NODE" && t_fail "node $GPUM_DEMO_NODE still running after gpumd exited"
t_ok "Ctrl-C stops gpumd; the node is stopped with it"
