#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# lease.grace is reloaded on SIGHUP while a grace period runs: after a gpumd restart, a
# connection-bound reservation whose owner lives but does not re-attach waits lease.grace;
# shortening lease.grace (60 s -> 500 ms) with SIGHUP ends the wait at once (RELEASED with the
# grace reason); lengthening it (3 s -> 60 s) keeps the reservation past the old end.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
cfg="$T_SCRATCH/gpum.yaml"
set_grace() { printf 'lease:\n  grace: %s\nlog:\n  level: info\n' "$1" >"$cfg"; }
# reloads N: waits until gpumd has logged N reloads.
reloaded() { [ "$(grep -c 'configuration reloaded' "$GD_ERR")" -ge "$1" ]; }
reloads() { t_until 10 reloaded "$1"; }

# holder NAME: a client that reserves 1 GiB (connection lease), writes the id to
# $T_SCRATCH/NAME and stays alive without ever re-attaching.
holder() {
  local f
  f=$(gd_pyfile "$1" '
c = Client()
r = c.ok("reserve", bytes_per_gpu="1GiB")["reservation"]
open(args[0] + ".tmp", "w").write(r["id"])
os.rename(args[0] + ".tmp", args[0])
time.sleep(600)')
  t_bg python3 "$f" "$T_SCRATCH/$1"
  t_wait_file "$T_SCRATCH/$1" 20
}

set_grace 60s
gd_start --config "$cfg"
holder h1
ID1=$(cat "$T_SCRATCH/h1")
gd_stop KILL
gd_start --config "$cfg"
grep -q "1 reservations wait up to 60000 ms" "$GD_ERR" || t_fail "no grace period after restart"
set_grace 500ms
kill -HUP "$GD_PID"
reloads 1 || { grep -v "backend selected" "$GD_ERR" >&2; t_fail "no reload"; }
gd_py '
c, deadline = Client(), time.monotonic() + 10
while c.ok("list", all=True)["reservations"]:
    assert time.monotonic() < deadline, "the shortened grace did not end the wait"
    time.sleep(0.05)
msg = c.err("release", "ENOENT", reservation=args[0])
assert "RELEASED" in msg and "did not re-attach within lease.grace" in msg, msg
' "$ID1" || t_fail "shortened grace"
t_ok "SIGHUP shortening lease.grace ends a running grace period"

# The old grace is long enough (8 s) for the reload to land inside it even on a loaded
# machine under sanitizers; the check then waits until the old end has surely passed.
set_grace 8s
kill -HUP "$GD_PID"
reloads 2 || t_fail "no second reload"
holder h2
ID2=$(cat "$T_SCRATCH/h2")
gd_stop KILL
gd_start --config "$cfg"
RESTARTED=$(date +%s.%N) # after the restart: old end <= RESTARTED + 8
set_grace 60s
kill -HUP "$GD_PID"
reloads 3 || t_fail "no reload after the second restart"
gd_py '
c = Client()
old_end = float(args[1]) + 8.0
assert time.time() < old_end - 1.0, "setup too slow: the reload came near the old grace end"
time.sleep(old_end + 0.5 - time.time())  # the time passing is what is tested
r = c.ok("list", all=True)["reservations"]
assert [x["id"] for x in r] == [args[0]] and r[0]["state"] == "GRANTED", r
' "$ID2" "$RESTARTED" || t_fail "lengthened grace"
t_ok "SIGHUP lengthening lease.grace keeps the reservation past the old end"
gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exit $GD_RC"
