#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpumd is SIGKILLed and restarted while `gpum reserve` holds a reservation: gpum reserve
# reconnects and re-attaches it with its token; it stays GRANTED (same id) after lease.grace
# has passed, since it is attached again; SIGINT to gpum reserve then releases it. SIGINT
# while gpumd is away, and gpumd not back within lease.grace, end gpum reserve with exit 1.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
export GPUM_LEASE_GRACE=3s
gd_start
G="$GPUM_BIN"

t_bg "$G" reserve --mem 10GiB --label holder >"$T_SCRATCH/res.out" 2>"$T_SCRATCH/res.err"
RES=$T_LAST_PID
t_until 20 grep -q "holding" "$T_SCRATCH/res.err" ||
  { cat "$T_SCRATCH/res.err" >&2; t_fail "gpum reserve did not get its reservation"; }
ID=$(cat "$T_SCRATCH/res.out")
[ "$ID" = "r-1" ] || t_fail "unexpected id '$ID'"

gd_stop KILL
gd_start
t_until 20 grep -q "re-attached" "$T_SCRATCH/res.err" ||
  { cat "$T_SCRATCH/res.err" "$GD_ERR" >&2; t_fail "gpum reserve did not re-attach"; }
# Past lease.grace (3 s from the restart: the time passing is what is tested), an attached
# reservation is still GRANTED; one that was not re-attached would be RELEASED by now.
gd_py '
c = Client()
deadline = time.monotonic() + 4.0
while time.monotonic() < deadline:
    r = c.ok("list")["reservations"]
    assert [x["id"] for x in r] == [args[0]] and r[0]["state"] == "GRANTED", r
    time.sleep(0.2)
' "$ID" || { cat "$T_SCRATCH/res.err" "$GD_ERR" >&2; t_fail "$ID not kept after the grace"; }
t_ok "gpum reserve re-attached $ID after gpumd was killed and restarted"

kill -INT "$RES"
rc=0
wait "$RES" || rc=$?
[ $rc -eq 0 ] || { cat "$T_SCRATCH/res.err" >&2; t_fail "gpum reserve exited $rc after SIGINT"; }
grep -q "$ID released" "$T_SCRATCH/res.err" || t_fail "gpum reserve did not say it released"
gd_py '
c = Client()
assert c.ok("list", all=True)["reservations"] == []
assert "RELEASED" in c.err("release", "ENOENT", reservation=args[0])
' "$ID" || t_fail "$ID not released after SIGINT"
t_ok "released on SIGINT after the re-attach"

# SIGINT while gpumd is away: gpum reserve cannot release; it says so and exits 1.
t_bg "$G" reserve --mem 1GiB >"$T_SCRATCH/res3.out" 2>"$T_SCRATCH/res3.err"
RES=$T_LAST_PID
t_until 20 grep -q "holding" "$T_SCRATCH/res3.err" || t_fail "third gpum reserve"
gd_stop KILL
t_until 20 grep -q "lost the connection" "$T_SCRATCH/res3.err" || t_fail "loss not noticed"
kill -INT "$RES"
rc=0
wait "$RES" || rc=$?
[ $rc -eq 1 ] && grep -q "interrupted while gpumd is away" "$T_SCRATCH/res3.err" ||
  { cat "$T_SCRATCH/res3.err" >&2; t_fail "SIGINT while gpumd is away: exit $rc"; }
t_ok "SIGINT while gpumd is away: exit 1 with the reason"
gd_start

# gpumd does not come back within lease.grace: gpum reserve gives up with exit 1.
t_bg "$G" reserve --mem 1GiB >"$T_SCRATCH/res2.out" 2>"$T_SCRATCH/res2.err"
RES=$T_LAST_PID
t_until 20 grep -q "holding" "$T_SCRATCH/res2.err" || t_fail "second gpum reserve"
gd_stop KILL
rc=0
wait "$RES" || rc=$?
[ $rc -eq 1 ] || t_fail "gpum reserve exited $rc when gpumd stayed away"
grep -q "did not come back within 3000 ms" "$T_SCRATCH/res2.err" ||
  { cat "$T_SCRATCH/res2.err" >&2; t_fail "no reason given"; }
t_ok "gpum reserve gives up when gpumd stays away past lease.grace"
