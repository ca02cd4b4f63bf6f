#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The REST API's token and who calls without it. The token: created at first start in the
# state directory with mode 0600 and kept across restarts; a malformed Authorization header
# gets 401 and a wrong token 403 (and change nothing); `gpum http-token` shows it and
# `--rotate` replaces it at once (old token 403, new one works, file updated); SIGHUP re-reads
# a token written into the file by hand; a token file readable by others is refused; a
# non-loopback http.listen is refused without http.token_file, and with it every call (even a
# GET) needs the token; http.listen off starts no server. Without a token, on 127.0.0.1 and
# [::1], a caller acts as the uid that owns its socket (sock_diag, as the socket's
# SO_PEERCRED): its allocation is its own, it renews and releases that; as root, uid 65534
# cannot release or renew another uid's reservation nor switch a device (403, as on the
# socket), root and admin_group members are admins, the token makes any caller an admin acting
# as gpumd, and the audit rows of a tokenless caller's reservation name its uid.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"
source "$(dirname "$0")/http_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start
tokf="$GPUM_STATE_DIR/http.token"
[ "$(stat -c %a "$tokf")" = 600 ] || t_fail "token file mode $(stat -c %a "$tokf")"
[[ $(cat "$tokf") =~ ^[0-9a-f]{64}$ ]] || t_fail "token is not 64 hex digits"
first=$(cat "$tokf")
t_ok "token created at first start: 64 hex digits, mode 0600"

hp '
tok = token()
basic = {"Authorization": "Basic dXNlcjpwdw=="}
expect("GET", "/api/v1/gpu/status", 200)
expect("GET", "/api/v1/reservations", 200)
expect("GET", "/api/v1/gpu/status", 200, tok=tok)
expect_err("GET", "/api/v1/gpu/status", 403, "EPERM", "wrong", tok="x" * 64)
# A caller that shows an Authorization header is judged by it alone, never by its socket:
# not "Bearer" is 401 with the challenge, a wrong token 403.
expect_err("POST", "/api/v1/gpu/allocate", 401, "EPERM", "Bearer", body={"memory_gb": 1},
           headers=basic)
st, hd, _ = call("POST", "/api/v1/gpu/allocate", body={"memory_gb": 1}, headers=basic)
assert st == 401 and hd["www-authenticate"].startswith("Bearer"), hd
expect_err("POST", "/api/v1/gpu/allocate", 403, "EPERM", "wrong", tok=tok[:-1] + "0"
           if tok[-1] != "0" else tok[:-1] + "1", body={"memory_gb": 1})
expect_err("POST", "/api/v1/gpu/allocate", 403, "EPERM", None, tok=tok + "0", body={"memory_gb": 1})
r = expect("POST", "/api/v1/gpu/allocate", 201, tok=tok, body={"memory_gb": 1})["reservation"]
expect_err("DELETE", "/api/v1/reservations/" + r["id"], 401, "EPERM", None, headers=basic)
expect_err("POST", "/api/v1/reservations/%s/renew" % r["id"], 401, "EPERM", None, headers=basic)
expect_err("DELETE", "/api/v1/reservations/" + r["id"], 403, "EPERM", None, tok="y" * 64)
# refused calls changed nothing: one reservation, still granted
lst = expect("GET", "/api/v1/reservations", 200)["reservations"]
assert len(lst) == 1 and lst[0]["state"] == "GRANTED" and lst[0]["expires_ns"] == r["expires_ns"], lst
expect("DELETE", "/api/v1/reservations/" + r["id"], 200, tok=tok)
' || t_fail "token required where it must be"
t_ok "loopback: reads open; a malformed Authorization 401, a wrong token 403, nothing changed"

# No token, from loopback: the caller is the owner of its socket, this test's uid (which owns
# both ends of the connection), and acts as that uid as a socket client would.
hp '
me = os.getuid()
r = expect("POST", "/api/v1/gpu/allocate", 201, body={"memory_gb": 1, "label": "mine"})["reservation"]
assert r["uid"] == me and r["label"] == "mine" and r["lease"] == "ttl", r
lst = expect("GET", "/api/v1/reservations", 200)["reservations"]
assert [(x["id"], x["uid"]) for x in lst] == [(r["id"], me)], lst
got = expect("POST", "/api/v1/reservations/%s/renew" % r["id"], 200, body={"ttl": 60})["reservation"]
assert got["expires_ns"] < r["expires_ns"], got  # 60 s from now, not 600 s from the start
rel = expect("DELETE", "/api/v1/reservations/" + r["id"], 200)["reservation"]
assert rel["state"] == "RELEASED" and rel["reason"] == "released over HTTP" and rel["uid"] == me, rel
' || t_fail "tokenless loopback caller as its own uid"
t_ok "loopback without a token: allocate, renew and release as the caller's own uid"

