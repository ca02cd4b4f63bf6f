#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpum_spank.so in a loopback Slurm cluster over a simulated one-GPU node (48 GiB: 45 shards of
# 1 GiB by gpum slurm conf) and its gpumd: two `srun --gres=shard:20 --gpu-mem=20GiB` steps
# share the GPU, each holding a reservation on it labelled with its job and step (whose ids
# gpum jobs --json and /metrics show) and seeing a 20 GiB device through the shim; a third
# waits in Slurm's queue and starts when one is cancelled, whose reservation is released within
# a second; a batch script's reservation carries step id "batch"; a step that allocates past its
# limit gets CUDA_ERROR_OUT_OF_MEMORY while its neighbour runs on; a step without --gpu-mem is
# untouched; one gpumd refuses fails with the reason; a killed slurmstepd's reservation ends;
# salloc --gpu-mem hands the option to its srun steps, which reserve and see their memory.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/slurm_lib.sh"
s_require
s_plugin_node slurm48
G=$GPUM_BIN
P=$GPUM_TEST_PROGS/enforce_probe
S=$T_SCRATCH
GiB=1073741824
export GPUM_SOCKET_MODE=0666 # the job of another user below connects too
gd_start
s_dir
"$G" slurm conf --node gnode --dev-dir "$S_DIR/c/dev" --gres >"$S/gres.conf"
# Without slurmd -C's hardware (slurmd off PATH), the test cluster gives the node 16 CPUs.
env PATH=/usr/bin:/bin "$G" slurm conf --node gnode --slurm >"$S/slurm.lines"
grep -q 'shard:45$' "$S/slurm.lines" || { cat "$S/slurm.lines"; t_fail "expected 45 shards"; }
# No socket=: the plugin finds gpumd's socket in gpum's configuration (here GPUM_SOCKET, which
# slurmd and its slurmstepd inherit).
echo "required $PLUGIN wait=5s" >"$S/plugstack.conf"
s_start "$S/gres.conf" "$S/slurm.lines" "$S/plugstack.conf"
cd "$S"

# jobs_json: gpumd's reservations (everyone's) in $S/jobs.json.
jobs_json() { "$G" jobs --all --json >"$S/jobs.json"; }
# job_id NAME: Slurm's id of the job named NAME.
job_id() { squeue -h -n "$1" -o %i | head -n 1; }
# res_live LABEL: a granted reservation has that label.
res_live() {
  jobs_json && t_pyjson "$S/jobs.json" 'import sys
rs = d["reservations"] if isinstance(d, dict) else d
sys.exit(0 if any(r["label"] == args[0] and r["state"] == "GRANTED" for r in rs) else 1)' "$1"
}
res_gone() { ! res_live "$1"; }
job_state() { [ "$(squeue -h -n "$1" -o %T | head -n 1)" = "$2" ]; }

# Two steps of 20 GiB share the GPU; each sees 20 GiB.
for j in a b; do
  t_bg srun -J "$j" --gres=shard:20 --gpu-mem=20GiB --gpu-mem-enforce \
    sh -c "echo \$GPUM_FENCE >'$S/$j.fence' && '$P' info >'$S/$j.info' && exec '$P' hold 1G '$S/$j.held'" 2>"$S/$j.err"
  eval "PID_$j=\$T_LAST_PID"
done
t_wait_file "$S/a.held" 30
t_wait_file "$S/b.held" 30
for j in a b; do
  t_pyjson "$S/$j.info" 'assert d["cu_total"] == 20 << 30 and d["nvml_total"] == 20 << 30, d' ||
    t_fail "step $j does not see a 20 GiB device"
done
JA=$(job_id a)
JB=$(job_id b)
jobs_json
t_pyjson "$S/jobs.json" 'rs = d["reservations"] if isinstance(d, dict) else d
mine = {r["label"]: r for r in rs if r["state"] == "GRANTED"}
for j in args:
    r = mine["slurm job %s step 0" % j]
    assert r["bytes_per_gpu"] == 20 << 30 and [x["index"] for x in r["devices"]] == [0], r
    assert r["lease"] == "pid" and r["fenced"]["limit"] == 20 << 30 and r["fenced"]["used"] == 1 << 30, r
    assert r["slurm"] == {"job_id": j, "step_id": "0"}, r' \
  "$JA" "$JB" || { cat "$S/jobs.json"; t_fail "no fenced 20 GiB reservations for jobs $JA and $JB on GPU 0"; }
