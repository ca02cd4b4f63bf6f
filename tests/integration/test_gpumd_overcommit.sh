#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Admission never overcommits a GPU (docs/operations.md, "Admission"): gpumd decides each grant
# on the devices read afresh, not on the monitor's last round (monitor.interval is 1 minute
# here, so a decision on a sample would see nothing of what outside processes took).
#   1. The plain case, 5 times: an outside process takes 10 GiB on each of two H100s, then a
#      70 GiB --no-wait reserve is refused (65.75 GiB left under each GPU's 75.75 GiB capacity);
#      once the holders are gone the same request is granted.
#   2. Outside holders against reservations, 20 rounds of random sizes: a holder takes X on GPU
#      0, then a reserve asks exactly what is left (granted) or one byte more (refused), by the
#      simulator's own count of what is used; no grant ever passes the capacity by a byte.
#   3. A queued request that a release lets in is decided afresh too: a holder that appeared
#      while it waited keeps it queued.
#   4. What admission cannot prevent is seen: an outside process that grows after the grants
#      puts GPU 0 over its capacity; gpumd's documents say OVERCOMMITTED with by how much, gpum
#      status shows it, /metrics has gpum_device_overcommitted 1, an alert names the process,
#      the device's pressure is high; all of it clears when the process leaves.
#   5. Capacity is never more than the driver hands out: with memory_fraction 1 and
#      safety_margin 0 it is total - the driver's reserved memory, and the whole total is
#      refused as never fitting, saying why.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

export GPUM_MONITOR_INTERVAL=60s
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start
GiB=$((1 << 30))

