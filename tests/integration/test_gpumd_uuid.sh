#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Grants follow the physical devices (ledger schema 3 stores their UUIDs): gpumd restarts on a
# node whose devices are numbered the other way round, and each reservation is still on the
# device with its UUID (now another index), with the accounting to match; restarted on a node
# where one device is gone, that device's reservation is FAILED ("device GPU-... gone after
# restart") and the other one stays.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

UA=GPU-aaaaaaaa-1111-2222-3333-000000000001
UB=GPU-bbbbbbbb-1111-2222-3333-000000000002
# spec FILE UUID...: a node with one 80 GiB device per UUID, in that order.
spec() {
  local f=$1 u
  shift
  printf 'name: uuidnode\ndevices:\n' >"$f"
  for u in "$@"; do
    printf '  - name: "NVIDIA H100 80GB HBM3"\n    memory: 80GiB\n    uuid: %s\n' "$u" >>"$f"
  done
}
spec "$T_SCRATCH/ab.yaml" "$UA" "$UB"
spec "$T_SCRATCH/ba.yaml" "$UB" "$UA"
spec "$T_SCRATCH/a.yaml" "$UA"
# restart_on SPEC: stops gpumd (SIGKILL) and the node, starts the node from SPEC (same name)
# and gpumd again.
restart_on() {
  gd_stop KILL
  "$GPUM_BIN" sim stop "$T_NODE" >/dev/null || t_fail "sim stop"
  "$GPUM_BIN" sim start "$1" --name "$T_NODE" >/dev/null || t_fail "sim start $1"
  gd_start
}

t_sim_start "$T_SCRATCH/ab.yaml"
gd_start
gd_py '
c = Client()
b = c.ok("reserve", bytes_per_gpu="10GiB", devices=[args[1]], lease="ttl", ttl_ms=600000)
a = c.ok("reserve", bytes_per_gpu="20GiB", devices=[args[0]], lease="ttl", ttl_ms=600000)
G = 80 * 2**30  # every device of the spec: memory_total in the grant
assert b["reservation"]["devices"] == [{"index": 1, "uuid": args[1], "memory_total": G, "vendor": "nvidia", "vendor_index": 1}], b
assert a["reservation"]["devices"] == [{"index": 0, "uuid": args[0], "memory_total": G, "vendor": "nvidia", "vendor_index": 0}], a
' "$UA" "$UB" || t_fail "reserve"

restart_on "$T_SCRATCH/ba.yaml"
gd_py '
c = Client()
live = {r["id"]: r for r in c.ok("list")["reservations"]}
ref = lambda r: [(d["index"], d["uuid"]) for d in r["devices"]]
assert ref(live["r-1"]) == [(0, args[1])], live
assert ref(live["r-2"]) == [(1, args[0])], live
assert all(r["state"] == "GRANTED" for r in live.values()), live
devs = {d["uuid"]: d for d in c.ok("status")["devices"]}
assert devs[args[1]]["index"] == 0 and devs[args[1]]["reserved"] == 10 * 2**30, devs
assert devs[args[0]]["index"] == 1 and devs[args[0]]["reserved"] == 20 * 2**30, devs
assert devs[args[1]]["reservations"] == ["r-1"] and devs[args[0]]["reservations"] == ["r-2"]
' "$UA" "$UB" || t_fail "after renumbering"
t_ok "a renumbered node keeps each grant on its physical device"

restart_on "$T_SCRATCH/a.yaml"
gd_py '
c = Client()
live = c.ok("list")["reservations"]
assert [r["id"] for r in live] == ["r-2"], live
assert [(d["index"], d["uuid"]) for d in live[0]["devices"]] == [(0, args[0])], live
msg = c.err("release", "ENOENT", reservation="r-1")
assert msg.endswith("already ended: FAILED (device %s gone after restart)" % args[1]), msg
st = c.ok("status")["devices"]
assert len(st) == 1 and st[0]["reserved"] == 20 * 2**30, st
' "$UA" "$UB" || t_fail "after a device is gone"
t_ok "a grant on a device that is gone after the restart is FAILED"
gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exit $GD_RC"
