#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A ledger commit that fails (here a trigger added from outside aborts the insert of a
# reservation labelled "boom", as a full disk or an I/O error would) stops gpumd with status 1
# and "ledger commit failed" in its log, and nothing of the failed batch reaches a client: the
# two requests of the batch (pipelined in one write, so they share a turn) get no reply, only
# the connection's end. After a restart the ledger holds what was committed before and
# nothing of the failed batch. Second case: an outside write lock held past the ledger's
# busy timeout (2 s) makes the writer's batch fail while the loop goes on staging later
# requests (another client's): neither the failed batch nor what came after it is answered
# or stored.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start

gd_py '
c = Client()
r = c.ok("reserve", bytes_per_gpu="1GiB", lease="ttl", ttl_ms=600000)["reservation"]
assert r["id"] == "r-1" and r["state"] == "GRANTED", r
' || t_fail "first reservation"

python3 - "$GPUM_STATE_DIR/ledger.db" <<'PY' || t_fail "cannot add the trigger"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], timeout=10)
db.execute("CREATE TRIGGER boom BEFORE INSERT ON reservations WHEN NEW.label = 'boom' "
           "BEGIN SELECT RAISE(ABORT, 'boom: refused by the test'); END")
db.commit()
PY

gd_py '
c = Client()
c.send_raw(b"{\"id\": 1, \"op\": \"reserve\", \"bytes_per_gpu\": 1, \"label\": \"fine\"}\n"
           b"{\"id\": 2, \"op\": \"reserve\", \"bytes_per_gpu\": 1, \"label\": \"boom\"}\n")
m = c.read_msg()
assert m is None, "a reply of a failed batch reached the client: %r" % (m,)
' || t_fail "replies of the failed batch"
# t_wait_exit: waits (up to 20 s) for gpumd to stop on its own; GD_RC gets its status.
t_wait_exit() {
  local i=0
  while kill -0 "$GD_PID" 2>/dev/null; do
    i=$((i + 1))
    [ $i -gt 2000 ] && t_fail "gpumd did not stop after the failed commit"
    sleep 0.01
  done
  GD_RC=0
  wait "$GD_PID" || GD_RC=$?
}
t_wait_exit
[ "$GD_RC" -eq 1 ] || t_fail "gpumd exited $GD_RC after a failed commit (want 1)"
grep -q "ledger commit failed: .*boom: refused by the test" "$GD_ERR" ||
  { cat "$GD_ERR" >&2; t_fail "no 'ledger commit failed' with SQLite's reason in the log"; }
t_ok "a failed commit stops gpumd with status 1 and answers nothing of its batch"

python3 - "$GPUM_STATE_DIR/ledger.db" <<'PY' || t_fail "cannot drop the trigger"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], timeout=10)
db.execute("DROP TRIGGER boom")
db.commit()
PY
gd_start
gd_py '
c = Client()
rs = c.ok("list", all=True)["reservations"]
assert [(r["id"], r["state"]) for r in rs] == [("r-1", "GRANTED")], rs
assert all(r["label"] not in ("fine", "boom") for r in rs), rs
' || t_fail "ledger after the restart"
t_ok "after a restart the ledger has what was committed and nothing of the failed batch"

# Case 2: the writer cannot get the write lock. The lock goes once gpumd has logged the
# failure, so that anything gpumd still tried to commit afterwards would succeed (and, with
# it, the replies held for the failed batch would go out).
gd_py '
import sqlite3
failures = lambda: open(args[0]).read().count("ledger commit failed")
before = failures()
db = sqlite3.connect(os.environ["GPUM_STATE_DIR"] + "/ledger.db", isolation_level=None)
db.execute("BEGIN IMMEDIATE")
a, b = Client(), Client()
a.send_raw(b"{\"id\": 1, \"op\": \"reserve\", \"bytes_per_gpu\": 1, \"label\": \"a\"}\n")
# The turn of a is with the writer once the writer thread sleeps in the busy handler of
# SQLite: the request of b then comes in a later turn, staged while the writer waits.
import platform
sleeps = {"x86_64": ("35", "230"), "aarch64": ("101", "115")}[platform.machine()]
task = "/proc/%s/task" % args[1]
writer = [t for t in os.listdir(task)
          if open("%s/%s/comm" % (task, t)).read().strip() == "gpumd-writer"][0]
deadline = time.monotonic() + 20
while open("%s/%s/syscall" % (task, writer)).read().split()[0] not in sleeps:
    assert time.monotonic() < deadline, "the writer did not wait for the lock"
    time.sleep(0.001)
b.send_raw(b"{\"id\": 1, \"op\": \"reserve\", \"bytes_per_gpu\": 1, \"label\": \"b\"}\n")
deadline = time.monotonic() + 20
while failures() == before:
    assert time.monotonic() < deadline, "gpumd did not report the failed commit"
    time.sleep(0.01)
db.execute("ROLLBACK")
for c in (a, b):
    m = c.read_msg()  # the end of the connection when gpumd stops, never a reply
    assert m is None, "a reply reached a client after a failed commit: %r" % (m,)
' "$GD_ERR" "$GD_PID" || t_fail "replies after a failed commit"
t_wait_exit
[ "$GD_RC" -eq 1 ] || t_fail "gpumd exited $GD_RC after a failed commit (want 1)"
grep -q "ledger commit failed: .*locked" "$GD_ERR" ||
  { cat "$GD_ERR" >&2; t_fail "no 'ledger commit failed' (locked) in the log"; }
gd_start
gd_py '
rs = Client().ok("list", all=True)["reservations"]
assert [(r["id"], r["label"]) for r in rs] == [("r-1", "")], rs
' || t_fail "ledger after the second restart"
gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC on SIGTERM"
t_ok "a writer that cannot commit: nothing of its batch or of later turns is answered or kept"
