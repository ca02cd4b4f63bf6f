#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpum top on a simulated two-GPU node. --once: without gpumd it shows both GPUs, the processes
# (a holder of 20 GiB on GPU 0, busy at 60 %: its GPU %, host memory and run time) and a line
# saying gpumd is not running; every line fits $COLUMNS. Then with gpumd, two reservations (one
# of 2.5 GiB, shown as 2.50 GiB), a job's workload figures (a time in _us shown in ms, a size in
# bytes in GiB) and an injected Xid, the live screen in a detached tmux session (send-keys,
# capture-pane): it shows both GPUs, the reservations and the alert; `s` changes the sort
# named in the processes' title and the keys' line; `u` filters by user; a process started on
# GPU 0 shows with its CPU %, host memory and run time, is selected with down, and `K`, Enter,
# `y` send it SIGTERM (it ends); `K`, `t`, `n` send nothing; and for a process that ended
# meanwhile the message says there is no such process; tab, down, `r` and
# `y` release the second reservation (gpumd lists it no more), and as another uid (nobody,
# when run as root) the release of root's is refused with gpumd's reason; a resize to 70x20
# redraws the frame at that size (no sparklines, short bars, every line within 70 columns,
# the keys on the last line); `q` leaves with status 0 and the terminal back on its normal
# screen; SIGTERM does the same. With --interval 60s (no refresh by the clock), a reservation
# made after the screen is up, its release and an Xid's alert appear on it as gpumd publishes
# them (the watch op); gpumd stopped shows at once as not running, and started again it is
# found and watched again (a new reservation appears). NO_COLOR: --once on a terminal writes no
# colour escapes with it and does without it.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"
ME=$(id -un) # the owner of the reservations this test makes

if ! command -v tmux >/dev/null; then
  echo "skip: tmux not found (scripts/deps.sh installs it); gpum top's screen is not tested"
  exit 77
fi
case "$(ldd "$GPUM_BIN")" in
*libtsan*)
  echo "skip: a ThreadSanitizer build: gpum top adds no threads; its frame and screen run in the normal and ASan builds"
  exit 77
  ;;
esac

export LANG=C.UTF-8 LC_ALL=C.UTF-8
unset COLUMNS LINES NO_COLOR
TM="gpumtop$$"
trap 'rc=$?; tmux -L "$TM" kill-server >/dev/null 2>&1 || true; (exit $rc); t_cleanup' EXIT

# check_width FILE COLS: every line of FILE is at most COLS characters.
check_width() {
  python3 -c "import sys
for n, l in enumerate(open(sys.argv[1], encoding='utf-8').read().split('\n'), 1):
    if len(l) > int(sys.argv[2]):
        sys.exit('line %d is %d wide: %r' % (n, len(l), l))" "$1" "$2"
}

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
HOLD=$("$GPUM_BIN" sim hold "$T_NODE" --device 0 --bytes 20GiB) || t_fail "sim hold"
"$GPUM_BIN" sim set "$T_NODE" --device 0 --util 60 >/dev/null || t_fail "sim set"

# ---- --once without gpumd ----
t_expect 0 "$GPUM_BIN" top --once
grep -q '^  0 NVIDIA H100' "$T_OUT" || t_fail "no GPU 0 line: $(cat "$T_OUT")"
grep -q '^  1 NVIDIA H100' "$T_OUT" || t_fail "no GPU 1 line: $(cat "$T_OUT")"
grep -q '^gpumd is not running' "$T_OUT" || t_fail "no line saying gpumd is not running"
grep -q 'gpum-sim-hold\|sim hold' "$T_OUT" || t_fail "the holding process is not listed"
grep -q '20.00 GiB' "$T_OUT" || t_fail "its memory is not shown"
grep -qE '^ +PID USER +GPU GPU%  CPU% +HOST MEM  GPU MEMORY +TIME  COMMAND' "$T_OUT" ||
  t_fail "the processes' columns: $(cat "$T_OUT")"