t_ok "two --gres=shard:20 --gpu-mem=20GiB steps share GPU 0, each reserved and fenced at 20 GiB, with their job and step ids"
# The steps' processes hold 1 GiB each inside their reservations: gpumd does not count that
# again as unmanaged memory (they descend from slurmstepd, the lease's process), while a
# process outside Slurm holding 3 GiB is unmanaged.
t_bg "$P" hold 3G "$S/f.held"
FOREIGN=$T_LAST_PID
t_wait_file "$S/f.held"
unmanaged() { gd_py 'print(Client().ok("status")["devices"][0]["unmanaged"])'; }
seen() { [ "$(unmanaged)" != 0 ]; }
t_until 5 seen || t_fail "the foreign process's memory is not seen within 5 s"
[ "$(unmanaged)" = $((3 * GiB)) ] || t_fail "unmanaged is $(unmanaged), not the foreign 3 GiB alone"
kill "$FOREIGN"
t_ok "the steps' memory is their reservations', not unmanaged"
# /metrics: each step's reservation, by its label, with the memory its processes use.
t_wait_file "$GPUM_STATE_DIR/http.addr"
step_used() {
  /usr/bin/python3 - "http://$(cat "$GPUM_STATE_DIR/http.addr")/metrics" "$1" <<'PY'
import sys, urllib.request
text = urllib.request.urlopen(sys.argv[1], timeout=10).read().decode()
job = sys.argv[2].split()[2]  # "slurm job J step 0"
rows = [l for l in text.splitlines() if l.startswith("gpum_reservation_used_bytes{")
        and 'label="%s"' % sys.argv[2] in l
        and 'slurm_job_id="%s",slurm_step_id="0"' % job in l]
sys.exit(0 if len(rows) == 1 and float(rows[0].rsplit(" ", 1)[1]) == 1 << 30 else 1)
PY
}
t_until 5 step_used "slurm job $JA step 0" && t_until 5 step_used "slurm job $JB step 0" ||
  t_fail "/metrics: the steps' reservations do not show the 1 GiB their tasks use"
t_ok "/metrics shows each step's reservation by job and step (label, slurm_job_id, slurm_step_id), with what its tasks use"


# A third does not fit in the 45 shards: Slurm queues it; cancelling a running job releases
# its reservation within a second, and the third starts.
t_bg srun -J c --gres=shard:20 --gpu-mem=20GiB --gpu-mem-enforce \
  sh -c "exec '$P' hold 1G '$S/c.held'" 2>"$S/c.err"
t_until 10 job_state c PENDING || t_fail "the third job is not pending"
[ ! -e "$S/c.held" ] || t_fail "the third job ran beside two"
[ -e "/dev/shm/$(cat "$S/a.fence")" ] || t_fail "no fence $(cat "$S/a.fence") for job $JA"
scancel "$JA"
t_until 1 res_gone "slurm job $JA step 0" || t_fail "job $JA's reservation outlived scancel by a second"
t_until 5 test ! -e "/dev/shm/$(cat "$S/a.fence")" || t_fail "job $JA's fence is left behind"
t_ok "a third job waits in Slurm's queue; scancel releases a running job's reservation within a second"
t_wait_file "$S/c.held" 30
JC=$(job_id c)
res_live "slurm job $JC step 0" || t_fail "the third job runs without its reservation"
t_ok "the third job starts when one ends"

