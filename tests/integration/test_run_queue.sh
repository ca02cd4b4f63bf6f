#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A gpum run that does not fit waits in gpumd's queue, shows its position on stderr, and starts
# when the run ahead of it ends; --timeout gives up (and cancels) when the grant does not come.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start
G="$GPUM_BIN"
FIFO="$T_SCRATCH/go"
mkfifo "$FIFO"

# The first run takes 70 GiB on both GPUs and holds them until the test writes to the fifo.
t_bg "$G" run --mem 70GiB --gpus 2 --label first -- sh -c 'echo started >"$1"; read -r x <"$2"' sh \
  "$T_SCRATCH/first.started" "$FIFO"
FIRST=$T_LAST_PID
t_wait_file "$T_SCRATCH/first.started" 20

# The second cannot fit until then.
t_bg "$G" run --mem 70GiB --label second -- sh -c 'echo "$CUDA_VISIBLE_DEVICES" >"$1"' sh \
  "$T_SCRATCH/second.ran" 2>"$T_SCRATCH/second.err"
SECOND=$T_LAST_PID
t_until 20 grep -q "queued at position 1" "$T_SCRATCH/second.err" ||
  { cat "$T_SCRATCH/second.err" >&2; t_fail "the second run shows no queue position"; }
t_ok "queued: $(head -1 "$T_SCRATCH/second.err")"
[ ! -e "$T_SCRATCH/second.ran" ] || t_fail "the second run started while the first holds the GPUs"

"$G" jobs --json >"$T_SCRATCH/jobs.json" || t_fail "gpum jobs"
t_pyjson "$T_SCRATCH/jobs.json" '
st = {r["label"]: r["state"] for r in d["reservations"]}
sys.exit(0 if st == {"first": "GRANTED", "second": "QUEUED"} else 1)' ||
  { cat "$T_SCRATCH/jobs.json" >&2; t_fail "gpum jobs does not show first GRANTED, second QUEUED"; }
"$G" jobs >"$T_OUT" || t_fail "gpum jobs (text)"
grep -q "QUEUED.*#1" "$T_OUT" || { cat "$T_OUT" >&2; t_fail "gpum jobs text: no queue position"; }
t_ok "gpum jobs shows the queue"

# A third run with --timeout gives up and cancels.
t_expect 1 "$G" run --mem 70GiB --timeout 300ms -- true
grep -q "not granted\|EXPIRED\|timed out\|timeout" "$T_ERR" || { cat "$T_ERR" >&2; t_fail "--timeout: no reason"; }
t_ok "--timeout: $(tail -1 "$T_ERR")"

echo go >"$FIFO"
wait "$FIRST" || t_fail "the first run failed"
rc=0
wait "$SECOND" || rc=$?
[ $rc -eq 0 ] || { cat "$T_SCRATCH/second.err" >&2; t_fail "the second run exited $rc"; }
[ -s "$T_SCRATCH/second.ran" ] || t_fail "the second run never ran its command"
t_ok "the second run started after the first ended (GPU $(cat "$T_SCRATCH/second.ran"))"

"$G" jobs --all --json >"$T_SCRATCH/jobs.json"
t_pyjson "$T_SCRATCH/jobs.json" 'sys.exit(0 if d["reservations"] == [] else 1)' ||
  { cat "$T_SCRATCH/jobs.json" >&2; t_fail "reservations left"; }
t_ok "nothing left"
