#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpum run killed with SIGKILL (which it cannot catch or forward): gpumd releases the
# reservation (its lease is gpum run's connection) and CMD dies with gpum run
# (PR_SET_PDEATHSIG), instead of running on, unreserved, re-parented to init.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start
G="$GPUM_BIN"

# CMD writes its pid, then waits for ever (exec: the pid stays CMD's).
t_bg "$G" run --mem 10GiB --label victim -- sh -c 'echo $$ >"$1.tmp" && mv "$1.tmp" "$1" && exec sleep 1000' sh "$T_SCRATCH/cmd.pid"
RUN_PID=$T_LAST_PID
t_wait_file "$T_SCRATCH/cmd.pid"
CMD_PID=$(cat "$T_SCRATCH/cmd.pid")
kill -0 "$CMD_PID" || t_fail "CMD is not running"
t_expect 0 "$G" jobs --json
t_pyjson "$T_OUT" 'sys.exit(0 if [r["label"] for r in d["reservations"]] == ["victim"] else 1)' ||
  t_fail "no reservation for the running CMD: $(cat "$T_OUT")"

kill -KILL "$RUN_PID"
wait "$RUN_PID" 2>/dev/null || true
# CMD's death is asynchronous to ours: poll for it (ps state Z counts as gone: init reaps).
cmd_gone() { ! kill -0 "$CMD_PID" 2>/dev/null || [ "$(ps -o stat= -p "$CMD_PID" | cut -c1)" = Z ]; }
t_until 10 cmd_gone || t_fail "CMD (pid $CMD_PID) still runs after gpum run was SIGKILLed"
t_ok "CMD died with gpum run"

no_reservations() {
  "$G" jobs --all --json >"$T_SCRATCH/jobs.json" &&
    t_pyjson "$T_SCRATCH/jobs.json" 'sys.exit(0 if d["reservations"] == [] else 1)'
}
t_until 10 no_reservations || t_fail "reservation left after gpum run died: $(cat "$T_SCRATCH/jobs.json")"
t_ok "gpumd released the reservation"
