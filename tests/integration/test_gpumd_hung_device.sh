#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One GPU whose driver calls hang must not keep gpumd from starting: with device 1 slowed to
# 60 s per NVML call (a hang, for this test) before gpumd starts and monitor.start_timeout 2s,
# gpumd is ready well before the hang ends, a grant recovered from the ledger on the silent
# device is FAILED with a clear reason, new reservations land on device 0, and status shows
# device 1 as ERROR "no answer since gpumd started", and memory held outside gpumd on device 0
# is still counted (process lists are read per device). Once the fault is cleared, device 1
# answers, gets its UUID and becomes usable: a 2-GPU reservation is granted.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
export GPUM_MONITOR_START_TIMEOUT=2s

# A grant on device 1, kept in the ledger across a crash (ttl lease).
gd_start
U1=$(gd_py '
c = Client()
u1 = c.ok("status")["devices"][1]["uuid"]
r = c.ok("reserve", bytes_per_gpu="1GiB", devices=[u1], lease="ttl", ttl_ms=600000)
r = r["reservation"]
assert r["id"] == "r-1" and r["state"] == "GRANTED" and r["devices"][0]["index"] == 1, r
print(u1)
') || t_fail "reserve on device 1"
gd_stop KILL

"$GPUM_BIN" sim inject "$T_NODE" --device 1 --slow 60000 >/dev/null || t_fail "sim inject --slow"
t0=$(date +%s%N)
gd_start
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$ms" -lt 15000 ] || t_fail "gpumd took $ms ms to be ready with a hung device"
if ! grep -q "device 1 did not answer within monitor.start_timeout" "$GD_ERR"; then
  cat "$GD_ERR" >&2
  t_fail "no warning about the silent device"
fi
t_ok "gpumd is ready in $ms ms with device 1 hung (monitor.start_timeout 2s)"

gd_py '
c = Client()
d = c.ok("status")["devices"]
assert d[1]["state"] == "ERROR" and d[1]["reason"] == "no answer since gpumd started", d[1]
assert d[0]["state"] == "AVAILABLE" and d[0]["uuid"].startswith("GPU-"), d[0]
msg = c.err("release", "ENOENT", reservation="r-1")
assert "FAILED (device %s not found after restart" % args[0] in msg, msg
assert "did not answer within monitor.start_timeout" in msg, msg
r = c.ok("reserve", bytes_per_gpu="1GiB")["reservation"]
assert r["state"] == "GRANTED" and [x["index"] for x in r["devices"]] == [0], r
' "$U1" || t_fail "while device 1 is silent"
t_ok "device 1 is ERROR with its reason, its recovered grant FAILED, a reserve lands on device 0"

# Memory taken on device 0 by a process without a reservation still counts while device 1
# hangs: each device's process list is read on a thread of its own.
holder=$("$GPUM_BIN" sim hold "$T_NODE" --device 0 --bytes 20GiB) || t_fail "sim hold"
gd_py '
c, deadline = Client(), time.monotonic() + 15
while c.ok("status")["devices"][0]["unmanaged"] < 20 * 2**30:
    assert time.monotonic() < deadline, "unmanaged memory of device 0 not seen: %r" % c.ok("status")
    time.sleep(0.05)
' || t_fail "unmanaged memory while device 1 hangs"
kill "$holder" 2>/dev/null
t_ok "memory held outside gpumd on device 0 is seen while device 1 hangs"

"$GPUM_BIN" sim clear "$T_NODE" --device 1 >/dev/null || t_fail "sim clear"
# usable: polls gpumd's status until device 1 has its UUID back and is AVAILABLE.
usable() {
  gd_py '
d = Client().ok("status")["devices"][1]
assert d["uuid"] == args[0] and d["state"] == "AVAILABLE", d
' "$U1"
}
if ! t_until 30 usable; then
  gd_py 'print(Client().ok("status")["devices"][1])'
  t_fail "device 1 not usable 30 s after the fault was cleared"
fi
gd_py '
c = Client()
r = c.ok("reserve", bytes_per_gpu="1GiB", gpus=2)["reservation"]
assert r["state"] == "GRANTED" and sorted(x["index"] for x in r["devices"]) == [0, 1], r
assert r["devices"][1]["uuid"] == args[0] or r["devices"][0]["uuid"] == args[0], r
' "$U1" || t_fail "2-GPU reserve after device 1 answered"
t_ok "after the fault is cleared device 1 answers and a 2-GPU reserve is granted"

gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exit $GD_RC"
