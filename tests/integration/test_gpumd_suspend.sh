#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Suspend and resume through gpumd (issue 28; docs/suspend.md) on a simulated 2x H100 node, with
# a job whose device memory holds a known pattern (progs/suspend_job.c) run by gpum run
# --preemptible:
#   - gpum suspend: the job's GPU memory is free at once after it (the node's used memory drops,
#     the reservation is SUSPENDED with its host bytes, /metrics counts it), and another request
#     is granted in it;
#   - gpum resume with no room on its own GPU: the job comes back on the other H100 (its
#     reservation says GPU 1), its pattern is intact and it goes on computing;
#   - the refusals: a job that is not preemptible, a reservation that is not granted, a job that
#     used managed memory under the shim, a driver without the checkpoint calls; a process that
#     does not lock within suspend.lock_timeout (the suspend fails, undone, the job runs on);
#   - gpumd SIGKILLed while a job is SUSPENDED: after the restart it is still SUSPENDED with its
#     processes, and resumes;
#   - the policy: a request of higher priority that fits nowhere else makes gpumd suspend a
#     preemptible job of lower priority (past preempt.min_run_time), it is granted, and when it
#     is released gpumd resumes the job by itself;
#   - a suspended job that is killed: its reservation ends and the node's host memory count
#     drops to 0.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/suspend_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
G=$GPUM_BIN
JOB=$GPUM_TEST_PROGS/suspend_job
export GPUM_PREEMPT_MIN_RUN_TIME=0 GPUM_SUSPEND_LOCK_TIMEOUT=500ms
gd_start
t_wait_file "$GPUM_STATE_DIR/http.addr"

# job_start NAME PRIORITY [gpum run flags...]: runs suspend_job (256 MiB; JOB_EXTRA: its third
# argument) under gpum run in the background; JOBPID_NAME (gpum run's pid) and CTL_NAME (an fd on
# its FIFO).
job_start() {
  local name=$1 prio=$2 dir="$T_SCRATCH/job-$1"
  shift 2
  mkdir -p "$dir"
  mkfifo "$dir/ctl"
  t_bg "$G" run --mem 30GiB --priority "$prio" --label "$name" -q "$@" -- "$JOB" 268435456 "$dir" ${JOB_EXTRA:-}
  printf -v "JOBPID_$name" '%s' "$T_LAST_PID"
  t_wait_file "$dir/ready" 30
  exec {fd}>"$dir/ctl" # the job reads its steps from here
  printf -v "CTL_$name" '%s' "$fd"
}

# job_step NAME GEN: asks the job for a step and waits for its answer "ok GEN".
job_step() {
  local name=$1 gen=$2 dir="$T_SCRATCH/job-$1" fd
  fd=CTL_$name
  echo step >&"${!fd}"
  t_until 30 grep -q "^\(ok\|bad\) $gen\b" "$dir/out" || t_fail "job $name: no answer to step $gen"
  grep -q "^ok $gen\$" "$dir/out" || { cat "$dir/out"; t_fail "job $name: step $gen failed"; }
}

metric() { python3 - "http://$(cat "$GPUM_STATE_DIR/http.addr")/metrics" "$1" <<'PY'
import sys, urllib.request
text = urllib.request.urlopen(sys.argv[1], timeout=10).read().decode()
print(next(l.rsplit(" ", 1)[1] for l in text.splitlines() if l.startswith(sys.argv[2] + " ")))
PY
}

# ---- gpum suspend, gpum resume onto the other GPU --------------------------------------------
job_start low 0 --preemptible
job_step low 0
R=$(resv_of low)
LOW=$(field "$R" id)
[ "$(field "$R" devices)" = 0 ] || t_fail "low is not on GPU 0: $R"
[ "$(field "$R" preemptible)" = True ] || t_fail "low is not preemptible: $R"
USED0=$(gpu_used 0)

