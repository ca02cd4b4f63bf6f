#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ledger.retention: finished reservations that ended longer ago than the retention, and audit
# rows written longer ago, are deleted by gpumd's periodic pruning and at start; live
# reservations and the newest ids stay (ids never repeat); 0 keeps everything; a bad value is a
# configuration error.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
DB="$GPUM_STATE_DIR/ledger.db"

rc=0
GPUM_LEDGER_RETENTION=forever "$GPUMD" >/dev/null 2>"$T_SCRATCH/bad.err" || rc=$?
[ $rc -eq 2 ] && grep -q "forever" "$T_SCRATCH/bad.err" ||
  { cat "$T_SCRATCH/bad.err" >&2; t_fail "bad ledger.retention: exit $rc"; }

# audited DB: the reservation numbers that still have audit rows, e.g. "1 4" (read while gpumd
# is stopped: a running gpumd may hold the database exclusively).
audited() {
  python3 -c 'import sqlite3, sys
db = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
print(" ".join(str(r[0]) for r in db.execute("SELECT DISTINCT reservation FROM audit ORDER BY 1")))' "$1"
}

# Periodic pruning while gpumd runs.
export GPUM_LEDGER_RETENTION=1s
gd_start
holder=$(gd_pyfile holder '
c = Client()
live = c.ok("reserve", bytes_per_gpu="1GiB")["reservation"]["id"]
for i in range(3):
    c.ok("release", reservation=c.ok("reserve", bytes_per_gpu="1GiB")["reservation"]["id"])
open(args[0], "w").write(live)
time.sleep(600)')
t_bg python3 "$holder" "$T_SCRATCH/live"
t_wait_file "$T_SCRATCH/live" 20
[ "$(cat "$T_SCRATCH/live")" = "r-1" ] || t_fail "unexpected ids"
gd_py '
c, deadline = Client(), time.monotonic() + 15
while "already ended" in c.err("release", "ENOENT", reservation="r-3"):
    assert time.monotonic() < deadline, "r-3 not pruned"
    time.sleep(0.05)
assert "no reservation r-2" in c.err("release", "ENOENT", reservation="r-2")
assert "already ended: RELEASED" in c.err("release", "ENOENT", reservation="r-4")  # newest id
assert [r["id"] for r in c.ok("list", all=True)["reservations"]] == ["r-1"]
' || t_fail "periodic pruning"
gd_stop TERM
# The call that pruned r-3 also took the audit rows written before r-3 ended (those of the
# live r-1 too: the audit log keeps the retention period); r-4's newest row always stays.
[ "$(audited "$DB")" = "4" ] || t_fail "audit rows after pruning: $(audited "$DB")"
t_ok "finished reservations and audit rows older than ledger.retention are pruned"

# 0 keeps everything (for longer than a 1 s retention would).
export GPUM_LEDGER_RETENTION=0
gd_start
gd_py '
c = Client()
for i in range(2):
    c.ok("release", reservation=c.ok("reserve", bytes_per_gpu="1GiB")["reservation"]["id"])
time.sleep(1.5)
assert "already ended" in c.err("release", "ENOENT", reservation="r-5")
' || t_fail "retention 0"
gd_stop TERM
# (r-1 gets a row of its own if its lease.grace ran out meanwhile)
case " $(audited "$DB") " in
" 4 5 6 " | " 1 4 5 6 ") ;;
*) t_fail "retention 0 pruned: $(audited "$DB")" ;;
esac
t_ok "ledger.retention 0 keeps finished reservations"

# At start, with a retention they are past.
export GPUM_LEDGER_RETENTION=1s
gd_start
gd_py '
c, deadline = Client(), time.monotonic() + 15
while "already ended" in c.err("release", "ENOENT", reservation="r-5"):
    assert time.monotonic() < deadline, "r-5 not pruned after the restart"
    time.sleep(0.05)
new = c.ok("reserve", bytes_per_gpu="1GiB")["reservation"]["id"]
assert new == "r-7", new
' || t_fail "pruning at start"
gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exit $GD_RC"
# The rows of r-4 and r-5 are gone, r-7's (newest) stay; r-6's newest row stays until r-7's
# are written and a prune follows, r-1 has one if its lease.grace ran out.
left=" $(audited "$DB") "
case "$left" in *" 7 "*) ;; *) t_fail "audit rows of r-7 gone: $left" ;; esac
case "$left" in *" 4 "* | *" 5 "*) t_fail "audit rows of r-4/r-5 kept: $left" ;; esac
t_ok "pruned at start; ids continue above the newest"