# jq-free readers of gpum's and the simulator's JSON.
gpumd_dev() { # FIELD INDEX: gpumd's view of a device (capacity, committed, ...)
  "$GPUM_BIN" status --json | python3 -c 'import json,sys
d = json.load(sys.stdin)["gpumd"]["devices"]
print([x for x in d if x["index"] == int(sys.argv[2])][0][sys.argv[1]])' "$1" "$2"
}
sim_used() { # INDEX: what the simulator says is used on the device (every process)
  "$GPUM_BIN" sim status "$T_NODE" --json | python3 -c 'import json,sys
print(json.load(sys.stdin)["devices"][int(sys.argv[1])]["memory"]["used"])' "$1"
}
hold() { # DEVICE BYTES: starts an outside holder (its memory accounted when this returns)
  local pid
  pid=$("$GPUM_BIN" sim hold "$T_NODE" --device "$1" --bytes "$2") || t_fail "sim hold $*"
  T_PIDS+=("$pid")
  echo "$pid"
}
unhold() { # PID...: the holders end; waits until the simulator no longer counts them
  local p
  for p in "$@"; do kill "$p" 2>/dev/null || true; done
  for p in "$@"; do t_until 10 bash -c "! kill -0 $p 2>/dev/null" || t_fail "holder $p lives"; done
  t_until 10 bash -c "[ \"\$(\"$GPUM_BIN\" sim status $T_NODE --json | python3 -c 'import json,sys
print(sum(x[\"memory\"][\"used\"] for x in json.load(sys.stdin)[\"devices\"]))')\" = 0 ]" ||
    t_fail "the simulator still counts held memory"
}

CAP=$(gpumd_dev capacity 0)
[ "$CAP" -eq $((75 * GiB + 3 * GiB / 4)) ] || t_fail "capacity $CAP, expected 75.75 GiB"

# 1. The plain case (--ttl: a wrong grant returns rather than holding in the foreground).
for i in 1 2 3 4 5; do
  p0=$(hold 0 10GiB)
  p1=$(hold 1 10GiB)
  t_expect 1 "$GPUM_BIN" reserve --mem 70GiB --no-wait --ttl 1m -q
  grep -q "would wait for" "$T_ERR" || t_fail "round $i: $(cat "$T_ERR")"
  unhold "$p0" "$p1"
done
t_expect 0 "$GPUM_BIN" reserve --mem 70GiB --no-wait --ttl 1m -q
ID=$(cat "$T_OUT")
t_expect 0 "$GPUM_BIN" release "$ID"
t_ok "70 GiB refused beside 10 GiB held outside on each GPU (5 of 5), granted without them"

# reserve_on0 BYTES: a --no-wait request for BYTES on GPU 0 (ttl lease); prints "ok ID" or
# "busy MESSAGE".
reserve_on0() {
  gd_py '
r = Client().call("reserve", bytes_per_gpu=int(args[0]), devices=["0"], wait=False,
                  lease="ttl", ttl_ms=60000)
print("ok " + r["reservation"]["id"] if r.get("ok") else "busy " + r["error"]["message"])
' "$1"
}

# 2. Holders against reservations, at the byte (one python for the rounds: it starts each
#    holder with gpum sim hold, reads the simulator's count, reserves through the socket).
gd_py '
import random, signal, subprocess
gpum, node, cap = os.environ["GPUM_BIN"], args[0], int(args[1])
rng = random.Random(7)
def used():
    st = json.loads(subprocess.run([gpum, "sim", "status", node, "--json"], check=True,
                                   capture_output=True, text=True).stdout)
    return st["devices"][0]["memory"]["used"]
c = Client()
for rnd in range(20):
    x = rng.randrange(1 << 30, 60 << 30, 4096)
    pid = int(subprocess.run([gpum, "sim", "hold", node, "--device", "0", "--bytes", str(x)],
                             check=True, capture_output=True, text=True).stdout)
    u = used()
    ask = cap - u + (1 if rnd % 2 else 0)
    r = c.call("reserve", bytes_per_gpu=ask, devices=["0"], wait=False, lease="ttl",
               ttl_ms=60000)
    if rnd % 2:
        assert not r.get("ok"), "round %d: %d bytes beside %d used granted: %r" % (rnd, ask, u, r)
    else:
        assert r.get("ok"), "round %d: %d bytes beside %d used refused: %r" % (rnd, ask, u, r)
        dev = [d for d in c.ok("status")["devices"] if d["index"] == 0][0]
        assert dev["committed"] == cap, "round %d: committed %d, capacity %d" % (
            rnd, dev["committed"], cap)
        c.ok("release", reservation=r["reservation"]["id"])
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while used() != 0:
        assert time.monotonic() < deadline, "holder %d still counted" % pid
        time.sleep(0.01)
' "$T_NODE" "$CAP" || t_fail "outside holders against reservations"
t_ok "20 rounds of outside holders: exactly what was left granted, one byte more refused"

# 3. A release lets a queued request in only if it still fits as the devices are now.
read -r what A < <(reserve_on0 $((70 * GiB)))
[ "$what" = ok ] || t_fail "70 GiB on GPU 0: $what $A"
B=$(gd_py '
r = Client().ok("reserve", bytes_per_gpu="40GiB", devices=["0"], lease="ttl",
                ttl_ms=60000)["reservation"]
assert r["state"] == "QUEUED", r
print(r["id"])
') || t_fail "a queued 40 GiB request"
p=$(hold 0 50GiB) # taken outside while it waits: 75.75 - 50 < 40 once A is released
t_expect 0 "$GPUM_BIN" release "$A"
state_of() {
  "$GPUM_BIN" jobs --all --json | python3 -c 'import json,sys
print([x for x in json.load(sys.stdin)["reservations"] if x["id"] == sys.argv[1]][0]["state"])' "$1"
}
[ "$(state_of "$B")" = QUEUED ] || t_fail "the release granted $B beside 50 GiB held outside"
unhold "$p"
# gpumd sees the holder gone at its next read of the device: a request's, here.
read -r what C < <(reserve_on0 1)
[ "$what" = ok ] || t_fail "1 byte: $what $C"
[ "$(state_of "$B")" = GRANTED ] || t_fail "$B not granted once the holder left"
t_expect 0 "$GPUM_BIN" release "$B" "$C"
t_ok "a release grants what waits only if it fits the devices as they are now"

# 4. Overcommitted after the grant.
read -r what A < <(reserve_on0 $((70 * GiB)))
[ "$what" = ok ] || t_fail "70 GiB on GPU 0: $what $A"
p=$(hold 0 10GiB) # 70 + 10 > 75.75: taken after the grant
read -r what C < <(reserve_on0 1) # a request: gpumd reads the devices (refused: no room)
[ "$what" = busy ] || t_fail "1 byte on an overcommitted GPU: $what $C"
"$GPUM_BIN" status --json >"$T_OUT"
python3 -c 'import json,sys
d = [x for x in json.load(open(sys.argv[1]))["gpumd"]["devices"] if x["index"] == 0][0]
over = d["committed"] - d["capacity"]
assert d["state"] == "OVERCOMMITTED" and d["overcommit"] == over == (17 << 28), d
assert "4.25 GiB over its capacity of 75.75 GiB" in d["reason"] and d["pressure"] == "high", d
' "$T_OUT" || t_fail "gpumd's device document: $(cat "$T_OUT")"
t_expect 0 "$GPUM_BIN" status --no-color
grep -q '^\[0\] .* OVERCOMMITTED' "$T_OUT" && grep -q "gpumd: OVERCOMMITTED: committed 80.00 GiB" "$T_OUT" ||
  t_fail "gpum status: $(cat "$T_OUT")"
curl -sf "http://$(sed -n 's/.*http=\([^ ]*\).*/\1/p' "$T_SCRATCH"/gpumd.out.* | tail -1)/metrics" >"$T_OUT" ||
  t_fail "GET /metrics"
grep -q '^gpum_device_overcommitted{gpu="0",.*} 1$' "$T_OUT" &&
  grep -q '^gpum_device_overcommit_bytes{gpu="0",.*} 4563402752$' "$T_OUT" &&
  grep -q '^gpum_device_overcommitted{gpu="1",.*} 0$' "$T_OUT" || t_fail "/metrics: $(grep overcommit "$T_OUT")"
t_expect 0 "$GPUM_BIN" alerts --json
python3 -c 'import json,sys
a = [x for x in json.load(open(sys.argv[1]))["active"] if x.get("metric") == "overcommitted"]
assert len(a) == 1 and a[0]["device"] == 0 and a[0]["level"] == "WARNING", a
assert "pid %s " % sys.argv[2] in a[0]["message"] and "10.00 GiB" in a[0]["message"], a
' "$T_OUT" "$p" || t_fail "the overcommit alert: $(cat "$T_OUT")"
unhold "$p"
read -r what C < <(reserve_on0 1) # gpumd reads the devices again
[ "$what" = ok ] || t_fail "1 byte once the holder left: $what $C"
"$GPUM_BIN" status --json >"$T_OUT"
python3 -c 'import json,sys
d = [x for x in json.load(open(sys.argv[1]))["gpumd"]["devices"] if x["index"] == 0][0]
assert d["state"] == "AVAILABLE" and d["overcommit"] == 0, d' "$T_OUT" || t_fail "not cleared"
t_expect 0 "$GPUM_BIN" alerts --json
python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
assert not [x for x in d["active"] if x.get("metric") == "overcommitted"], d["active"]
assert [x for x in d["history"] if x.get("metric") == "overcommitted" and x["state"] == "cleared"]
' "$T_OUT" || t_fail "the overcommit alert did not clear: $(cat "$T_OUT")"
t_expect 0 "$GPUM_BIN" release "$A" "$C"
t_ok "an outside process grown after the grant: OVERCOMMITTED in status and /metrics, alerted, cleared"

# 5. Capacity: total - the driver's reserved memory at most.
gd_stop TERM
gd_start --memory-fraction 1 --safety-margin 0
CAP=$(gpumd_dev capacity 0)
"$GPUM_BIN" status --json >"$T_OUT"
read -r total reserved < <(python3 -c 'import json,sys
m = json.load(open(sys.argv[1]))["gpumd"]["devices"][0]["memory"]
print(m["total"], m["driver_reserved"])' "$T_OUT")
[ "$reserved" -gt 0 ] && [ "$CAP" -eq $((total - reserved)) ] ||
  t_fail "capacity $CAP with total $total and $reserved reserved by the driver"
t_expect 1 "$GPUM_BIN" reserve --mem 80GiB --no-wait --ttl 1m -q
grep -q "the driver keeps" "$T_ERR" || t_fail "80 GiB: $(cat "$T_ERR")"
read -r what id < <(reserve_on0 "$CAP")
[ "$what" = ok ] || t_fail "the whole capacity $CAP: $what $id"
t_ok "capacity is total - the driver's reserved memory; 80 GiB never fits and says why"
