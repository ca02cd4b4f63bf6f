#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpumd leases and device events on a simulated 2xH100 node (also run under TSan, "_threads":
# the monitor and process-list threads feed the loop): a pid lease outlives its client
# and ends when the pid exits; a ttl lease expires unless renewed; unmanaged memory (gpum sim
# hold) reduces what can be granted and raises a pressure event; an XID 79 fails the device's
# reservations (FAILED + "failed" event); SIGHUP reloads memory_fraction.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
cfg="$T_SCRATCH/gpum.yaml"
printf 'memory_fraction: 0.95\nmonitor:\n  interval: 50ms\n' >"$cfg"
gd_start --config "$cfg"

# live N: waits up to 10 s until exactly N reservations are live.
live() {
  gd_py '
c, deadline = Client(), time.monotonic() + 10
while len(c.ok("list", all=True)["reservations"]) != int(args[0]):
    assert time.monotonic() < deadline, "live reservations: %r" % c.ok("list", all=True)
' "$1"
}

# pid lease
sleep 600 &
victim=$!
T_PIDS+=("$victim")
gd_py '
c = Client()
r = c.ok("reserve", bytes_per_gpu="1GiB", lease="pid", pid=int(args[0]))["reservation"]
assert r["lease"] == "pid" and r["lease_pid"] == int(args[0]) and r["state"] == "GRANTED", r
c.err("reserve", "ENOENT", bytes_per_gpu=1, lease="pid", pid=2**31 - 2)
c.err("reserve", "EINVAL", bytes_per_gpu=1, pid=5)
' "$victim" || t_fail "pid lease reserve"
live 1 || t_fail "pid lease ended with its client's connection"
kill -9 "$victim"
wait "$victim" 2>/dev/null || true
live 0 || t_fail "pid lease not released when the pid exited"
t_ok "pid lease: outlives the client, ends with the pid"

# ttl lease: renewals keep it, then it expires; an abandoned one expires too.
gd_py '
c = Client()
r = c.ok("reserve", bytes_per_gpu="1GiB", lease="ttl", ttl_ms=300)["reservation"]
assert r["lease"] == "ttl" and r["expires_ns"] > r["created_ns"], r
t0 = time.monotonic()
while time.monotonic() - t0 < 0.9:   # three times the ttl, renewed every 100 ms
    n = c.ok("renew", reservation=r["id"])["reservation"]
    assert n["state"] == "GRANTED", n
    time.sleep(0.1)
e = c.wait_event("expired", r["id"], timeout=5)["reservation"]
assert e["state"] == "EXPIRED" and "ttl" in e["reason"], e
assert "EXPIRED" in c.err("renew", "ENOENT", reservation=r["id"])
p = c.ok("reserve", bytes_per_gpu=1)["reservation"]
assert "not a ttl" in c.err("renew", "EINVAL", reservation=p["id"])
c.ok("release", reservation=p["id"])
' || t_fail "ttl lease"
gd_py 'Client().ok("reserve", bytes_per_gpu="1GiB", lease="ttl", ttl_ms=200)' || t_fail "ttl reserve"
live 0 || t_fail "abandoned ttl lease did not expire"
t_ok "ttl lease: renew keeps it, expiry ends it"

# Unmanaged memory and pressure: a foreign process takes 75 GiB of device 0.
gd_py '
c = Client()
r = c.ok("reserve", bytes_per_gpu="1GiB", devices=["0"])["reservation"]
assert r["state"] == "GRANTED" and r["devices"][0]["index"] == 0, r
open(args[0], "w").write("x\n")
ev = c.wait_event("pressure", timeout=10)
assert ev["device"] == 0 and ev["level"] in ("high", "critical") and ev["used_ratio"] > 0.9, ev
deadline = time.monotonic() + 10
while c.ok("status")["devices"][0]["unmanaged"] < 75 * 2**30:
    assert time.monotonic() < deadline, "unmanaged memory not seen: %r" % c.ok("status")
q = c.ok("reserve", bytes_per_gpu="10GiB", devices=["0"])["reservation"]
assert q["state"] == "QUEUED", q
c.ok("release", reservation=q["id"])
c.ok("release", reservation=r["id"])
' "$T_SCRATCH/holdready" &
holder=$!
t_wait_file "$T_SCRATCH/holdready"
"$GPUM_BIN" sim hold "$GPUM_SIM_NODE" --device 0 --bytes 75GiB >/dev/null || t_fail "sim hold"
wait "$holder" || t_fail "unmanaged/pressure"
t_ok "unmanaged memory limits grants; pressure event"

# Device loss: XID 79 on device 1 fails its reservation.
gd_py '
c = Client()
r = c.ok("reserve", bytes_per_gpu="5GiB", devices=["1"])["reservation"]
assert r["state"] == "GRANTED", r
open(args[0], "w").write("x\n")
f = c.wait_event("failed", r["id"], timeout=15)["reservation"]
assert f["state"] == "FAILED" and f["reason"], f
d1 = c.ok("status")["devices"][1]
assert d1["state"] == "ERROR" and d1["reserved"] == 0, d1
q = c.ok("reserve", bytes_per_gpu="5GiB", devices=["1"])["reservation"]
assert q["state"] == "QUEUED", q
' "$T_SCRATCH/lossready" &
loser=$!
t_wait_file "$T_SCRATCH/lossready"
"$GPUM_BIN" sim inject "$GPUM_SIM_NODE" --device 1 --xid 79 >/dev/null || t_fail "sim inject"
wait "$loser" || t_fail "device loss"
t_ok "XID 79: reservations on the device FAILED with an event"

# SIGHUP reload.
gd_py 'c = Client(); open(args[0], "w").write(str(c.ok("status")["devices"][0]["capacity"]))' "$T_SCRATCH/cap1"
printf 'memory_fraction: 0.5\nmonitor:\n  interval: 50ms\n' >"$cfg"
kill -HUP "$GD_PID"
gd_py '
c, cap1, deadline = Client(), int(open(args[0]).read()), time.monotonic() + 10
while c.ok("status")["devices"][0]["capacity"] > cap1 * 0.6:
    assert time.monotonic() < deadline, "capacity still %r" % c.ok("status")["devices"][0]
' "$T_SCRATCH/cap1" || t_fail "SIGHUP did not reload memory_fraction"
printf 'memory_fraction: 7\n' >"$cfg"
kill -HUP "$GD_PID"
t_until 10 grep -q "reload failed" "$GD_ERR" || t_fail "a bad reload was not reported"
gd_py 'Client().ok("hello")' || t_fail "gpumd died on a bad reload"
t_ok "SIGHUP reloads; a bad file keeps the old configuration"

gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "exit $GD_RC"
