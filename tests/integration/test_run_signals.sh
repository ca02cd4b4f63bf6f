#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpum run forwards SIGTERM, SIGINT and SIGHUP to CMD and exits with CMD's status; when gpum
# run itself is SIGKILLed, gpumd releases the reservation (connection lease); Ctrl-C while
# queued cancels the queued reservation.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start
G="$GPUM_BIN"

no_reservations() {
  "$G" jobs --all --json >"$T_SCRATCH/j.json" &&
    t_pyjson "$T_SCRATCH/j.json" 'sys.exit(0 if d["reservations"] == [] else 1)'
}

# CMD (python, no child processes of its own) catches the signal, writes its name and exits
# with 55 (TERM), 42 (INT) or 41 (HUP).
CATCHER='import signal, sys
codes = {signal.SIGTERM: 55, signal.SIGINT: 42, signal.SIGHUP: 41}
def on(sig, frame):
    open(sys.argv[2], "w").write(signal.Signals(sig).name[3:])
    sys.exit(codes[sig])
for s in codes:
    signal.signal(s, on)
open(sys.argv[1], "w").write("ready")
while True:
    signal.pause()'
for sig in TERM INT HUP; do
  ready="$T_SCRATCH/ready.$sig" got="$T_SCRATCH/got.$sig"
  t_bg "$G" run --mem 1GiB -- python3 -c "$CATCHER" "$ready" "$got"
  pid=$T_LAST_PID
  t_wait_file "$ready" 20
  kill -s "$sig" "$pid"
  rc=0
  wait "$pid" || rc=$?
  [ "$(cat "$got" 2>/dev/null)" = "$sig" ] || t_fail "SIG$sig not forwarded to CMD"
  case $sig in TERM) want=55 ;; INT) want=42 ;; HUP) want=41 ;; esac
  [ $rc -eq $want ] || t_fail "SIG$sig: gpum run exited $rc, expected CMD's $want"
  t_until 10 no_reservations || t_fail "SIG$sig: reservation left"
  t_ok "SIG$sig forwarded; exit $rc; released"
done

# gpum run SIGKILLed: the daemon releases the reservation when the connection closes. CMD
# (sleep, which keeps the pid sh wrote) is then an orphan: the test kills it by its pid.
t_bg "$G" run --mem 1GiB -- sh -c 'echo $$ >"$1"; exec sleep 1000' sh "$T_SCRATCH/ready.kill"
pid=$T_LAST_PID
t_wait_file "$T_SCRATCH/ready.kill" 20
T_PIDS+=("$(cat "$T_SCRATCH/ready.kill")")
no_reservations && t_fail "no reservation while gpum run runs"
kill -KILL "$pid"
wait "$pid" 2>/dev/null || true
t_until 10 no_reservations || t_fail "reservation not released after gpum run was SIGKILLed"
kill -KILL "$(cat "$T_SCRATCH/ready.kill")" 2>/dev/null || true
t_ok "SIGKILL of gpum run: released by the connection lease"

# SIGTERM while queued cancels the queued reservation.
FIFO="$T_SCRATCH/go"
mkfifo "$FIFO"
t_bg "$G" run --mem 70GiB --gpus 2 -- sh -c 'echo started >"$1"; read -r x <"$2"' sh \
  "$T_SCRATCH/hold.started" "$FIFO"
HOLD=$T_LAST_PID
t_wait_file "$T_SCRATCH/hold.started" 20
t_bg "$G" run --mem 70GiB -- true 2>"$T_SCRATCH/q.err"
Q=$T_LAST_PID
t_until 20 grep -q "queued at position" "$T_SCRATCH/q.err" || t_fail "not queued"
kill -TERM "$Q"
rc=0
wait "$Q" || rc=$?
[ $rc -eq 143 ] || { cat "$T_SCRATCH/q.err" >&2; t_fail "queued gpum run: SIGTERM gave $rc, expected 143"; }
grep -q "cancelled" "$T_SCRATCH/q.err" || t_fail "no cancel message: $(cat "$T_SCRATCH/q.err")"
"$G" jobs --all --json >"$T_SCRATCH/j.json"
t_pyjson "$T_SCRATCH/j.json" 'sys.exit(0 if len(d["reservations"]) == 1 else 1)' ||
  t_fail "the queued reservation was not cancelled"
echo go >"$FIFO"
wait "$HOLD" || t_fail "holder failed"
t_until 10 no_reservations || t_fail "reservation left"
t_ok "SIGTERM while queued: cancelled, exit 143"