t_expect 0 "$G" suspend "$LOW"
grep -q "^$LOW SUSPENDED: suspended by uid" "$T_OUT" || { cat "$T_OUT"; t_fail "gpum suspend: $(cat "$T_OUT")"; }
R=$(resv_of low)
[ "$(field "$R" state)" = SUSPENDED ] || t_fail "not SUSPENDED: $R"
HOST=$(field "$R" host_bytes)
[ "$HOST" -ge 268435456 ] || t_fail "host_bytes $HOST below the job's 256 MiB: $R"
USED1=$(gpu_used 0)
[ $((USED0 - USED1)) -ge 268435456 ] || t_fail "GPU 0 used $USED0 -> $USED1: the job's memory is not free"
t_pyjson "$T_SCRATCH/st.json" 'g=d["gpumd"]["devices"][0]; assert g["reserved"]==0 and g["jobs"]==0, g' || t_fail "gpumd still counts the suspended job on GPU 0"
[ "$(metric 'gpum_reservations{state="suspended"}')" = 1 ] || t_fail "/metrics: no suspended reservation"
[ "$(metric gpum_suspended_host_bytes)" = "$HOST" ] || t_fail "/metrics: host bytes"
t_expect 0 "$G" jobs
grep "^$LOW " "$T_OUT" | grep -q "SUSPENDED.*(0).*in host memory, until gpum resume" || { cat "$T_OUT"; t_fail "gpum jobs does not show the suspended job"; }
t_expect 0 "$G" jobs --state SUSPENDED --json
t_pyjson "$T_OUT" 'rs=d["reservations"] if isinstance(d,dict) else d
assert [r["state"] for r in rs]==["SUSPENDED"] and rs[0]["hold"] is True, rs' || t_fail "gpum jobs --state SUSPENDED"
t_expect 0 "$G" status --no-color
grep -q "gpumd: 1 suspended" "$T_OUT" || { cat "$T_OUT"; t_fail "gpum status does not count the suspended job"; }
t_ok "gpum suspend: the job's GPU memory is free, SUSPENDED with its host bytes; gpum jobs, gpum status and /metrics show it"

# The room is taken; the job comes back on GPU 1, its pattern intact, and goes on.
t_bg "$G" reserve --mem 60GiB -q --label hog
HOG=$T_LAST_PID
t_until 20 is_state hog GRANTED || t_fail "the 60 GiB reservation was not granted"
t_expect 0 "$G" resume "$LOW"
grep -q "^$LOW GRANTED: resumed on GPU 1" "$T_OUT" || { cat "$T_OUT" "$T_ERR"; t_fail "gpum resume did not move the job to GPU 1"; }
R=$(resv_of low)
[ "$(field "$R" devices)" = 1 ] || t_fail "resumed reservation not on GPU 1: $R"
job_step low 1
job_step low 2
t_ok "gpum resume: reserved on the other H100 first, restored there, the pattern intact, the job goes on"

# ---- refusals ------------------------------------------------------------------------------
t_expect 1 "$G" resume "$LOW"
grep -q "is GRANTED: only a suspended reservation can be resumed" "$T_ERR" || { cat "$T_ERR"; t_fail "resume of a granted one"; }
job_start plain 0
t_expect 1 "$G" suspend "$(field "$(resv_of plain)" id)"
grep -q "is not preemptible" "$T_ERR" || { cat "$T_ERR"; t_fail "no refusal for a job that is not preemptible"; }
eval "exec ${CTL_plain}>&-"
wait "$JOBPID_plain" || t_fail "the plain job failed"
# Managed memory, seen by the enforcement shim (a sanitizer build's shim needs its runtime first).
RT=$(t_shim_preload | awk 'NF == 2 {print $1}')
if [ -n "$RT" ]; then export LD_PRELOAD=$RT; fi
JOB_EXTRA=managed job_start uvm 0 --preemptible --enforce
unset LD_PRELOAD
t_expect 1 "$G" suspend "$(field "$(resv_of uvm)" id)"
grep -q "allocated managed (UVM) memory, which the CUDA driver does not checkpoint" "$T_ERR" || { cat "$T_ERR"; t_fail "no refusal for managed memory"; }
eval "exec ${CTL_uvm}>&-"
wait "$JOBPID_uvm" || t_fail "the uvm job failed"
t_ok "refused: a resume of a granted reservation, a suspend of a job that is not preemptible or that used managed memory"

