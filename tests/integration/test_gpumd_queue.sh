#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpumd's queue through the daemon (the scheduler's own rules are unit-tested in test_sched):
# priorities order the queue and clients are told when their position moves ("queued");
# queue timeouts expire (reject) or notify and keep waiting (wait); freed memory grants the
# highest priority first; max_concurrent_jobs limits grants per device.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start

gd_py '
a, b, c, d = Client(), Client(), Client(), Client()
a1 = a.ok("reserve", bytes_per_gpu="70GiB", devices=["0"])["reservation"]
a2 = a.ok("reserve", bytes_per_gpu="70GiB", devices=["1"])["reservation"]
assert a1["state"] == a2["state"] == "GRANTED"
rb = b.ok("reserve", bytes_per_gpu="40GiB", devices=["0"], label="low")["reservation"]
assert rb["state"] == "QUEUED" and rb["queue_position"] == 0, rb
rc = c.ok("reserve", bytes_per_gpu="40GiB", devices=["0"], priority=10, label="high")["reservation"]
assert rc["state"] == "QUEUED" and rc["queue_position"] == 0, rc
moved = b.wait_event("queued", rb["id"])["reservation"]
assert moved["queue_position"] == 1, moved

# Queue timeouts: reject -> expired; wait -> one "queued" notice, still queued.
rd = d.ok("reserve", bytes_per_gpu="10GiB", devices=["0"], timeout_ms=150, on_timeout="reject")["reservation"]
rw = d.ok("reserve", bytes_per_gpu="10GiB", devices=["0"], timeout_ms=150, on_timeout="wait")["reservation"]
assert rd["state"] == rw["state"] == "QUEUED", (rd, rw)
e = d.wait_event("expired", rd["id"])["reservation"]
assert e["state"] == "EXPIRED", e
deadline = time.monotonic() + 10
while True:
    w = d.wait_event("queued", rw["id"], timeout=10)["reservation"]
    if w["state"] == "QUEUED" and "timeout" in w["reason"]:
        break
    assert time.monotonic() < deadline, w
assert [r["id"] for r in a.ok("status")["queue"]] == [rc["id"], rb["id"], rw["id"]]
d.ok("release", reservation=rw["id"])

# Freed memory: the high-priority request gets it, the low one moves up.
a.ok("release", reservation=a1["id"])
g = c.wait_event("granted", rc["id"])["reservation"]
assert g["devices"][0]["index"] == 0, g
up = b.wait_event("queued", rb["id"])["reservation"]
assert up["state"] == "QUEUED" and up["queue_position"] == 0 and up["waiting_for"], up
for cl in (a, b, c):
    assert not any(ev["event"] == "granted" and ev["reservation"]["id"] == rb["id"] for ev in cl.events)

# Who is told when one leaves from the middle: those behind it move up, those ahead do not.
e, f = Client(), Client()
re1 = e.ok("reserve", bytes_per_gpu="40GiB", devices=["0"])["reservation"]
rf = f.ok("reserve", bytes_per_gpu="40GiB", devices=["0"])["reservation"]
assert (re1["queue_position"], rf["queue_position"]) == (1, 2), (re1, rf)
b.events.clear()
e.ok("release", reservation=re1["id"])
moved = f.wait_event("queued", rf["id"])["reservation"]
assert moved["queue_position"] == 1, moved
b.ok("status")  # its reply follows every event of the turns before it
assert not any(ev["event"] == "queued" for ev in b.events), b.events
f.ok("release", reservation=rf["id"])
' || t_fail "priorities and timeouts"
t_ok "priority order, position events, timeouts reject and wait, grant on release"
gd_stop TERM

gd_start --max-concurrent-jobs 1 --placement spread
gd_py '
a, b = Client(), Client()
r1 = a.ok("reserve", bytes_per_gpu="1GiB")["reservation"]
r2 = a.ok("reserve", bytes_per_gpu="1GiB")["reservation"]
assert r1["state"] == r2["state"] == "GRANTED", (r1, r2)
assert {r1["devices"][0]["index"], r2["devices"][0]["index"]} == {0, 1}, (r1, r2)
r3 = b.ok("reserve", bytes_per_gpu="1GiB")["reservation"]
assert r3["state"] == "QUEUED", r3
a.ok("release", reservation=r2["id"])
g = b.wait_event("granted", r3["id"])["reservation"]
assert g["devices"][0]["index"] == r2["devices"][0]["index"], g
' || t_fail "max_concurrent_jobs"
t_ok "max_concurrent_jobs limits grants per device; spread placement"
gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "exit $GD_RC"
