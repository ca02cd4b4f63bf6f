#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpumd reservations on a simulated 2xH100 node: grant, queue with position and "granted"
# event when capacity frees, release (a queued one is CANCELLED), never-fit rejection at once
# (too big, too many GPUs, no matching model), list (own / all), and connection leases: a
# client that exits or is SIGKILLed loses its reservations.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start

gd_py '
a, b = Client(), Client()
r1 = a.ok("reserve", bytes_per_gpu="60GiB", gpus=2, label="big")["reservation"]
assert r1["state"] == "GRANTED" and len(r1["devices"]) == 2 and len(r1["token"]) == 32, r1
r2 = b.ok("reserve", bytes_per_gpu="30GiB", label="waiter", priority=5)["reservation"]
assert r2["state"] == "QUEUED" and r2["queue_position"] == 0 and r2["waiting_for"], r2
st = a.ok("status")
assert st["devices"][0]["reserved"] == 60 * 2**30 and r1["id"] in st["devices"][1]["reservations"], st
assert [q["id"] for q in st["queue"]] == [r2["id"]], st

for req, word in ((dict(bytes_per_gpu="100GiB"), "100.00 GiB"), (dict(bytes_per_gpu=1, gpus=3), "3"),
                  (dict(bytes_per_gpu=1, model="A100*"), "A100"), (dict(bytes_per_gpu=1, devices=["7"]), "7")):
    msg = a.err("reserve", "ENEVERFIT", **req)
    assert word in msg, (req, msg)
assert a.ok("status")["node"]["queued"] == 1, "a never-fit request was queued"

mine = a.ok("list")["reservations"]  # the same uid owns both
assert [r["id"] for r in mine] == [r1["id"], r2["id"]] and mine[0]["token"] == r1["token"], mine
a.err("list", "EINVAL", all="yes")

rel = a.ok("release", reservation=r1["id"])["reservation"]
assert rel["state"] == "RELEASED" and rel["ended_ns"] > 0, rel
g = b.wait_event("granted", r2["id"])["reservation"]
assert g["state"] == "GRANTED" and len(g["devices"]) == 1, g
assert not a.events, "the releasing client got an event for its own release: %r" % a.events
a.err("release", "ENOENT", reservation=r1["id"])

# A queued reservation released is CANCELLED.
r3 = a.ok("reserve", bytes_per_gpu="70GiB", gpus=2)["reservation"]
assert r3["state"] == "QUEUED", r3
assert a.ok("release", reservation=r3["id"])["reservation"]["state"] == "CANCELLED"
b.ok("release", reservation=r2["id"])
assert a.ok("status")["devices"][0]["reserved"] == 0
' || t_fail "reserve/queue/release"
t_ok "grant, queue + granted event, release, cancel, never-fit, list"

# Connection leases: a client that exits, and one that is SIGKILLed.
# count_live N: waits up to 10 s until exactly N reservations are live.
count_live() {
  gd_py '
c, deadline = Client(), time.monotonic() + 10
while len(c.ok("list", all=True)["reservations"]) != int(args[0]):
    assert time.monotonic() < deadline, "live reservations: %r" % c.ok("list", all=True)
' "$1"
}
gd_py 'c = Client(); r = c.ok("reserve", bytes_per_gpu="1GiB")["reservation"]; assert r["state"] == "GRANTED"' \
  || t_fail "reserve in an exiting client"
count_live 0 || t_fail "reservation of an exited client not released"
t_ok "client exit releases its connection-bound reservation"

fifo="$T_SCRATCH/held"
holder_py=$(gd_pyfile holder '
c = Client()
r = c.ok("reserve", bytes_per_gpu="2GiB", gpus=2)["reservation"]
assert r["state"] == "GRANTED"
open(args[0], "w").write(r["id"] + "\n")
signal.pause()
')
python3 "$holder_py" "$fifo" &
holder=$!
T_PIDS+=("$holder")
t_wait_file "$fifo"
count_live 1 || t_fail "held reservation missing"
kill -9 "$holder"
wait "$holder" 2>/dev/null || true
count_live 0 || t_fail "reservation of a SIGKILLed client not released"
t_ok "SIGKILL of the client releases its reservation"

gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "exit $GD_RC"
