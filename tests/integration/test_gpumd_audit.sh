#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The ledger's audit rows name who caused each transition: the submitting peer for its
# reservation's creation and grant, the releasing process for a release (another process of
# the owner, or root as an admin releasing another uid's reservation), the closing peer for a
# connection lease that ends with its connection, gpumd itself (uid 0, pid 0) for a ttl that
# passes, and gpumd's own uid and pid for a release over the REST API. A queued reservation
# granted by someone else's release is audited with the releaser's identity.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"
source "$(dirname "$0")/http_lib.sh"

as_nobody=
if [ "$(id -u)" -eq 0 ] && command -v runuser >/dev/null; then
  as_nobody="runuser -u nobody --"
elif [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
  as_nobody="setpriv --reuid=65534 --regid=65534 --clear-groups --"
fi
chmod 0755 "$T_SCRATCH"
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start --socket-mode 0666
IDS="$T_SCRATCH/ids.json"

# The owner (its pid is recorded): a ttl lease that outlives it, one it releases itself, a
# connection lease that ends with its connection, a short ttl, and a queued one granted by
# the release of the other process below.
gd_py '
c = Client()
ids = {"owner_pid": os.getpid(), "uid": os.getuid()}
ids["kept"] = c.ok("reserve", bytes_per_gpu="60GiB", lease="ttl", ttl_ms=120000,
                   devices=["0"])["reservation"]["id"]
own = c.ok("reserve", bytes_per_gpu=1, lease="ttl", ttl_ms=120000, devices=["1"])["reservation"]
c.ok("release", reservation=own["id"])
ids["own"] = own["id"]
ids["conn"] = c.ok("reserve", bytes_per_gpu=1, devices=["1"])["reservation"]["id"]
ids["short"] = c.ok("reserve", bytes_per_gpu=1, lease="ttl", ttl_ms=200,
                    devices=["1"])["reservation"]["id"]
q = c.ok("reserve", bytes_per_gpu="60GiB", lease="ttl", ttl_ms=120000, devices=["0"])["reservation"]
assert q["state"] == "QUEUED", q
ids["queued"] = q["id"]
json.dump(ids, open(args[0], "w"))
' "$IDS" || t_fail "owner"

# Another process of the same uid releases "kept", which grants "queued"; the short ttl
# expires meanwhile (polled: gpumd ends it itself).
gd_py '
ids = json.load(open(args[0]))
c = Client()
r = c.ok("release", reservation=ids["kept"])["reservation"]
assert r["state"] == "RELEASED", r
deadline = time.monotonic() + 10
while any(x["id"] == ids["short"] for x in c.ok("list")["reservations"]):
    assert time.monotonic() < deadline, "ttl did not pass"
    time.sleep(0.02)
ids["releaser_pid"] = os.getpid()
json.dump(ids, open(args[0], "w"))
' "$IDS" || t_fail "release by another process"

# Over the REST API: gpumd acts with its own uid and pid.
hp '
ids = json.load(open(args[0]))
d = expect("DELETE", "/api/v1/reservations/" + ids["queued"], 200, tok=token())["reservation"]
assert d["state"] == "RELEASED", d
' "$IDS" || t_fail "release over HTTP"

if [ -n "$as_nobody" ]; then
  other=$(gd_pyfile other '
c = Client()
r = c.ok("reserve", bytes_per_gpu=1, lease="ttl", ttl_ms=120000, devices=["1"])["reservation"]
print("OTHER %s %d" % (r["id"], os.getpid()))
')
  chmod 0644 "$other"
  $as_nobody env PYTHONPATH="$PYTHONPATH" GPUM_SOCKET="$GPUM_SOCKET" python3 "$other" \
    >"$T_OUT" 2>&1 &
  wait $! || { cat "$T_OUT" >&2; t_fail "reserve as nobody"; }
  read -r _ other_id other_pid < <(grep '^OTHER ' "$T_OUT")
  gd_py '
ids = json.load(open(args[0]))
c = Client()
r = c.ok("release", reservation=args[1])["reservation"]
assert r["state"] == "RELEASED", r
ids.update(other=args[1], other_pid=int(args[2]), admin_pid=os.getpid())
json.dump(ids, open(args[0], "w"))
' "$IDS" "$other_id" "$other_pid" || t_fail "admin release"
fi

gd_stop TERM
[ "$GD_RC" -eq 0 ] || { cat "$GD_ERR" >&2; t_fail "exit $GD_RC"; }

python3 - "$IDS" "$GPUM_STATE_DIR/ledger.db" "$GD_PID" <<'EOF' || t_fail "audit rows"
import json, sqlite3, sys
ids = json.load(open(sys.argv[1]))
db = sqlite3.connect("file:%s?mode=ro" % sys.argv[2], uri=True)
gpumd_pid = int(sys.argv[3])
def rows(rid):
    n = int(rid[2:])
    return [(f, t, u, p) for f, t, u, p in db.execute(
        "SELECT from_state, to_state, uid, pid FROM audit WHERE reservation = ? ORDER BY id", (n,))]
uid, owner = ids["uid"], ids["owner_pid"]
made = [("NEW", "QUEUED", uid, owner), ("QUEUED", "GRANTED", uid, owner)]
def check(rid, want):
    got = rows(rid)
    assert got == want, "%s: audit %r, expected %r" % (rid, got, want)
check(ids["kept"], made + [("GRANTED", "RELEASED", uid, ids["releaser_pid"])])
check(ids["own"], made + [("GRANTED", "RELEASED", uid, owner)])
check(ids["conn"], made + [("GRANTED", "RELEASED", uid, owner)])
check(ids["short"], made + [("GRANTED", "EXPIRED", 0, 0)])
check(ids["queued"], [("NEW", "QUEUED", uid, owner), ("QUEUED", "GRANTED", uid, ids["releaser_pid"]),
                      ("GRANTED", "RELEASED", uid, gpumd_pid)])
if "other" in ids:
    o = ids["other_pid"]
    check(ids["other"], [("NEW", "QUEUED", 65534, o), ("QUEUED", "GRANTED", 65534, o),
                         ("GRANTED", "RELEASED", 0, ids["admin_pid"])])
print("audit rows as expected%s" % ("" if "other" in ids else " (no other uid: not root)"))
EOF
t_ok "audit rows name the actor of each transition"
