#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The operator's switch: gpum disable GPU (admin) makes it DISABLED with the reason in status,
# REST and /metrics; new reservations go elsewhere or wait, the one already on it runs on; the
# switch survives a restart of gpumd (it is in the ledger); gpum enable gives it back and the
# waiting request is granted. A non-admin gets EPERM and nothing changes; bad devices are
# refused. REST: the same calls, for an admin: the token, or root on its own loopback connection.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/http_lib.sh"

chmod 0755 "$T_SCRATCH"
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start --socket-mode 0666
G="$GPUM_BIN"

state_of() { # state_of INDEX: gpumd's state of the device, as gpum jobs' raw status shows it
  gd_py 'print(Client().ok("status")["devices"][int(args[0])]["state"])' "$1"
}

# A grant on GPU 1 before the switch: it runs on (drain).
BEFORE=$(gd_py 'print(Client().ok("reserve", bytes_per_gpu="10GiB", devices=["1"], lease="ttl", ttl_ms=3600000, label="before")["reservation"]["id"])')

# Non-admin: refused, nothing changes.
if [ "$(id -u)" -eq 0 ] && command -v runuser >/dev/null; then
  rc=0
  runuser -u nobody -- env GPUM_SOCKET="$GPUM_SOCKET" "$G" disable 1 >"$T_OUT" 2>"$T_ERR" || rc=$?
  [ $rc -eq 1 ] && grep -q "only an admin" "$T_ERR" || t_fail "non-admin disable: rc $rc $(cat "$T_ERR")"
  [ "$(state_of 1)" = AVAILABLE ] || t_fail "a refused disable changed the state"
  t_ok "non-admin: EPERM, nothing changes"
else
  echo "SKIP (part): needs root and runuser to run a client as another uid"
fi

t_expect 2 "$G" disable
t_expect 2 "$G" disable 0 1
t_expect 1 "$G" disable 7
grep -q "no device '7'" "$T_ERR" || t_fail "unknown device: $(cat "$T_ERR")"
t_ok "usage errors and unknown devices"

UUID1=$(gd_py 'print(Client().ok("status")["devices"][1]["uuid"])')
t_expect 0 "$G" disable "$UUID1" --reason "fan replacement"
[ "$(cat "$T_OUT")" = "GPU $UUID1 DISABLED" ] || t_fail "disable: $(cat "$T_OUT")"
gd_py '
d = Client().ok("status")["devices"][1]
assert d["state"] == "DISABLED" and d["reason"] == "fan replacement", d
assert args[0] in d["reservations"], d
' "$BEFORE" || t_fail "status after disable"
t_expect 0 "$G" status --no-color
grep -q "gpumd: DISABLED (fan replacement)" "$T_OUT" || t_fail "gpum status: $(cat "$T_OUT")"
t_ok "GPU 1 DISABLED with its reason (also in gpum status); the reservation on it runs on"

# New grants: only GPU 0; a request for GPU 1 explicitly waits.
gd_py '
c = Client()
r = c.ok("reserve", bytes_per_gpu="1GiB", lease="ttl", ttl_ms=600000)["reservation"]
assert r["state"] == "GRANTED" and r["devices"][0]["index"] == 0, r
q = c.ok("reserve", bytes_per_gpu="1GiB", devices=["1"], lease="ttl", ttl_ms=600000)["reservation"]
assert q["state"] == "QUEUED", q
open(args[0], "w").write(q["id"] + "\n")
' "$T_SCRATCH/queued" || t_fail "reservations while GPU 1 is disabled"
QUEUED=$(cat "$T_SCRATCH/queued")
t_ok "new grants avoid GPU 1; a request for it waits ($QUEUED)"

# Durable: gpumd restarts and GPU 1 is still DISABLED.
gd_stop TERM
gd_start --socket-mode 0666
disabled_again() { [ "$(state_of 1)" = DISABLED ]; }
t_until 10 disabled_again || t_fail "GPU 1 not DISABLED after a restart: $(state_of 1)"
t_ok "the switch survives a restart"

# REST: an admin is needed (the token, or root's own loopback connection); enable over REST
# grants the waiting request.
hp '
tok = token()
# A malformed Authorization header is refused before anything else.
expect_err("POST", "/api/v1/gpu/devices/1/enable", 401, "EPERM", "Bearer", body={},
           headers={"Authorization": "Basic dXNlcjpwdw=="})
# (Without a token the caller acts as the uid owning its loopback socket: this test runs as an
# admin, who may switch devices so; test_http_auth shows a non-admin uid refused with 403.)
expect_err("POST", "/api/v1/gpu/devices/9/enable", 404, "ENODEV", "9", tok=tok, body={})
# A path that is not UTF-8 names no device either (it was a 500 "out of memory").
resp = raw(b"POST /api/v1/gpu/devices/\xff\xfe/disable HTTP/1.1\r\nHost: x\r\n"
           b"Authorization: Bearer " + tok.encode() + b"\r\nContent-Type: application/json\r\n"
           b"Content-Length: 2\r\nConnection: close\r\n\r\n{}")
assert resp.startswith(b"HTTP/1.1 404 ") and b"ENODEV" in resp and b"no device" in resp, resp
expect_err("POST", "/api/v1/gpu/devices/1/enable", 400, "EINVAL", "reason", tok=tok,
           body={"reason": "x"})
s = expect("GET", "/api/v1/gpu/status", 200)
assert s["devices"][1]["state"] == "DISABLED", s
' || t_fail "REST checks"
hp '
d = expect("POST", "/api/v1/gpu/devices/1/enable", 200, tok=token(), body={})["device"]
assert d["index"] == 1 and d["state"] == "AVAILABLE", d
' || t_fail "REST enable"
granted() {
  gd_py 'import sys; r = [x for x in Client().ok("list", all=True)["reservations"] if x["id"] == args[0]]; sys.exit(0 if r and r[0]["state"] == "GRANTED" else 1)' "$QUEUED"
}
t_until 10 granted || t_fail "$QUEUED not granted after enable"
t_ok "REST enable (token needed); the waiting request is granted"

hp '
d = expect("POST", "/api/v1/gpu/devices/0/disable", 200, tok=token(), body={"reason": "rest"})["device"]
assert d["state"] == "DISABLED" and d["reason"] == "rest", d
' || t_fail "REST disable"
t_expect 0 "$G" enable 0
[ "$(cat "$T_OUT")" = "GPU 0 AVAILABLE" ] || t_fail "enable: $(cat "$T_OUT")"
t_ok "REST disable, CLI enable"
