#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpumd ownership: the owner of a reservation is the peer's uid (SO_PEERCRED). Another uid
# (nobody, via runuser or setpriv) cannot release, renew or attach it (EPERM), sees it in
# list all without its token, and manages its own; root (an admin) may release anyone's.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: needs root to run a client as another uid"
  exit 0
fi
if command -v runuser >/dev/null; then
  as_nobody() { runuser -u nobody -- "$@"; }
elif command -v setpriv >/dev/null; then
  as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }
else
  echo "SKIP: neither runuser nor setpriv exists to run a client as another uid"
  exit 0
fi
chmod 0755 "$T_SCRATCH"
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start --socket-mode 0666
[ "$(stat -c %a "$GPUM_SOCKET")" = 666 ] || t_fail "socket_mode not applied"

gd_py '
c = Client()
r = c.ok("reserve", bytes_per_gpu="1GiB", lease="ttl", ttl_ms=120000, label="root")["reservation"]
open(args[0], "w").write(r["id"] + "\n")
' "$T_SCRATCH/rootres" || t_fail "root reserve"
rid=$(cat "$T_SCRATCH/rootres")

other=$(gd_pyfile other '
c = Client()
h = c.ok("hello")
assert h["uid"] == 65534 and h["admin"] is False, h
rid = args[0]
assert "belongs to uid 0" in c.err("release", "EPERM", reservation=rid)
c.err("renew", "EPERM", reservation=rid)
c.err("attach", "EPERM", reservation=rid, token="0" * 32)
assert c.ok("list")["reservations"] == []
everyone = c.ok("list", all=True)["reservations"]
assert [r["id"] for r in everyone] == [rid] and "token" not in everyone[0], everyone
assert "another user" in c.err("reserve", "EPERM", bytes_per_gpu=1, lease="pid", pid=1)
mine = c.ok("reserve", bytes_per_gpu="1GiB", lease="ttl", ttl_ms=120000)["reservation"]
assert mine["uid"] == 65534 and mine["token"], mine
c.ok("renew", reservation=mine["id"])
')
chmod 0644 "$other"
as_nobody env PYTHONPATH="$PYTHONPATH" GPUM_SOCKET="$GPUM_SOCKET" python3 "$other" "$rid" \
  >"$T_OUT" 2>&1 &
wait $! || { cat "$T_OUT" >&2; t_fail "the other uid"; }
t_ok "another uid gets EPERM on someone else's reservation and manages its own"

# The other uid's reservation (a ttl lease, so it outlived its client), found by list all.
gd_py '
c = Client()
others = [r for r in c.ok("list", all=True)["reservations"] if r["uid"] == 65534]
assert len(others) == 1, others
rel = c.ok("release", reservation=others[0]["id"])["reservation"]
assert rel["state"] == "RELEASED" and "uid 0" in rel["reason"], rel
c.ok("release", reservation=args[0])
' "$rid" || t_fail "admin release"
t_ok "root (admin) releases another user's reservation"

gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "exit $GD_RC"
