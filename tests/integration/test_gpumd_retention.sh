#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ledger.retention: finished reservations and their audit rows older than the retention are
# deleted by gpumd's periodic pruning and at start; live ones and the newest id stay (ids never
# repeat); 0 keeps everything; a bad value is a configuration error.
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
[ "$(audited "$DB")" = "1 4" ] || t_fail "audit rows after pruning: $(audited "$DB")"
t_ok "finished reservations older than ledger.retention are pruned with their audit rows"

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
[ "$(audited "$DB")" = "1 4 5 6" ] || t_fail "retention 0 pruned: $(audited "$DB")"
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
# r-4, r-5 pruned; r-1 (live) and r-7 (newest) kept; r-6 may have been pruned once r-7 existed.
case " $(audited "$DB") " in
" 1 6 7 " | " 1 7 ") ;;
*) t_fail "audit rows after pruning at start: $(audited "$DB")" ;;
esac
t_ok "pruned at start; ids continue above the newest"