t_expect 0 "$GPUM_BIN" http-token
[ "$(cat "$T_OUT")" = "$first" ] || t_fail "gpum http-token printed '$(cat "$T_OUT")'"
t_expect 0 "$GPUM_BIN" http-token --rotate
second=$(cat "$T_OUT")
[[ $second =~ ^[0-9a-f]{64}$ && $second != "$first" ]] || t_fail "rotate printed '$second'"
[ "$(cat "$tokf")" = "$second" ] && [ "$(stat -c %a "$tokf")" = 600 ] || t_fail "token file not rotated"
hp '
expect_err("POST", "/api/v1/gpu/validate", 403, "EPERM", None, tok=args[0], body={"memory_gb": 1})
expect("POST", "/api/v1/gpu/validate", 200, tok=args[1], body={"memory_gb": 1})
' "$first" "$second" || t_fail "rotation"
t_expect 2 "$GPUM_BIN" http-token --bogus
# Only admins: nobody cannot see it (setpriv drops to uid 65534 when we are root).
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  chmod 0777 "$(dirname "$GPUM_SOCKET")"
  chmod 0666 "$GPUM_SOCKET"
  rc=0
  setpriv --reuid 65534 --regid 65534 --clear-groups env -u XDG_CONFIG_HOME -u GPUM_CONFIG \
    HOME="$T_SCRATCH" "$GPUM_BIN" http-token >"$T_OUT" 2>"$T_ERR" || rc=$?
  [ $rc -eq 1 ] && grep -q "admin" "$T_ERR" || { cat "$T_ERR"; t_fail "a non-admin saw the token (rc $rc)"; }
  # Two reservations of uid 65534, made over the socket.
  other=$(gd_pyfile other '
c = Client()
ids = [c.ok("reserve", bytes_per_gpu="1GiB", lease="ttl", ttl_ms=120000)["reservation"]["id"]
       for _ in range(2)]
open(args[0], "w").write(" ".join(ids))
')
  chmod 0644 "$other"
  touch "$T_SCRATCH/other.id" && chmod 0666 "$T_SCRATCH/other.id"
  setpriv --reuid 65534 --regid 65534 --clear-groups env PYTHONPATH="$PYTHONPATH" \
    GPUM_SOCKET="$GPUM_SOCKET" python3 "$other" "$T_SCRATCH/other.id" >"$T_OUT" 2>&1 ||
    { cat "$T_OUT"; t_fail "reserve as nobody"; }
  # This test's uid is root: without a token it is an admin, as on the socket, and releases
  # one of them; the token, as ever, releases the other. Then root allocates one of its own.
  hp '
a, b = open(args[0]).read().split()
r = expect("GET", "/api/v1/reservations/" + a, 200)["reservation"]
assert r["uid"] == 65534, r
r = expect("DELETE", "/api/v1/reservations/" + a, 200)["reservation"]
assert r["state"] == "RELEASED" and r["reason"] == "released over HTTP", r
r = expect("DELETE", "/api/v1/reservations/" + b, 200, tok=token())["reservation"]
assert r["state"] == "RELEASED" and r["reason"] == "released over HTTP", r
mine = expect("POST", "/api/v1/gpu/allocate", 201, body={"memory_gb": 1})["reservation"]
assert mine["uid"] == 0, mine
print(mine["id"])
' "$T_SCRATCH/other.id" >"$T_OUT" || t_fail "root without a token, and the token, release uid 65534's"
  rootres=$(cat "$T_OUT")
  # uid 65534 over HTTP without a token acts as itself and is no admin: it allocates and
  # releases its own, but may not release or renew root's nor switch a device (403, the
  # socket's messages); with the token the same process is an admin acting as gpumd (what it
  # allocates is gpumd's, uid 0) and releases root's reservation.
  hp_as_nobody '
assert os.getuid() == 65534
rootres, tok = args
mine = expect("POST", "/api/v1/gpu/allocate", 201, body={"memory_gb": 1})["reservation"]
assert mine["uid"] == 65534, mine
lst = expect("GET", "/api/v1/reservations", 200)["reservations"]
assert sorted((x["id"], x["uid"]) for x in lst) == sorted([(rootres, 0), (mine["id"], 65534)]), lst
expect_err("DELETE", "/api/v1/reservations/" + rootres, 403, "EPERM", "belongs to uid 0")
expect_err("POST", "/api/v1/reservations/%s/renew" % rootres, 403, "EPERM", "belongs to uid 0")
expect_err("POST", "/api/v1/gpu/devices/0/disable", 403, "EPERM", "admin", body={"reason": "x"})
rel = expect("DELETE", "/api/v1/reservations/" + mine["id"], 200)["reservation"]
assert rel["state"] == "RELEASED" and rel["reason"] == "released over HTTP", rel
r = expect("POST", "/api/v1/gpu/allocate", 201, tok=tok, body={"memory_gb": 1})["reservation"]
assert r["uid"] == 0, r
expect("DELETE", "/api/v1/reservations/" + r["id"], 200, tok=tok)
rel = expect("DELETE", "/api/v1/reservations/" + rootres, 200, tok=tok)["reservation"]
assert rel["state"] == "RELEASED", rel
print(mine["id"])
' "$rootres" "$(cat "$tokf")" >"$T_OUT" || t_fail "uid 65534 over HTTP, without and with the token"
  # The audit rows of uid 65534's tokenless reservation name it, with gpumd's pid (the
  # caller's process is not known over HTTP) and the reason "released over HTTP".
  python3 - "$GPUM_STATE_DIR/ledger.db" "$(cat "$T_OUT")" "$GD_PID" <<'EOF' || t_fail "audit rows of a tokenless caller"
import sqlite3, sys
db = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
rows = db.execute("SELECT from_state, to_state, reason, uid, pid FROM audit WHERE reservation = ?"
                  " ORDER BY id", (int(sys.argv[2][2:]),)).fetchall()
gpumd = int(sys.argv[3])
assert len(rows) >= 2 and all(r[3:] == (65534, gpumd) for r in rows), rows
assert rows[-1] == ("GRANTED", "RELEASED", "released over HTTP", 65534, gpumd), rows
EOF
  # With admin_group set to uid 65534's primary group, that uid is an admin without a token
  # too (its group found from the user database, as HTTP knows no gid): it releases root's.
  gd_stop TERM
  GPUM_ADMIN_GROUP=$(getent group 65534 | cut -d: -f1) gd_start
  hp '
r = expect("POST", "/api/v1/gpu/allocate", 201, body={"memory_gb": 1})["reservation"]
assert r["uid"] == 0, r
print(r["id"])
' >"$T_OUT" || t_fail "root allocates"
  hp_as_nobody '
r = expect("DELETE", "/api/v1/reservations/" + args[0], 200)["reservation"]
assert r["state"] == "RELEASED" and r["uid"] == 0, r
' "$(cat "$T_OUT")" || t_fail "an admin_group member over HTTP without a token"
  gd_stop TERM
  gd_start
fi
t_ok "gpum http-token shows the token; --rotate replaces it at once (old 403, new works); admins only; without a token uid 65534 acts as itself (its own only, audited as such), root and admin_group as admins; the token makes an admin"

# SIGHUP re-reads a token written into the file by hand.
umask 077
echo "hand-written-token-0123456789" >"$tokf.tmp" && mv "$tokf.tmp" "$tokf"
kill -HUP "$GD_PID"
hp '
until(lambda: call("POST", "/api/v1/gpu/validate", tok="hand-written-token-0123456789",
                   body={"memory_gb": 1})[0] == 200, what="the reloaded token")
expect_err("POST", "/api/v1/gpu/validate", 403, "EPERM", None, tok=args[0], body={"memory_gb": 1})
' "$second" || t_fail "SIGHUP reload"
t_ok "SIGHUP re-reads the token file"

gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC"
[ "$(cat "$tokf")" = "hand-written-token-0123456789" ] || t_fail "the token changed across a restart"
chmod 0644 "$tokf"
t_expect 1 "$GPUMD"
grep -q "readable by others" "$T_ERR" || { cat "$T_ERR"; t_fail "no clear message for a 0644 token"; }
chmod 0600 "$tokf"
t_ok "a token file readable by others is refused at start"

# The longest hand-written token docs/rest.md allows (256 characters) works; 257 are refused.
long=$(printf 'k%.0s' $(seq 256))
printf '%s\n' "$long" >"$tokf"
gd_start
hp '
expect("POST", "/api/v1/gpu/validate", 200, tok=args[0], body={"memory_gb": 1})
expect_err("POST", "/api/v1/gpu/validate", 403, "EPERM", None, tok=args[0][:-1],
           body={"memory_gb": 1})
' "$long" || t_fail "a 256-character token"
gd_stop TERM
printf '%sk\n' "$long" >"$tokf"
t_expect 1 "$GPUMD"
grep -q "16 to 256 characters" "$T_ERR" || { cat "$T_ERR"; t_fail "257 characters: no clear message"; }
echo "hand-written-token-0123456789" >"$tokf"
t_ok "a hand-written token of 256 characters works, 257 are refused at start"

# On [::1] too the tokenless caller is the owner of its socket (an IPv6 lookup).
if python3 -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' 2>/dev/null; then
  GPUM_HTTP_LISTEN='[::1]:0' gd_start
  hp '
assert addr()[0] == "::1", addr()
r = expect("POST", "/api/v1/gpu/allocate", 201, body={"memory_gb": 1})["reservation"]
assert r["uid"] == os.getuid(), r
expect("DELETE", "/api/v1/reservations/" + r["id"], 200)
' || t_fail "tokenless caller on [::1]"
  gd_stop TERM
  [ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC"
  t_ok "on [::1] a tokenless caller acts as its own uid too"
fi

GPUM_HTTP_LISTEN=0.0.0.0:0 t_expect 1 "$GPUMD"
grep -q "not a loopback address: set http.token_file" "$T_ERR" || { cat "$T_ERR"; t_fail "non-loopback: no clear message"; }
GPUM_HTTP_LISTEN=0.0.0.0:0 GPUM_HTTP_TOKEN_FILE="$T_SCRATCH/remote.token" gd_start
[ "$(stat -c %a "$T_SCRATCH/remote.token")" = 600 ] || t_fail "remote token not created 0600"
hp '
tok = open(args[0]).read().strip()
expect_err("GET", "/api/v1/gpu/status", 401, "EPERM", "non-loopback")
expect_err("GET", "/metrics", 401, "EPERM", None)
expect_err("GET", "/api/v1/gpu/health", 403, "EPERM", None, tok="z" * 64)
expect("GET", "/api/v1/gpu/status", 200, tok=tok)
' "$T_SCRATCH/remote.token" || t_fail "non-loopback"
gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC"
t_ok "non-loopback listen: refused without http.token_file; with it every call needs the token"

GPUM_HTTP_LISTEN=off gd_start
out=$(ls -t "$T_SCRATCH"/gpumd.out.* | head -1)
grep -q "http=" "$out" && t_fail "http=... printed with http.listen off"
gd_stop TERM
GPUM_HTTP_LISTEN=127.0.0.1:99999 t_expect 1 "$GPUMD"
grep -q "port must be 0 to 65535" "$T_ERR" || { cat "$T_ERR"; t_fail "bad port: no clear message"; }
GPUM_HTTP_LISTEN=example.com:80 t_expect 1 "$GPUMD"
grep -q "IP address or localhost" "$T_ERR" || { cat "$T_ERR"; t_fail "bad host: no clear message"; }
python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
time.sleep(60)' "$T_SCRATCH/busy.port" &
busy=$!
T_PIDS+=("$busy")
t_wait_file "$T_SCRATCH/busy.port"
GPUM_HTTP_LISTEN=127.0.0.1:$(cat "$T_SCRATCH/busy.port") t_expect 1 "$GPUMD"
grep -q "cannot listen on http.listen 127.0.0.1:[0-9]*" "$T_ERR" || { cat "$T_ERR"; t_fail "port in use: no clear message"; }
kill "$busy"
t_ok "http.listen off starts no server; bad or busy addresses are refused with the value named"