# A process that does not lock within suspend.lock_timeout (a CUDA call in flight that does
# not finish): the suspend fails, nothing is left done, the job runs on.
echo hold >&"$CTL_low"
t_until 30 grep -qx held "$T_SCRATCH/job-low/out" || t_fail "the job did not hold a call"
t_expect 1 "$G" suspend "$LOW"
grep -q "^$LOW GRANTED: suspend failed, runs on: lock: cannot lock pid [0-9]* within 500 ms" "$T_OUT" ||
  { cat "$T_OUT" "$T_ERR"; t_fail "no failed suspend with the lock's reason"; }
echo release >&"$CTL_low"
t_until 30 grep -qx released "$T_SCRATCH/job-low/out" || t_fail "the held call did not finish"
job_step low 3
t_ok "a process that does not lock in time: the suspend fails with the reason, the job runs on"

# ---- gpumd SIGKILLed while the job is SUSPENDED ----------------------------------------------
kill "$HOG"
wait "$HOG" 2>/dev/null || true
t_expect 0 "$G" suspend "$LOW"
gd_stop KILL
gd_start
R=$(resv_of low)
[ "$(field "$R" state)" = SUSPENDED ] || t_fail "after gpumd's restart: $R"
[ "$(field "$R" host_bytes)" -ge 268435456 ] || t_fail "after gpumd's restart, the host bytes: $R"
t_expect 0 "$G" resume "$LOW"
grep -q "^$LOW GRANTED: resumed on GPU" "$T_OUT" || { cat "$T_OUT" "$T_ERR"; t_fail "no resume after the restart"; }
job_step low 4
t_ok "gpumd SIGKILLed while a job is SUSPENDED: still SUSPENDED after the restart, and it resumes"

# ---- the policy: preemption for a request of higher priority, resume when it ends -----------
# low holds 30 GiB on one GPU; a 50 GiB request takes the other; a 50 GiB request of higher
# priority fits only where low is.
t_bg "$G" reserve --mem 50GiB -q --label other
t_until 20 is_state other GRANTED || t_fail "other not granted"
t_bg "$G" reserve --mem 50GiB --priority 10 -q --label high
HIGH_PID=$T_LAST_PID
t_until 30 is_state high GRANTED || { "$G" jobs; t_fail "the request of priority 10 was not granted"; }
R=$(resv_of low)
[ "$(field "$R" state)" = SUSPENDED ] || t_fail "low was not preempted: $R"
field "$R" reason | grep -q "preempted for r-" || t_fail "the reason does not say why: $R"
[ "$(field "$R" hold)" = False ] || t_fail "a preempted job must wait for room, not a hand: $R"
kill "$HIGH_PID"
wait "$HIGH_PID" 2>/dev/null || true
t_until 30 is_state low GRANTED || { "$G" jobs; t_fail "low was not resumed when the room came back"; }
job_step low 5
t_ok "policy: a request of priority 10 preempts the job of priority 0; the job resumes by itself after it"

# ---- a suspended job killed: its host memory is given back ----------------------------------
t_expect 0 "$G" suspend "$LOW"
[ "$(metric gpum_suspended_host_bytes)" -ge 268435456 ] || t_fail "no host bytes counted"
kill -KILL "$(cat "$T_SCRATCH/job-low/ready")"
wait "$JOBPID_low" 2>/dev/null || true
no_host() { [ "$(metric gpum_suspended_host_bytes)" = 0 ]; }
t_until 20 no_host || t_fail "the killed job's host memory is still counted"
[ "$(field "$(resv_of low)" state)" = None ] || t_fail "the killed job's reservation is still live"
t_ok "a killed suspended job: its reservation ends, its host memory is no longer counted"

# ---- a driver without the checkpoint calls -------------------------------------------------
gd_stop TERM
[ "$GD_RC" -eq 0 ] || { cat "$GD_ERR"; t_fail "gpumd exited $GD_RC"; }
GPUM_CUDA_LIBRARY="$GPUM_TEST_PROGS/cuda_no_ckpt.so" gd_start
job_start old 0 --preemptible
t_expect 1 "$G" suspend "$(field "$(resv_of old)" id)"
grep -q "cannot suspend jobs" "$T_ERR" && grep -q "12.8" "$T_ERR" || { cat "$T_ERR"; t_fail "no refusal naming the driver needed"; }
t_ok "a driver without the checkpoint calls: refused with the version needed"
gd_stop TERM
[ "$GD_RC" -eq 0 ] || { cat "$GD_ERR"; t_fail "gpumd exited $GD_RC"; }