# Past its limit a step gets CUDA_ERROR_OUT_OF_MEMORY (enforce_probe try: exit 3); its
# neighbours run on.
rc=0
srun -J d --gres=shard:2 --gpu-mem=2GiB --gpu-mem-enforce "$P" try 3G 2>"$S/d.err" || rc=$?
[ "$rc" -eq 3 ] || { cat "$S/d.err"; t_fail "a step past its 2 GiB got exit $rc, not CUDA_ERROR_OUT_OF_MEMORY (3)"; }
grep -q 'out of memory on device 0: limit 2.00 GiB' "$S/d.err" || { cat "$S/d.err"; t_fail "no shim line"; }
t_expect 0 srun -J d2 --gres=shard:2 --gpu-mem=2GiB --gpu-mem-enforce "$P" try 1G
job_state b RUNNING && job_state c RUNNING || t_fail "a neighbour stopped"
t_ok "a step past its limit gets CUDA_ERROR_OUT_OF_MEMORY; its neighbours run on"

# sbatch --gpu-mem: the batch script holds the reservation, fenced; its srun steps run in it.
sbatch -J g --gres=shard:4 --gpu-mem=4GiB --gpu-mem-enforce -o "$S/g.out" --wrap \
  "'$G' jobs --json >'$S/g.jobs'; '$P' info >'$S/g.info'; srun '$P' try 5G; echo \$? >'$S/g.step'; srun '$P' try 3G; echo \$? >'$S/g.rc'" >/dev/null
t_wait_file "$S/g.rc" 30
t_pyjson "$S/g.info" 'assert d["cu_total"] == 4 << 30, d' || t_fail "the batch script does not see 4 GiB"
[ "$(cat "$S/g.step")" = 3 ] && [ "$(cat "$S/g.rc")" = 0 ] || { cat "$S/g.out"; t_fail "the batch job's steps are not fenced at 4 GiB"; }
t_pyjson "$S/g.jobs" 'rs = [r for r in d["reservations"] if (r["slurm"] or {}).get("step_id") == "batch"]
assert len(rs) == 1 and rs[0]["state"] == "GRANTED", rs
assert rs[0]["label"] == "slurm job %s step batch" % rs[0]["slurm"]["job_id"], rs' ||
  { cat "$S/g.jobs"; t_fail "the batch script's reservation does not carry step id batch"; }
t_ok "sbatch --gpu-mem: the batch script and its steps share one fenced reservation (step id batch)"
# A reservation id inherited from elsewhere (srun under gpum run on a login node) is not the
# job's: the step reserves its own.
t_expect 0 env GPUM_RESERVATION_ID=r-999 srun -J h --gres=shard:1 --gpu-mem=1GiB sh -c 'echo $GPUM_RESERVATION_ID'
grep -qx 'r-[0-9]*' "$T_OUT" && ! grep -qx 'r-999' "$T_OUT" || { cat "$T_OUT" "$T_ERR"; t_fail "a step took an inherited reservation id for its job's"; }
t_ok "a step with a reservation id from outside its job reserves its own"

# No --gpu-mem: untouched.
t_expect 0 srun -J e --gres=shard:1 env
grep -q '^GPUM_RESERVATION_ID=' "$T_OUT" && t_fail "a step without --gpu-mem got a reservation"
grep -q '^LD_PRELOAD=' "$T_OUT" && t_fail "a step without --gpu-mem got the shim"
grep -qx 'CUDA_VISIBLE_DEVICES=0' "$T_OUT" || { cat "$T_OUT"; t_fail "Slurm's CUDA_VISIBLE_DEVICES changed"; }
t_ok "a step without --gpu-mem is untouched"

# gpumd refuses: the step fails with the reason; bad options fail in srun.
t_expect 1 srun -J f --gres=shard:1 --gpu-mem=100GiB true
grep -q 'gpum: step [0-9]*.0: gpumd did not reserve 100.00 GiB on GPU 0: .*can ever hold' "$T_ERR" || { cat "$T_ERR"; t_fail "no reason for the refusal"; }
t_expect 1 srun -J f --gpu-mem=1GiB true
grep -q 'has --gpu-mem but no GPU on this node' "$T_ERR" || { cat "$T_ERR"; t_fail "no reason for a step without GPUs"; }
rc=0
srun -J f --gres=shard:1 --gpu-mem=lots true 2>"$T_ERR" || rc=$?
[ "$rc" -ne 0 ] && grep -q 'gpum: --gpu-mem needs a size' "$T_ERR" || { cat "$T_ERR"; t_fail "--gpu-mem=lots"; }
t_ok "a step gpumd refuses, or without GPUs, fails with the reason; a bad --gpu-mem fails in srun"

