#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpumd restart recovery of pid and ttl leases: after a SIGKILL of gpumd, a pid lease whose
# process lives is kept (and still ends when that process exits later), one whose process
# died meanwhile is released, a ttl lease before its deadline is kept (and renewable), one
# past it expires; new ids continue above the old ones.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start
sleep 600 &
alive=$!
T_PIDS+=("$alive")
sleep 600 &
doomed=$!
T_PIDS+=("$doomed")

gd_py '
c = Client()
ids = {}
ids["alive"] = c.ok("reserve", bytes_per_gpu="1GiB", lease="pid", pid=int(args[1]))["reservation"]["id"]
ids["doomed"] = c.ok("reserve", bytes_per_gpu="1GiB", lease="pid", pid=int(args[2]))["reservation"]["id"]
ids["long"] = c.ok("reserve", bytes_per_gpu="1GiB", lease="ttl", ttl_ms=600000)["reservation"]["id"]
short = c.ok("reserve", bytes_per_gpu="1GiB", lease="ttl", ttl_ms=400)["reservation"]
ids["short"] = short["id"]
ids["short_expires"] = short["expires_ns"]
json.dump(ids, open(args[0], "w"))
' "$T_SCRATCH/ids" "$alive" "$doomed" || t_fail "reserve"
kill -9 "$GD_PID"
wait "$GD_PID" 2>/dev/null || true
kill -9 "$doomed"
wait "$doomed" 2>/dev/null || true
# Let the short ttl pass while gpumd is down (the behaviour under test is time passing).
gd_py '
ids = json.load(open(args[0]))
while time.time_ns() <= ids["short_expires"]:
    time.sleep(0.05)
' "$T_SCRATCH/ids"
gd_start
gd_py '
ids = json.load(open(args[0]))
c = Client()
live = {r["id"]: r for r in c.ok("list", all=True)["reservations"]}
assert set(live) == {ids["alive"], ids["long"]}, live
assert "EXPIRED" in c.err("renew", "ENOENT", reservation=ids["short"])
assert "RELEASED" in c.err("release", "ENOENT", reservation=ids["doomed"])
n = c.ok("renew", reservation=ids["long"])["reservation"]
assert n["state"] == "GRANTED", n
new = c.ok("reserve", bytes_per_gpu=1)["reservation"]["id"]
assert int(new[2:]) > max(int(ids[k][2:]) for k in ("alive", "doomed", "long", "short")), new
st = c.ok("status")
assert sum(d["reserved"] for d in st["devices"]) == 2 * 2**30 + 1, st["devices"]
' "$T_SCRATCH/ids" || t_fail "after restart"
t_ok "restart: live pid and ttl leases kept, dead pid released, past ttl expired, ids continue"

kill -9 "$alive"
wait "$alive" 2>/dev/null || true
gd_py '
ids = json.load(open(args[0]))
c, deadline = Client(), time.monotonic() + 10
while ids["alive"] in [r["id"] for r in c.ok("list", all=True)["reservations"]]:
    assert time.monotonic() < deadline, "restored pid lease not released when its pid exited"
' "$T_SCRATCH/ids" || t_fail "restored pid lease"
t_ok "a restored pid lease still ends when its process exits"
gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "exit $GD_RC"
