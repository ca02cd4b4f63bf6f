#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# No local user can stop another user's gpum run --enforce from starting by creating its fence
# region first: a victim (uid 65534) runs gpumd and gpum run --enforce while an attacker (uid
# 65533) has created, before it, every name the region could have had when names were derived
# from the socket and the next id, and names of the new shape with guessed endings. The
# victim's runs start fenced; its region is its own, mode 0600, which the attacker cannot
# open; gpumd reads the victim's region only, and the attacker's files are left as they are.
# Needs root, to act as two users (skipped otherwise).
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"

if [ "$(id -u)" -ne 0 ] || ! command -v setpriv >/dev/null; then
  echo "skip: needs root and setpriv to act as two users"
  exit 77
fi
VICTIM=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
ATTACKER=(setpriv --reuid=65533 --regid=65533 --clear-groups --)
chmod 0711 "$T_SCRATCH"
mkdir -m 0700 "$T_SCRATCH/v"
chown 65534:65534 "$T_SCRATCH/v"
export GPUM_SOCKET="$T_SCRATCH/v/gpumd.sock" GPUM_STATE_DIR="$T_SCRATCH/v/state"
export GPUM_HTTP_LISTEN=off HOME="$T_SCRATCH/v" XDG_RUNTIME_DIR="$T_SCRATCH/v"
G=$GPUM_BIN
P=$GPUM_TEST_PROGS/enforce_probe
RT=$(ldd "$G" | awk '/lib(asan|tsan)\.so/ {print $3; exit}')

# The victim's node and gpumd.
"${VICTIM[@]}" "$G" sim start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml" --name "$T_NODE" >/dev/null ||
  t_fail "sim start as the victim"
T_NODES+=("$T_NODE")
export GPUM_SIM_NODE="$T_NODE"
"${VICTIM[@]}" "$GPUM_BUILD_DIR/bin/gpumd" >"$T_SCRATCH/gpumd.out" 2>"$T_SCRATCH/gpumd.err" &
GD_PID=$!
T_PIDS+=("$GD_PID")
t_until 20 grep -q '^gpumd ready' "$T_SCRATCH/gpumd.out" || { cat "$T_SCRATCH/gpumd.err"; t_fail "gpumd"; }

# The attacker squats: the names of ids 1 to 20 as they were derived (FNV-1a of the socket,
# the id), and new-shaped names with guessed endings.
python3 - "$GPUM_SOCKET" >"$T_SCRATCH/squat" <<'PY'
import sys
h = 0xcbf29ce484222325
for c in sys.argv[1].encode():
    h = ((h ^ c) * 0x100000001b3) & 0xffffffffffffffff
for i in range(1, 21):
    print("gpum-fence-%016x-%d" % (h, i))
    print("gpum-fence-%012x-%d-%016x" % (h & 0xffffffffffff, i, 0))
    print("gpum-fence-%012x-%d-%016x" % (h & 0xffffffffffff, i, i))
PY
while read -r n; do
  "${ATTACKER[@]}" sh -c "umask 077; echo x >/dev/shm/$n" || t_fail "the attacker could not squat $n"
done <"$T_SCRATCH/squat"
SQUATTED=$(wc -l <"$T_SCRATCH/squat")

run_as_victim() { "${VICTIM[@]}" env ${RT:+LD_PRELOAD=$RT} "$G" run "$@"; }

# The victim's runs start, fenced at their reservation.
t_expect 0 run_as_victim --mem 2GiB --enforce -q -- "$P" try 1G
t_expect 3 run_as_victim --mem 2GiB --enforce -q -- "$P" try 3G
t_ok "gpum run --enforce starts, fenced, whatever names another user created first"

# While a job holds 1 GiB: its region is the victim's, 0600, closed to the attacker; gpumd
# shows what the victim's job holds.
: >"$T_SCRATCH/held"
chown 65534 "$T_SCRATCH/held" # the victim's job writes it when it holds its memory
t_bg "${VICTIM[@]}" env ${RT:+LD_PRELOAD=$RT} "$G" run --mem 2GiB --enforce -q --label held -- \
  "$P" hold 1G "$T_SCRATCH/held"
RUNPID=$T_LAST_PID
t_wait_file "$T_SCRATCH/held" 30
CMD=$(pgrep -P "$RUNPID" | head -1)
[ -n "$CMD" ] || t_fail "no CMD"
FENCE=$(tr '\0' '\n' <"/proc/$CMD/environ" | sed -n 's/^GPUM_FENCE=//p')
[ -n "$FENCE" ] || t_fail "CMD runs without GPUM_FENCE"
grep -qx "$FENCE" "$T_SCRATCH/squat" && t_fail "the job runs in a squatted region $FENCE"
[ "$(stat -c '%u %a' "/dev/shm/$FENCE")" = "65534 600" ] ||
  t_fail "the region is $(stat -c '%u %a' "/dev/shm/$FENCE"), not the victim's 0600"
"${ATTACKER[@]}" cat "/dev/shm/$FENCE" >/dev/null 2>&1 && t_fail "the attacker can read the region"
"${VICTIM[@]}" "$G" jobs --json >"$T_OUT" || t_fail "gpum jobs"
t_pyjson "$T_OUT" 'rs = [r for r in (d["reservations"] if isinstance(d, dict) else d) if r["label"] == "held"]
assert rs and rs[0]["fenced"] and rs[0]["fenced"]["used"] == 1 << 30, rs' || t_fail "gpumd does not show the victim's fence"
kill -TERM "$RUNPID"
wait "$RUNPID" 2>/dev/null || true
t_until 20 test ! -e "/dev/shm/$FENCE" || t_fail "$FENCE outlived its job"
t_ok "the region is the victim's, 0600, unreadable to the attacker; gpumd reads that one"

# The attacker's files are left as they were: gpumd neither used nor removed them.
left=0
while read -r n; do [ -e "/dev/shm/$n" ] && left=$((left + 1)); done <"$T_SCRATCH/squat"
while read -r n; do rm -f "/dev/shm/$n"; done <"$T_SCRATCH/squat"
[ "$left" -eq "$SQUATTED" ] || t_fail "$((SQUATTED - left)) of the attacker's files were removed"
t_ok "the attacker's files are left alone"
kill -TERM "$GD_PID"
wait "$GD_PID" || t_fail "gpumd exited $?"
