#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Connection-bound reservations recovered after a gpumd crash wait lease.grace for their owner
# to re-attach, but no longer than their owner lives: a reservation whose owner (pid + start
# time) exited while gpumd was down is released at the restart, and one whose owner exits
# during the grace without re-attaching (as a client does whose reply the crash lost: it has no
# token) is released when it exits, with a reason saying so in the audit trail, not held for
# the whole lease.grace (10 minutes here). One re-attached by another process of its owner's
# stays when the process that made it exits.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
S=$T_SCRATCH
gd_start --lease-grace 10m

# An owner: reserves, writes the reservation to $S/NAME, exits once $S/NAME.exit exists.
owner=$(gd_pyfile owner '
S, name = args
c = Client()
r = c.ok("reserve", bytes_per_gpu="20GiB", label=name)["reservation"]
r["pid"] = os.getpid()
open("%s/%s.tmp" % (S, name), "w").write(json.dumps(r))
os.rename("%s/%s.tmp" % (S, name), "%s/%s" % (S, name))
while not os.path.exists("%s/%s.exit" % (S, name)):
    time.sleep(0.01)
')
declare -A PID
for name in early late handed; do
  t_bg python3 "$owner" "$S" "$name"
  PID[$name]=$T_LAST_PID
  t_wait_file "$S/$name" 20
done

kill -9 "$GD_PID"
wait "$GD_PID" 2>/dev/null || true
echo x >"$S/early.exit"
wait "${PID[early]}" || t_fail "owner 'early' failed"
gd_start --lease-grace 10m

holder=$(gd_pyfile holder '
S = args[0]
r = {n: json.load(open("%s/%s" % (S, n))) for n in ("early", "late", "handed")}
c = Client()
live = {x["id"]: x for x in c.ok("list", all=True)["reservations"]}
assert r["early"]["id"] not in live, live
why = c.err("release", "ENOENT", reservation=r["early"]["id"])
assert "owner pid %d exited while gpumd was down" % r["early"]["pid"] in why, why
assert live[r["late"]["id"]]["state"] == "GRANTED", live
a = c.ok("attach", reservation=r["handed"]["id"], token=r["handed"]["token"])["reservation"]
assert a["state"] == "GRANTED", a
open(S + "/attached", "w").write("x")
while not os.path.exists(S + "/done"):  # holds the re-attached reservation until then
    time.sleep(0.01)
')
t_bg python3 "$holder" "$S"
holder=$T_LAST_PID
t_wait_file "$S/attached" 20
t_ok "at the restart: the owner gone while gpumd was down is released, the live ones wait"

echo x >"$S/late.exit"
echo x >"$S/handed.exit"
wait "${PID[late]}" || t_fail "owner 'late' failed"
wait "${PID[handed]}" || t_fail "owner 'handed' failed"
gd_py '
S = args[0]
late = json.load(open(S + "/late"))
handed = json.load(open(S + "/handed"))
c = Client()
deadline = time.monotonic() + 30  # lease.grace is 10 minutes
while any(x["id"] == late["id"] for x in c.ok("list", all=True)["reservations"]):
    assert time.monotonic() < deadline, "%s still held after its owner exited" % late["id"]
    time.sleep(0.02)
why = c.err("release", "ENOENT", reservation=late["id"])
assert "owner pid %d exited before re-attaching" % late["pid"] in why, why
# Both owners had exited before the first list: gpumd saw both exits before it answered it.
live = {x["id"]: x for x in c.ok("list", all=True)["reservations"]}
assert list(live) == [handed["id"]] and live[handed["id"]]["state"] == "GRANTED", live
st = c.ok("status")
assert sum(d["reserved"] for d in st["devices"]) == 20 * 2**30, st["devices"]
' "$S" || t_fail "after the owners exited"
t_ok "an owner exiting during lease.grace releases its reservation at once; a re-attached one stays"

echo x >"$S/done"
wait "$holder" || t_fail "the holder failed"
gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "exit $GD_RC"
python3 -c 'import json, sqlite3, sys
late = json.load(open(sys.argv[2] + "/late"))
db = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
rows = db.execute("SELECT from_state, to_state, reason FROM audit WHERE reservation = ? "
                  "ORDER BY id", (int(late["id"][2:]),)).fetchall()
last = rows[-1]
assert last[0] == "GRANTED" and last[1] == "RELEASED", rows
assert "owner pid %d exited before re-attaching" % late["pid"] in last[2], rows' \
  "$GPUM_STATE_DIR/ledger.db" "$S" || t_fail "audit trail"
t_ok "the release is in the audit trail with its reason"