# GPU % from the driver (the only process: all of GPU 0's 60 %), CPU % not yet known (one
# read), host memory and GPU memory with their units, the run time.
grep -qE "^ +$HOLD +[^ ]+ +0  60% +- +[0-9.]+ [KMG]iB +20.00 GiB +[0-9]+(s|m[0-9]{2}s)  " "$T_OUT" ||
  t_fail "the holder's row: $(cat "$T_OUT")"
grep -q 'e+0[0-9]' "$T_OUT" && t_fail "a figure in %g: $(cat "$T_OUT")"
grep -q $'\033' "$T_OUT" && t_fail "escape codes in --once output to a pipe"
check_width "$T_OUT" 120 || t_fail "--once is wider than 120 columns"
COLUMNS=60 t_expect 0 "$GPUM_BIN" top --once
check_width "$T_OUT" 60 || t_fail "--once with COLUMNS=60 is wider"
t_expect 2 "$GPUM_BIN" top --sort size
grep -q 'expected memory, pid or user' "$T_ERR" || t_fail "bad --sort: $(cat "$T_ERR")"
t_ok "--once without gpumd: both GPUs, the process, 'gpumd is not running', within the width"

# ---- with gpumd: two reservations, an Xid ----
chmod 0755 "$T_SCRATCH" # another uid's gpum top reaches the socket (below)
gd_start --socket-mode 0666
"$GPUM_BIN" reserve --mem 8GiB --label first --ttl 10m >"$T_SCRATCH/r1" 2>/dev/null || t_fail "reserve"
"$GPUM_BIN" reserve --mem 2.5GiB --label second --ttl 10m >"$T_SCRATCH/r2" 2>/dev/null || t_fail "reserve"
R1=$(cat "$T_SCRATCH/r1")
R2=$(cat "$T_SCRATCH/r2")
"$GPUM_BIN" sim inject "$T_NODE" --device 1 --xid 31 >/dev/null || t_fail "sim inject"
t_until 20 sh -c "'$GPUM_BIN' alerts | grep -q 'Xid 31'" || t_fail "gpumd raised no Xid alert"
t_expect 0 "$GPUM_BIN" top --once
grep -q "^gpumd: running at .*: 2 granted, 0 queued" "$T_OUT" || t_fail "gpumd line: $(cat "$T_OUT")"
grep -qE "^  $R1 +$ME +GRANTED .*first$" "$T_OUT" || t_fail "no $R1 row: $(cat "$T_OUT")"
grep -q 'Xid 31' "$T_OUT" || t_fail "no alert in --once: $(cat "$T_OUT")"
grep -qE "^  $R2 +$ME +GRANTED +0 +2.50 GiB " "$T_OUT" || t_fail "2.5 GiB is not 2.50 GiB: $(cat "$T_OUT")"
# A job's figures on r1, reported by a client that lives until its stdin (a fifo) closes.
mkfifo "$T_SCRATCH/rep.in"
(gd_py '
c = Client()
c.ok("report", reservation=args[0], source="infer",
     figures={"e2e_p99_us": 11400, "allocated_bytes": 2684354560, "completed": 100})
print("ready", flush=True)
sys.stdin.read()
' "$R1" <"$T_SCRATCH/rep.in" >"$T_SCRATCH/rep.out") &
REP=$!
T_PIDS+=("$REP")
exec 8>"$T_SCRATCH/rep.in"
t_until 20 grep -q '^ready$' "$T_SCRATCH/rep.out" || t_fail "the report was not made"
t_expect 0 "$GPUM_BIN" top --once
grep -qE "^      infer \(pid [0-9]+\):.* e2e_p99 11.4 ms" "$T_OUT" ||
  t_fail "the figure in _us is not in ms: $(cat "$T_OUT")"
grep -qE "^      infer \(pid [0-9]+\):.* allocated 2.50 GiB" "$T_OUT" ||
  t_fail "the figure in bytes is not in GiB: $(cat "$T_OUT")"
exec 8>&-
wait "$REP" || t_fail "the reporting client failed"
t_ok "--once with gpumd: the reservations and the alert; sizes and figures with their units"

# ---- the live screen ----
tmux -L "$TM" -f /dev/null new-session -d -s top -x 160 -y 50 \
  "'$GPUM_BIN' top --interval 0.2; echo top-exit=\$?; sleep 600" || t_fail "tmux new-session"

SCREEN=$T_SCRATCH/screen
# screen_has WINDOW PATTERN [SECONDS]: waits until the window shows a line matching PATTERN
# (grep -E); fails the test with the screen when it does not within SECONDS (10).
screen_has() {
  local w=$1 pat=$2 end=$((SECONDS + ${3:-10}))
  while :; do
    tmux -L "$TM" capture-pane -p -t "$w" >"$SCREEN" 2>/dev/null && grep -qE -- "$pat" "$SCREEN" && return 0
    if [ $SECONDS -ge "$end" ]; then
      cat "$SCREEN" >&2
      t_fail "the screen of $w does not show /$pat/"
    fi
    sleep 0.05
  done
}

screen_has top '^  0 NVIDIA H100'
screen_has top '^  1 NVIDIA H100'
screen_has top "^  $R1 +$ME +GRANTED .*first"
screen_has top "^  $R2 +$ME +GRANTED .*second"
screen_has top 'ERROR +GPU 1 +active +GPU 1: Xid 31'
screen_has top '^gpumd: running'
t_ok "the screen shows both GPUs, the reservations and the alert"

screen_has top 'PROCESSES \(1\)  sort: memory'
tmux -L "$TM" send-keys -t top s
screen_has top 'PROCESSES \(1\)  sort: pid'
screen_has top '^q quit  tab panel  s sort: pid'
tmux -L "$TM" send-keys -t top s
screen_has top 'sort: user'
t_ok "s changes the sort shown in the processes' title and the keys' line"

tmux -L "$TM" send-keys -t top u
screen_has top '^user \(empty: everyone\):'
tmux -L "$TM" send-keys -t top nobody Enter
screen_has top 'PROCESSES \(0\)  sort: user  user: nobody'
screen_has top 'RESERVATIONS \(0\)  user: nobody'
tmux -L "$TM" send-keys -t top u Enter
screen_has top 'PROCESSES \(1\)  sort: user  user: all'
screen_has top 'RESERVATIONS \(2\)  user: all'
t_ok "u filters the processes and reservations by user; an empty answer shows everyone"

# A process of ours on GPU 0, below the holder (sorted by user, then memory): its row has a
# CPU % once two refreshes have read it, its host memory and run time; down selects it.
C="$GPUM_TEST_PROGS/sim_client"
t_bg "$C" cu-init cu-ctx 0 cu-alloc 1GiB ready "$T_SCRATCH/c1" block
C1=$T_LAST_PID
t_wait_file "$T_SCRATCH/c1"
screen_has top 'PROCESSES \(2\)'
screen_has top "^. +$C1 +$ME +0 +[0-9]+% +[0-9.]+% +[0-9.]+ [KMG]iB +[0-9.]+ GiB +[0-9]+(s|m[0-9]{2}s)  .*sim_client"
tmux -L "$TM" send-keys -t top Down
screen_has top "^> +$C1 "
tmux -L "$TM" send-keys -t top K
screen_has top "^signal $C1 \(.*sim_client.*\): t or Enter TERM, k KILL, i INT"
tmux -L "$TM" send-keys -t top Enter
screen_has top "^send SIGTERM to $C1 \(.*\)\? y/n"
tmux -L "$TM" send-keys -t top y
screen_has top "^SIGTERM sent to $C1\$"
# Ended: a zombie until reaped here, or gone.
t_until 20 sh -c "! test -e /proc/$C1/stat || awk '{print \$3}' /proc/$C1/stat | grep -q Z" ||
  t_fail "$C1 did not end on SIGTERM"
rc=0
wait "$C1" || rc=$?
[ "$rc" -eq 143 ] || t_fail "$C1 ended with $rc, not by SIGTERM (143)"
t_ok "a process's row has its CPU %, host memory and run time; down, K, Enter, y send it SIGTERM"
t_until 20 sh -c "! tmux -L '$TM' capture-pane -p -t top | grep -qE '^. +$C1 '" ||
  t_fail "$C1 stays listed after it ended"

t_bg "$C" cu-init cu-ctx 0 cu-alloc 1GiB ready "$T_SCRATCH/c2" block
C2=$T_LAST_PID
t_wait_file "$T_SCRATCH/c2"
screen_has top "^. +$C2 "
tmux -L "$TM" send-keys -t top Down
screen_has top "^> +$C2 "
tmux -L "$TM" send-keys -t top K
screen_has top "^signal $C2 "
tmux -L "$TM" send-keys -t top t
screen_has top "^send SIGTERM to $C2 .*\? y/n"
tmux -L "$TM" send-keys -t top n
screen_has top "^no signal sent to $C2\$"
kill -0 "$C2" || t_fail "$C2 was signalled without a y"
tmux -L "$TM" send-keys -t top K
screen_has top "^signal $C2 "
tmux -L "$TM" send-keys -t top k
screen_has top "^send SIGKILL to $C2 .*\? y/n"
kill -9 "$C2" # it ends while the question is asked
wait "$C2" 2>/dev/null || true
tmux -L "$TM" send-keys -t top y
screen_has top "^$C2: no such process \(it has ended; ESRCH\)\$"
t_ok "K, t, n send nothing; a process that ended meanwhile is said to be gone (ESRCH)"

tmux -L "$TM" send-keys -t top Tab
screen_has top '^\* RESERVATIONS \(2\)'
screen_has top "^> $R1 "
tmux -L "$TM" send-keys -t top Down
screen_has top "^> $R2 "
tmux -L "$TM" send-keys -t top r
screen_has top "^release $R2\? y/n"
tmux -L "$TM" send-keys -t top y
screen_has top "^$R2 RELEASED"
screen_has top "RESERVATIONS \(1\)"
"$GPUM_BIN" jobs --all >"$T_OUT" || t_fail "gpum jobs"
grep -q "^$R1 " "$T_OUT" || t_fail "$R1 went too: $(cat "$T_OUT")"
# Not among the live ones (it is under ENDED, with why).
sed '/^ENDED/,$d' "$T_OUT" | grep -q "^$R2 " && t_fail "$R2 is still listed: $(cat "$T_OUT")"
grep -q "^$R2 .*RELEASED" "$T_OUT" || t_fail "$R2 is not under ENDED: $(cat "$T_OUT")"
t_ok "tab, down, r, y release the selected reservation"

# Someone else's reservation: as another uid, the release is refused and said so.
if [ "$(id -u)" -eq 0 ] && command -v runuser >/dev/null; then
  tmux -L "$TM" new-window -d -t top: -n other \
    "runuser -u nobody -- '$GPUM_BIN' top --interval 0.2; echo other-exit=\$?; sleep 600"
  screen_has top:other "^  $R1 +$ME +GRANTED"
  tmux -L "$TM" send-keys -t top:other Tab
  screen_has top:other "^> $R1 "
  tmux -L "$TM" send-keys -t top:other r
  screen_has top:other "^release $R1\? y/n"
  tmux -L "$TM" send-keys -t top:other y
  screen_has top:other "^release $R1: .*belongs to uid 0"
  "$GPUM_BIN" jobs --all >"$T_OUT" || t_fail "gpum jobs"
  grep -q "^$R1 .*GRANTED" "$T_OUT" || t_fail "$R1 was released by another uid: $(cat "$T_OUT")"
  tmux -L "$TM" send-keys -t top:other q
  screen_has top:other '^other-exit=0$'
  t_ok "releasing another uid's reservation is refused, with the daemon's reason"
else
  echo "note: not root (or no runuser): the refused release by another uid is not tested"
fi

tmux -L "$TM" resize-window -t top -x 70 -y 20
screen_has top 'MEM\[.{4}\] '
tmux -L "$TM" capture-pane -p -t top >"$SCREEN"
check_width "$SCREEN" 70 || t_fail "a line is wider than the resized screen"
[ "$(wc -l <"$SCREEN")" -eq 20 ] || t_fail "the capture is not 20 lines"
tail -n 1 "$SCREEN" | grep -q '^q quit' || { cat "$SCREEN" >&2; t_fail "the keys are not on the last line"; }
grep -q 'OVER TIME' "$SCREEN" && t_fail "sparklines at 70 columns"
t_ok "a resize to 70x20 redraws the frame at that size"

tmux -L "$TM" send-keys -t top q
screen_has top '^top-exit=0$'
grep -q 'q quit' "$SCREEN" && { cat "$SCREEN" >&2; t_fail "the frame stayed on the terminal after q"; }
t_ok "q leaves with status 0 and the terminal on its normal screen"

tmux -L "$TM" new-window -d -t top: -n term \
  "sh -c 'echo \$\$ >\"$T_SCRATCH/sh.pid\"; \"$GPUM_BIN\" top --interval 0.2; echo top-exit=\$?; sleep 600'"
screen_has top:term '^q quit'
TOP_PID=$(pgrep -P "$(cat "$T_SCRATCH/sh.pid")") || t_fail "no gpum top under the pane's shell"
kill -TERM "$TOP_PID"
screen_has top:term '^top-exit=[0-9]+$'
grep -q '^top-exit=0$' "$SCREEN" || t_fail "gpum top did not end with status 0 on SIGTERM: $(grep top-exit "$SCREEN")"
grep -q 'q quit' "$SCREEN" && { cat "$SCREEN" >&2; t_fail "the frame stayed on the terminal after SIGTERM"; }
t_ok "SIGTERM leaves with status 0 and the terminal restored"

# gpumd's events: with --interval 60s nothing is read again by the clock during this part, so
# what shows up, shows up because gpumd said something changed (the watch op).
tmux -L "$TM" new-window -d -t top: -n live "'$GPUM_BIN' top --interval 60s; echo live-exit=\$?; sleep 600"
screen_has top:live "^  $R1 +$ME +GRANTED .*first"
"$GPUM_BIN" reserve --mem 2GiB --label live --ttl 10m >"$T_SCRATCH/r3" 2>/dev/null || t_fail "reserve"
R3=$(cat "$T_SCRATCH/r3")
screen_has top:live "^  $R3 +$ME +GRANTED .*live"
"$GPUM_BIN" release "$R3" >/dev/null || t_fail "release $R3"
t_until 20 sh -c "! tmux -L '$TM' capture-pane -p -t top:live | grep -q '^  $R3 '" ||
  t_fail "$R3 stays on the screen after its release"
"$GPUM_BIN" sim inject "$T_NODE" --device 0 --xid 13 >/dev/null || t_fail "sim inject"
screen_has top:live 'ERROR +GPU 0 +active +GPU 0: Xid 13'
t_ok "with --interval 60s, a reservation, its release and an Xid's alert show as gpumd publishes them"

gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC (gpum top watching): $(cat "$GD_ERR")"
screen_has top:live '^gpumd is not running'
gd_start --socket-mode 0666
screen_has top:live '^gpumd: running'
"$GPUM_BIN" reserve --mem 3GiB --label again --ttl 10m >"$T_SCRATCH/r4" 2>/dev/null || t_fail "reserve"
R4=$(cat "$T_SCRATCH/r4")
screen_has top:live "^  $R4 +$ME +GRANTED .*again"
tmux -L "$TM" send-keys -t top:live q
screen_has top:live '^live-exit=0$'
t_ok "gpumd stopping shows at once; started again, it is found and watched again"

# NO_COLOR: --once on a terminal (the pane) with and without it; capture-pane -e keeps the SGR.
for nc in 0 1; do
  env=""
  [ $nc = 1 ] && env="NO_COLOR=1"
  tmux -L "$TM" new-window -d -t top: -n "once$nc" \
    "env $env '$GPUM_BIN' top --once; echo once-exit=\$?; sleep 600"
  screen_has "top:once$nc" '^once-exit=0$'
  tmux -L "$TM" capture-pane -e -p -t "top:once$nc" >"$SCREEN"
  if [ $nc = 1 ]; then
    grep -q $'\033\\[[0-9;]*m' "$SCREEN" && t_fail "colour escapes with NO_COLOR: $(cat -v "$SCREEN")"
  else
    grep -q $'\033\\[[0-9;]*3[1-6]m' "$SCREEN" || t_fail "no colours on a terminal: $(cat -v "$SCREEN")"
  fi
done
t_ok "--once on a terminal is coloured, and not with NO_COLOR"
