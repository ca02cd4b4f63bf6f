#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Slurm's suspend frees GPUs (docs/slurm.md, "Suspend"): in a loopback Slurm cluster over a
# simulated one-GPU node whose gpumd has suspend.slurm on, a step under
# `srun --gpu-mem` holds a pattern in 256 MiB of device memory (progs/suspend_job.c):
#   - `scontrol suspend`: once its task is stopped, gpumd checkpoints it: its reservation is
#     SUSPENDED (held, "suspended by Slurm"), the GPU's used memory drops by the job's, and the
#     task is still stopped;
#   - while it is suspended another reservation takes the GPU; `scontrol resume`: the task runs
#     again but its CUDA calls wait, its reservation waits for room; when the other is released
#     gpumd resumes it, and the job's step finds its pattern intact;
#   - suspended and resumed again with room: GRANTED again, the pattern intact, and the step
#     ends well.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/slurm_lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/suspend_lib.sh"
s_require
command -v scontrol >/dev/null || { echo "skip: scontrol is not installed"; exit 77; }
s_plugin_node slurmsusp
G=$GPUM_BIN
JOB=$GPUM_TEST_PROGS/suspend_job
S=$T_SCRATCH
MiB256=268435456
export GPUM_SUSPEND_SLURM=true
GPUM_LOG_LEVEL=info gd_start
s_dir
"$G" slurm conf --node gnode --dev-dir "$S_DIR/c/dev" --gres >"$S/gres.conf"
env PATH=/usr/bin:/bin "$G" slurm conf --node gnode --slurm >"$S/slurm.lines"
echo "required $PLUGIN wait=5s" >"$S/plugstack.conf"
s_start "$S/gres.conf" "$S/slurm.lines" "$S/plugstack.conf"
cd "$S"

job_id() { squeue -h -n "$1" -o %i | head -n 1; }
# proc_state PID: the state letter of /proc/PID/stat.
proc_state() { sed 's/.*) \(.\).*/\1/' "/proc/$1/stat"; }
stopped() { [ "$(proc_state "$1")" = T ]; }
# step GEN: asks the job for a step and waits for its answer "ok GEN".
step() {
  echo step >&"$CTL"
  t_until 30 grep -q "^\(ok\|bad\) $1\b" "$S/job/out" || t_fail "no answer to step $1"
  grep -q "^ok $1\$" "$S/job/out" || { cat "$S/job/out"; t_fail "step $1 failed"; }
}

mkdir -p "$S/job"
mkfifo "$S/job/ctl"
t_bg srun -J susp --gres=shard:4 --gpu-mem=4GiB "$JOB" "$MiB256" "$S/job" 2>"$S/job.err"
SRUN=$T_LAST_PID
t_wait_file "$S/job/ready" 30
TASK=$(cat "$S/job/ready")
exec {CTL}>"$S/job/ctl"
step 0
JID=$(job_id susp)
L="slurm job $JID step 0"
is_state "$L" GRANTED || t_fail "no granted reservation for $L: $(resv_of "$L")"
USED0=$(gpu_used)

# scontrol suspend: the task is stopped, then its memory goes to host memory.
scontrol suspend "$JID"
t_until 30 is_state "$L" SUSPENDED True || { cat "$GD_ERR"; t_fail "not SUSPENDED after scontrol suspend: $(resv_of "$L")"; }
R=$(resv_of "$L")
field "$R" reason | grep -q '^suspended by Slurm (scontrol suspend)' || t_fail "the reason: $R"
[ "$(field "$R" host_bytes)" -ge "$MiB256" ] || t_fail "host_bytes below the job's 256 MiB: $R"
USED1=$(gpu_used)
[ $((USED0 - USED1)) -ge "$MiB256" ] || t_fail "GPU used $USED0 -> $USED1: the job's memory is not free"
stopped "$TASK" || t_fail "the task is not stopped after gpumd's suspend: $(proc_state "$TASK")"
grep -q "1 stopped process was let run for the suspend, then stopped again" "$GD_ERR" ||
  t_fail "gpumd's log does not say the stopped task was let run for the suspend"
t_ok "scontrol suspend: the step's reservation is SUSPENDED (held, by Slurm), its GPU memory free, its task stopped"

# Its room is taken; scontrol resume: the task runs, its CUDA calls wait for the room.
t_bg "$G" reserve --mem 44GiB -q --label hog
HOG=$T_LAST_PID
t_until 20 is_state hog GRANTED || t_fail "the 44 GiB reservation was not granted: $(resv_of hog)"
scontrol resume "$JID"
waits() {
  local r
  r=$(resv_of "$L")
  [ "$(field "$r" state)" = SUSPENDED ] && [ "$(field "$r" hold)" = False ] &&
    field "$r" reason | grep -q '^resume asked'
}
t_until 30 waits || t_fail "after scontrol resume with no room, not waiting for room: $(resv_of "$L")"
stopped "$TASK" && t_fail "the task is still stopped after scontrol resume"
echo step >&"$CTL" # answered once the memory is back
kill "$HOG"
wait "$HOG" 2>/dev/null || true
t_until 30 is_state "$L" GRANTED || t_fail "not resumed when the room came back: $(resv_of "$L")"
t_until 30 grep -q "^\(ok\|bad\) 1\b" "$S/job/out" || t_fail "no answer to step 1"
grep -q "^ok 1\$" "$S/job/out" || { cat "$S/job/out"; t_fail "step 1 failed: the pattern is not intact"; }
t_ok "scontrol resume with no room: it waits for room, its CUDA calls wait; resumed when the room returns, the pattern intact"

# Suspended and resumed again, with room.
USED0=$(gpu_used)
scontrol suspend "$JID"
t_until 30 is_state "$L" SUSPENDED True || t_fail "not SUSPENDED after the second scontrol suspend: $(resv_of "$L")"
[ $((USED0 - $(gpu_used))) -ge "$MiB256" ] || t_fail "the second suspend freed no GPU memory"
scontrol resume "$JID"
t_until 30 is_state "$L" GRANTED || t_fail "not GRANTED after scontrol resume: $(resv_of "$L")"
step 2
t_ok "scontrol suspend and resume again: GRANTED again, the pattern intact"

exec {CTL}>&-
rc=0
wait "$SRUN" || rc=$?
[ "$rc" -eq 0 ] || { cat "$S/job.err"; t_fail "the step exited $rc"; }
t_ok "the step ends well"
