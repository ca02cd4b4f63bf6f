#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpumd records the start time of a lease process (field 22 of /proc/PID/stat) in the ledger
# and, after a restart, treats a pid whose start time differs as a dead process (its number
# was reused): the pid lease whose recorded start time no longer matches is released even
# though a process with that pid runs, the one that matches is kept. The reuse is simulated
# by rewriting the recorded start time in the ledger while gpumd is down.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start
sleep 600 &
kept=$!
T_PIDS+=("$kept")
sleep 600 &
reused=$!
T_PIDS+=("$reused")

gd_py '
c = Client()
ids = {}
for name, pid in (("kept", int(args[1])), ("reused", int(args[2]))):
    ids[name] = c.ok("reserve", bytes_per_gpu="1GiB", lease="pid", pid=pid)["reservation"]["id"]
json.dump(ids, open(args[0], "w"))
' "$T_SCRATCH/ids" "$kept" "$reused" || t_fail "reserve"
kill -9 "$GD_PID"
wait "$GD_PID" 2>/dev/null || true

gd_py '
import sqlite3
ids = json.load(open(args[0]))
def start_of(pid):
    stat = open("/proc/%d/stat" % pid).read()
    return int(stat[stat.rindex(")") + 2:].split()[19])
db = sqlite3.connect(os.path.join(os.environ["GPUM_STATE_DIR"], "ledger.db"))
assert db.execute("PRAGMA user_version").fetchone()[0] == 9
for name, pid in (("kept", int(args[1])), ("reused", int(args[2]))):
    row = db.execute("SELECT lease_pid, lease_pid_start, pid_start FROM reservations WHERE id = ?",
                     (int(ids[name][2:]),)).fetchone()
    assert row[0] == pid and row[1] == start_of(pid), (name, row, start_of(pid))
    assert row[2] > 0, row
db.execute("UPDATE reservations SET lease_pid_start = lease_pid_start + 1 WHERE id = ?",
           (int(ids["reused"][2:]),))
db.commit()
db.close()
' "$T_SCRATCH/ids" "$kept" "$reused" || t_fail "ledger start times"
t_ok "the ledger records the lease and owner process start times"

gd_start
gd_py '
ids = json.load(open(args[0]))
c = Client()
live = [r["id"] for r in c.ok("list", all=True)["reservations"]]
assert live == [ids["kept"]], live
assert "RELEASED" in c.err("release", "ENOENT", reservation=ids["reused"])
' "$T_SCRATCH/ids" || t_fail "after restart"
kill -0 "$reused" || t_fail "the process with the reused pid should still run"
t_ok "restart: a pid lease whose start time differs is released, a matching one is kept"
gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "exit $GD_RC"
