#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A slow device is not a lost one (docs/monitoring.md, "Health states"): GPU 1's driver calls
# slowed past the monitor's watchdog make it ERROR ("driver call hung"), but the reservation on
# it stays GRANTED (its job may still be running) and nothing new is granted there; once the
# calls are fast again it recovers with the reservation intact. Evidence that the GPU is gone
# (Xid 79, fallen off the bus) then FAILs the reservation.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
export GPUM_MONITOR_INTERVAL=200ms # watchdog: 2 s
gd_start

R=$(gd_py '
r = Client().ok("reserve", bytes_per_gpu="1GiB", devices=["1"], lease="ttl", ttl_ms=600000)
print(r["reservation"]["id"])
') || t_fail "reserve on GPU 1"

# device_is INDEX STATE [REASON-PART]: gpumd's status says so.
device_is() {
  gd_py '
d = [x for x in Client().ok("status")["devices"] if x["index"] == int(args[0])][0]
sys.exit(0 if d["state"] == args[1] and args[2] in d["reason"] else 1)
' "$1" "$2" "${3:-}"
}
resv_state() {
  gd_py 'print([x for x in Client().ok("list", all=True)["reservations"] if x["id"] == args[0]][0]["state"])' "$1"
}

"$GPUM_BIN" sim inject "$T_NODE" --device 1 --slow 4000 >/dev/null || t_fail "sim inject --slow"
t_until 60 device_is 1 ERROR "hung" || t_fail "GPU 1 did not go to ERROR for its hung calls"
[ "$(resv_state "$R")" = GRANTED ] || t_fail "$R is $(resv_state "$R") while GPU 1 is only slow"
gd_py '
r = Client().call("reserve", bytes_per_gpu="1GiB", devices=["1"], wait=False, lease="ttl",
                  ttl_ms=60000)
assert not r.get("ok"), r
' || t_fail "a new grant on the slow GPU"
t_ok "GPU 1 slow past the watchdog: ERROR, its reservation still GRANTED, nothing new on it"

"$GPUM_BIN" sim clear "$T_NODE" --device 1 >/dev/null || t_fail "sim clear"
t_until 60 device_is 1 AVAILABLE || t_fail "GPU 1 did not recover"
[ "$(resv_state "$R")" = GRANTED ] || t_fail "$R is $(resv_state "$R") after the recovery"
t_ok "recovered, the reservation intact"

"$GPUM_BIN" sim inject "$T_NODE" --device 1 --xid 79 >/dev/null || t_fail "sim inject --xid 79"
resv_gone() {
  gd_py 'sys.exit(1 if [x for x in Client().ok("list", all=True)["reservations"] if x["id"] == args[0]] else 0)' "$1"
}
t_until 30 resv_gone "$R" || t_fail "$R still live after Xid 79"
t_ok "Xid 79 (gone): the reservation FAILED"
