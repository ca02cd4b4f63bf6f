#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# When gpum run's reservation FAILS under its command (the GPU fell off the bus), the command
# does not run on unreserved by default: --on-end term (run.on_end) sends it SIGTERM and gpum
# run exits with its status (143); --on-end keep lets it run on and says so. Either way the
# FAILED reservation stays in sight: gpum jobs --all lists it with its reason under "ENDED", and
# --json --all has it under "ended".
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start

# run_on_gpu LABEL ON_END: starts gpum run with a command that writes its pid and sleeps;
# sets RUN_PID (gpum run), CMD_PID and GPU (where it was granted).
run_on_gpu() {
  local pidf="$T_SCRATCH/$1.pid"
  "$GPUM_BIN" run --mem 60GiB --label "$1" --on-end "$2" -- \
    sh -c 'echo $$ >"$1"; exec sleep 600' sh "$pidf" 2>"$T_SCRATCH/$1.err" &
  RUN_PID=$!
  T_PIDS+=("$RUN_PID")
  t_wait_file "$pidf" 20
  CMD_PID=$(cat "$pidf")
  GPU=$("$GPUM_BIN" jobs --json | python3 -c 'import json,sys
r = [x for x in json.load(sys.stdin)["reservations"] if x["label"] == sys.argv[1]][0]
print(r["devices"][0]["index"])' "$1")
}

# Default (term): the command gets SIGTERM when its GPU is lost.
run_on_gpu doomed term
"$GPUM_BIN" sim inject "$T_NODE" --device "$GPU" --xid 79 >/dev/null || t_fail "sim inject"
t_until 30 bash -c "! kill -0 $RUN_PID 2>/dev/null" || t_fail "gpum run still runs after Xid 79"
rc=0
wait "$RUN_PID" || rc=$?
[ "$rc" -eq 143 ] || t_fail "gpum run exited $rc, expected 143 (CMD killed by SIGTERM): $(cat "$T_SCRATCH/doomed.err")"
! kill -0 "$CMD_PID" 2>/dev/null || t_fail "CMD $CMD_PID still runs"
grep -q "SIGTERM to it (--on-end term" "$T_SCRATCH/doomed.err" ||
  t_fail "gpum run did not say why: $(cat "$T_SCRATCH/doomed.err")"
t_ok "a FAILED reservation: CMD gets SIGTERM, gpum run exits 143"

# The FAILED reservation stays in sight.
t_expect 0 "$GPUM_BIN" jobs --all
grep -q "^ENDED in the last 10 minutes" "$T_OUT" && grep -q "FAILED .*doomed: GPU $GPU .*failed" "$T_OUT" ||
  t_fail "gpum jobs --all: $(cat "$T_OUT")"
t_expect 0 "$GPUM_BIN" jobs --all --json
python3 -c 'import json,sys
e = [x for x in json.load(open(sys.argv[1]))["ended"] if x["label"] == "doomed"]
assert len(e) == 1 and e[0]["state"] == "FAILED" and "failed" in e[0]["reason"], e' "$T_OUT" ||
  t_fail "gpum jobs --all --json: $(cat "$T_OUT")"
t_ok "gpum jobs --all lists it under ENDED with its reason"

# keep: the command runs on, and gpum run says so.
OTHER=$((1 - GPU))
run_on_gpu survivor keep
[ "$GPU" -eq "$OTHER" ] || t_fail "the second run went to GPU $GPU, not the healthy $OTHER"
"$GPUM_BIN" sim inject "$T_NODE" --device "$GPU" --xid 79 >/dev/null || t_fail "sim inject"
t_until 30 grep -q "runs on without a reservation (--on-end keep)" "$T_SCRATCH/survivor.err" ||
  t_fail "gpum run --on-end keep: $(cat "$T_SCRATCH/survivor.err")"
kill -0 "$CMD_PID" || t_fail "CMD was stopped despite --on-end keep"
kill "$CMD_PID"
rc=0
wait "$RUN_PID" || rc=$?
[ "$rc" -eq 143 ] || t_fail "gpum run exited $rc after CMD was killed"
t_ok "--on-end keep: CMD runs on without its reservation, said on stderr"
