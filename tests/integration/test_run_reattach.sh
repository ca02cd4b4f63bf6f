#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpumd is SIGKILLed and restarted while gpum run's command runs: gpum run notices, reconnects,
# re-attaches its reservation with the token, and the reservation (same id, still GRANTED) is
# released when the command exits.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start
G="$GPUM_BIN"
FIFO="$T_SCRATCH/go"
mkfifo "$FIFO"

t_bg "$G" run --mem 10GiB --label survivor -- sh -c 'echo started >"$1"; read -r x <"$2"' sh \
  "$T_SCRATCH/started" "$FIFO" 2>"$T_SCRATCH/run.err"
RUN=$T_LAST_PID
t_wait_file "$T_SCRATCH/started" 20
"$G" jobs --json >"$T_SCRATCH/before.json"
ID=$(t_pyjson "$T_SCRATCH/before.json" 'print(d["reservations"][0]["id"])')

gd_stop KILL
gd_start
t_until 20 grep -q "re-attached" "$T_SCRATCH/run.err" ||
  { cat "$T_SCRATCH/run.err" "$GD_ERR" >&2; t_fail "gpum run did not re-attach after the restart"; }
"$G" jobs --json >"$T_SCRATCH/after.json"
t_pyjson "$T_SCRATCH/after.json" '
r = d["reservations"]
sys.exit(0 if len(r) == 1 and r[0]["id"] == args[0] and r[0]["state"] == "GRANTED" else 1)' "$ID" ||
  { cat "$T_SCRATCH/after.json" >&2; t_fail "$ID is not GRANTED after the re-attach"; }
t_ok "$ID re-attached after gpumd was killed and restarted"

echo go >"$FIFO"
rc=0
wait "$RUN" || rc=$?
[ $rc -eq 0 ] || { cat "$T_SCRATCH/run.err" >&2; t_fail "gpum run exited $rc"; }
"$G" jobs --all --json >"$T_SCRATCH/end.json"
t_pyjson "$T_SCRATCH/end.json" 'sys.exit(0 if d["reservations"] == [] else 1)' ||
  { cat "$T_SCRATCH/end.json" >&2; t_fail "reservation left after the command exited"; }
t_ok "released when the command exited"
