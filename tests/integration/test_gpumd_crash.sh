#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpumd crash recovery: 16 client processes reserve and release as fast as they can; after
# 1000 acknowledged operations gpumd is SIGKILLed. The 12 "churners" then exit (dead owners),
# the 4 "holders" stay alive. After the restart: every holder re-attaches its reservation with
# its token; the churners' reservations are released; no acknowledged reservation is lost or
# duplicated (ids unique, one ledger row each); after lease.grace only the 4 held
# reservations are live and the per-device accounting matches them.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start --lease-grace 2s
S=$T_SCRATCH

workers=$(gd_pyfile workers '
S = args[0]
CHURN, HOLD = 12, 4

def churn(c, log, rounds=None):
    while True:
        r = c.call("reserve", bytes_per_gpu="1GiB", label="churn")
        if not r["ok"]:
            raise Fail("reserve: %r" % r)
        rid = r["reservation"]["id"]
        log.write("G %s\n" % rid); log.flush()
        r = c.call("release", reservation=rid)
        if not r["ok"]:
            raise Fail("release: %r" % r)
        log.write("R %s\n" % rid); log.flush()

def wait_file(path, secs=60):
    deadline = time.monotonic() + secs
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            os._exit(3)
        time.sleep(0.01)

def worker(i, holder):
    log = open("%s/log.%d" % (S, i), "w")
    try:
        c = Client()
        if holder:
            r = c.ok("reserve", bytes_per_gpu="3GiB", label="held")["reservation"]
            log.write("H %s %s\n" % (r["id"], r["token"])); log.flush()
        churn(c, log)
    except (Fail, OSError, ValueError):
        pass
    if not holder:
        os._exit(0)
    wait_file(S + "/restarted")
    held = [l.split() for l in open("%s/log.%d" % (S, i)) if l.startswith("H ")][0]
    deadline = time.monotonic() + 20
    while True:
        try:
            c = Client()
            a = c.ok("attach", reservation=held[1], token=held[2])["reservation"]
            break
        except (Fail, OSError):
            if time.monotonic() > deadline:
                os._exit(4)
            time.sleep(0.02)
    ok = a["state"] == "GRANTED"
    open("%s/attached.%d" % (S, i), "w").write("ok\n" if ok else "bad %r\n" % a)
    wait_file(S + "/done")
    os._exit(0)

pids = {}
for i in range(CHURN + HOLD):
    pid = os.fork()
    if pid == 0:
        worker(i, i >= CHURN)
    pids[pid] = i
open(S + "/started", "w").write("x\n")
# Tell the test when 1000 operations were acknowledged.
deadline = time.monotonic() + 60
while True:
    n = 0
    for i in range(CHURN + HOLD):
        try:
            n += sum(1 for _ in open("%s/log.%d" % (S, i)))
        except OSError:
            pass
    if n >= 1000:
        break
    if time.monotonic() > deadline:
        fail("only %d operations in 60 s" % n)
    time.sleep(0.01)
open(S + "/kill-now", "w").write(str(n) + "\n")
rc = 0
for _ in range(CHURN):
    pid, st = os.waitpid(-1, 0)
    if pids[pid] < CHURN and st != 0:
        rc = 1
    if pids[pid] >= CHURN:
        rc = 1  # a holder ended early
open(S + "/churners-gone", "w").write("x\n")
for _ in range(HOLD):
    pid, st = os.waitpid(-1, 0)
    if st != 0:
        rc = 1
sys.exit(rc)
')
python3 "$workers" "$S" &
driver=$!
T_PIDS+=("$driver")
t_wait_file "$S/kill-now" 60
kill -9 "$GD_PID"
wait "$GD_PID" 2>/dev/null || true
t_ok "gpumd SIGKILLed after $(cat "$S/kill-now") acknowledged operations"
t_wait_file "$S/churners-gone" 30
gd_start --lease-grace 2s
echo x >"$S/restarted"
for i in 12 13 14 15; do t_wait_file "$S/attached.$i" 30; done
grep -v '^ok$' "$S"/attached.* && t_fail "a holder could not re-attach"
t_ok "the 4 live holders re-attached with their tokens"

gd_py '
import glob, sqlite3
S = args[0]
granted, released, held = [], set(), set()
for f in glob.glob(S + "/log.*"):
    for line in open(f):
        p = line.split()
        if p[0] in ("G", "H"):
            granted.append(p[1])
        if p[0] == "R":
            released.add(p[1])
        if p[0] == "H":
            held.add(p[1])
assert len(granted) == len(set(granted)), "a reservation id was granted twice"
c = Client()
# After lease.grace (2 s) only the held reservations are live.
deadline = time.monotonic() + 15
while True:
    live = {r["id"]: r for r in c.ok("list", all=True)["reservations"]}
    if set(live) == held:
        break
    assert time.monotonic() < deadline, "live %r, held %r" % (sorted(live), sorted(held))
    c.ok("hello")
assert all(r["state"] == "GRANTED" for r in live.values()), live
st = c.ok("status")
total = sum(d["reserved"] for d in st["devices"])
assert total == 4 * 3 * 2**30, st["devices"]
for d in st["devices"]:
    ids = set(d["reservations"])
    want = {i for i, r in live.items() if any(x["index"] == d["index"] for x in r["devices"])}
    assert ids == want and d["reserved"] == 3 * 2**30 * len(ids), (d, want)
# The ledger: one row per id, every acknowledged id present, all but the held ones final.
db = sqlite3.connect("file:%s/state/ledger.db?mode=ro" % S, uri=True)
rows = {"r-%d" % i: s for i, s in db.execute("select id, state from reservations")}
assert all(g in rows for g in granted), "an acknowledged reservation is missing from the ledger"
open_rows = {i for i, s in rows.items() if s in ("QUEUED", "GRANTED")}
assert open_rows == held, (open_rows, held)
for rid in set(granted) - held:
    assert rows[rid] in ("RELEASED", "CANCELLED"), (rid, rows[rid])
n_audit = db.execute("select count(*) from audit").fetchone()[0]
assert n_audit >= 2 * len(granted), n_audit
# A churner reservation granted but not acknowledged as released was released by recovery.
lost = [g for g in granted if g not in released and g not in held]
for g in lost:
    assert "ENOENT" == c.call("release", reservation=g)["error"]["code"]
print("checked %d reservations (%d released by recovery)" % (len(granted), len(lost)))
' "$S" || t_fail "state after the restart"
t_ok "no reservation lost or duplicated; dead owners released; accounting consistent"

echo x >"$S/done"
wait "$driver" || t_fail "a worker failed"
gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "exit $GD_RC"
