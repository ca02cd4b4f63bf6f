#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Nothing outlives its reservation: gpumd removes a reservation's fence region whenever the
# reservation ends, for any reason: gpum run --enforce SIGKILLed (its connection lease
# closes), a release by someone else, its GPU falling off the bus (FAILED), and an end while
# gpumd was down (removed at the next start). A region the enforcement shim made alone
# (GPUM_MEM_LIMIT, no gpumd) whose process was SIGKILLed is removed by the next process that
# makes one.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
G=$GPUM_BIN
P=$GPUM_TEST_PROGS/enforce_probe
SHIM=$(t_shim_preload)
RT=$(awk 'NF == 2 {print $1}' <<<"$SHIM")
if [ -n "$RT" ]; then RUN=(env "LD_PRELOAD=$RT" "$G" run); else RUN=("$G" run); fi
export GPUM_HTTP_LISTEN=off
gd_start

# fence_of PID: the fence region CMD (pid PID) runs in, from its environment.
fence_of() { tr '\0' '\n' <"/proc/$1/environ" | sed -n 's/^GPUM_FENCE=//p'; }
# cmd_of RUNPID: the pid of gpum run's CMD once it is running.
cmd_of() { t_until 20 pgrep -P "$1" >/dev/null && pgrep -P "$1" | head -1; }
# fenced_job TAG: starts gpum run --enforce holding 1 GiB; sets RUNPID, FENCE, RID.
fenced_job() {
  rm -f "$T_SCRATCH/held.$1"
  t_bg "${RUN[@]}" --mem 2GiB --enforce -q --label "$1" -- "$P" hold 1G "$T_SCRATCH/held.$1"
  RUNPID=$T_LAST_PID
  t_wait_file "$T_SCRATCH/held.$1" 30
  local cmd
  cmd=$(cmd_of "$RUNPID") || t_fail "$1: no CMD under gpum run"
  FENCE=$(fence_of "$cmd")
  [ -n "$FENCE" ] && [ -e "/dev/shm/$FENCE" ] || t_fail "$1: no fence region ($FENCE)"
  RID=$(tr '\0' '\n' <"/proc/$cmd/environ" | sed -n 's/^GPUM_RESERVATION_ID=//p')
}
gone() { [ ! -e "/dev/shm/$1" ]; }

# gpum run --enforce SIGKILLed: its connection closes, gpumd releases and removes the fence.
for i in 1 2 3; do
  fenced_job "kill$i"
  kill -9 "$RUNPID"
  wait "$RUNPID" 2>/dev/null || true
  t_until 20 gone "$FENCE" || t_fail "SIGKILL $i: $FENCE outlived $RID"
done
t_ok "gpum run --enforce SIGKILLed (3 of 3): the fence is removed with the reservation"

# Released by its owner from elsewhere while the job runs.
fenced_job released
t_expect 0 "$G" release "$RID"
t_until 20 gone "$FENCE" || t_fail "release: $FENCE outlived $RID"
kill -9 "$RUNPID" 2>/dev/null || true
wait "$RUNPID" 2>/dev/null || true
t_ok "a release by someone else: the fence is removed"

# Ended while gpumd was down: gpumd SIGKILLed, then the job; the restart ends the reservation
# (its owner is gone) and removes the fence.
fenced_job restart
gd_stop KILL
kill -9 "$RUNPID"
wait "$RUNPID" 2>/dev/null || true
[ -e "/dev/shm/$FENCE" ] || t_fail "restart: the fence went before gpumd came back"
gd_start
t_until 20 gone "$FENCE" || t_fail "restart: $FENCE outlived $RID"
t_ok "a reservation that ended while gpumd was down: its fence is removed at the restart"

# The GPU falls off the bus: the reservation FAILS, the fence goes.
fenced_job failed
DEV=$("$G" jobs --json | python3 -c 'import json, sys
d = json.load(sys.stdin)
rs = d["reservations"] if isinstance(d, dict) else d
print([r for r in rs if r["label"] == "failed"][0]["devices"][0]["index"])')
"$G" sim inject "$GPUM_SIM_NODE" --device "$DEV" --xid 79 >/dev/null || t_fail "inject"
t_until 30 gone "$FENCE" || t_fail "FAILED: $FENCE outlived $RID"
kill -9 "$RUNPID" 2>/dev/null || true
wait "$RUNPID" 2>/dev/null || true
t_ok "a reservation FAILED with its GPU: the fence is removed"
gd_stop TERM

# The shim alone (GPUM_MEM_LIMIT, no gpumd), SIGKILLed: the next process that makes a region
# removes the one left behind; its own goes at its exit.
export GPUM_SIM_NODE
"$G" sim stop "$GPUM_SIM_NODE" >/dev/null
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml" "${T_NODE}b"
LD_PRELOAD="$SHIM" GPUM_MEM_LIMIT=4GiB t_bg "$P" hold 1G "$T_SCRATCH/held.alone"
HOLDER=$T_LAST_PID
t_wait_file "$T_SCRATCH/held.alone" 30
LEFT=$(cd /dev/shm && ls -d "gpum-fence-p$HOLDER-"* 2>/dev/null | head -1)
[ -n "$LEFT" ] || t_fail "the shim made no region of its own"
kill -9 "$HOLDER"
wait "$HOLDER" 2>/dev/null || true
# (A gpumd of a test running beside this one may sweep it first: that is fine too.)
t_expect 0 env LD_PRELOAD="$SHIM" GPUM_MEM_LIMIT=4GiB "$P" try 3G
gone "$LEFT" || t_fail "$LEFT outlived its SIGKILLed job after the next one started"
t_ok "the shim alone, SIGKILLed: its region is removed by the next process that makes one"