# A job of another user (nobody): the reservation and the fence are that user's, and both go
# when the step ends (released by slurmstepd as root).
if id nobody >/dev/null 2>&1; then
  chmod 0711 "$S"
  t_expect 0 runuser -u nobody -- env "SLURM_CONF=$SLURM_CONF" srun -J n --gres=shard:2 \
    --gpu-mem=2GiB --gpu-mem-enforce sh -c "stat -c %U /dev/shm/\$GPUM_FENCE && echo \$GPUM_FENCE && '$G' jobs --json"
  [ "$(sed -n 1p "$T_OUT")" = nobody ] || { cat "$T_OUT" "$T_ERR"; t_fail "the fence is not the job user's"; }
  NFENCE=$(sed -n 2p "$T_OUT")
  sed 1,2d "$T_OUT" >"$S/n.json"
  t_pyjson "$S/n.json" 'rs = d["reservations"] if isinstance(d, dict) else d
assert len(rs) == 1 and rs[0]["uid"] == 65534 and rs[0]["label"].startswith("slurm job "), rs' ||
    t_fail "the step of nobody holds no reservation of its own"
  t_until 5 res_gone "$(t_pyjson "$S/n.json" 'print((d["reservations"] if isinstance(d, dict) else d)[0]["label"])')" ||
    t_fail "nobody's reservation outlived the step"
  t_until 5 test ! -e "/dev/shm/$NFENCE" || t_fail "nobody's fence outlived the step"
  t_ok "a job of another user holds its own reservation and fence, released at its end"
fi

# slurmstepd killed: gpumd ends the reservation (its pid lease).
STEPD=""
for p in $(pgrep -f "^slurmstepd: \[$JB\.0\]"); do # this cluster's (another may number alike)
  tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qxF "SLURM_CONF=$SLURM_CONF" && STEPD=$p
done
[ -n "$STEPD" ] || t_fail "no slurmstepd for job $JB"
kill -KILL "$STEPD"
t_until 2 res_gone "slurm job $JB step 0" || t_fail "job $JB's reservation outlived its slurmstepd"
t_until 2 test ! -e "/dev/shm/$(cat "$S/b.fence")" || t_fail "job $JB's fence outlived its slurmstepd"
t_ok "a killed slurmstepd's reservation ends, and gpumd removes its fence"
scancel "$JC"
t_until 5 res_gone "slurm job $JC step 0" || t_fail "job $JC's reservation outlived scancel"

# salloc --gpu-mem: Slurm 22.05 hands salloc's SPANK options to the allocation's srun steps
# (_SLURM_SPANK_OPTION_gpum_gpu_mem in their environment), so each step reserves and is fenced.
t_expect 0 timeout 60 salloc -J sa --gres=shard:20 --gpu-mem=20GiB --gpu-mem-enforce \
  srun sh -c "echo \$SLURM_JOB_ID >'$S/sa.job' && '$P' info >'$S/sa.info' && '$G' jobs --json >'$S/sa.json'"
t_pyjson "$S/sa.info" 'assert d["cu_total"] == 20 << 30 and d["nvml_total"] == 20 << 30, d' ||
  { cat "$T_OUT" "$T_ERR"; t_fail "salloc --gpu-mem: the step does not see a 20 GiB device"; }
JS=$(cat "$S/sa.job")
t_pyjson "$S/sa.json" 'rs = d["reservations"] if isinstance(d, dict) else d
assert any(r["label"] == "slurm job %s step 0" % args[0] and r["state"] == "GRANTED" for r in rs), rs' "$JS" ||
  t_fail "salloc --gpu-mem: the step held no reservation"
t_until 5 res_gone "slurm job $JS step 0" || t_fail "salloc --gpu-mem: the step's reservation outlived it"
t_ok "salloc --gres=shard:20 --gpu-mem=20GiB srun: the step reserves and sees 20 GiB"
