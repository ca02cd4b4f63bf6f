# SPDX-License-Identifier: Apache-2.0
# `gpum sim`: the example specs start, bad specs are refused with their line number, bad input
# gets a clear error with exit code 1 (usage errors 2) and changes nothing, --help everywhere.
source "$(dirname "$0")/lib.sh"
C="$GPUM_TEST_PROGS/sim_client"
S=$T_SCRATCH
G="$GPUM_BIN"
EX="$GPUM_SOURCE_DIR/examples/sim"

# expect CODE PATTERN CMD...: CMD exits with CODE and its stderr matches PATTERN.
expect() {
  local code=$1 pat=$2 rc=0
  shift 2
  "$@" >"$S/out" 2>"$S/err" || rc=$?
  [ "$rc" = "$code" ] || t_fail "'$*' exited $rc, expected $code: $(cat "$S/err")"
  grep -qE -- "$pat" "$S/err" "$S/out" || t_fail "'$*': no '$pat' in: $(cat "$S/err")"
}

for spec in h100x2:2 a100x8:8 mixed-t4-v100:4; do
  name=${spec%%:*} n=${spec##*:}
  t_sim_start "$EX/$name.yaml" "$name-$T_NODE"
  "$C" nvml-init nvml-count "$n" cu-init cu-count "$n" || t_fail "$name: $n devices"
  "$G" sim status "$name-$T_NODE" | grep -c '^  \[' | grep -qx "$n" || t_fail "$name status"
  "$G" sim list | grep -qx "$name-$T_NODE" || t_fail "$name listed"
done
"$C" nvml-init nvml-print 0 | grep -q '^Tesla T4|' || t_fail "mixed node device 0 is a T4"
t_ok "example specs"

# UUIDs are stable for a name and differ between names.
u1=$("$G" sim status "h100x2-$T_NODE" --json | grep -m1 '"uuid"')
"$G" sim stop "h100x2-$T_NODE"
"$G" sim start "$EX/h100x2.yaml" --name "h100x2-$T_NODE" >/dev/null
[ "$u1" = "$("$G" sim status "h100x2-$T_NODE" --json | grep -m1 '"uuid"')" ] || t_fail "stable UUID"
[ "$u1" != "$("$G" sim status "a100x8-$T_NODE" --json | grep -m1 '"uuid"')" ] || t_fail "UUID clash"

expect 1 "already exists" "$G" sim start "$EX/h100x2.yaml" --name "h100x2-$T_NODE"
expect 1 "cannot open spec" "$G" sim start "$S/nope.yaml" --name "x$T_NODE"
expect 1 "bad node name" "$G" sim start "$EX/h100x2.yaml" --name "bad/name"

# Malformed specs: each names the line; none leaves a node behind.
spec() { printf '%s\n' "$@" >"$S/bad.yaml"; }
spec "name: b" "devices:" "  - name: X" "    memroy: 8GiB"
expect 1 'bad.yaml:4: unknown device key memroy' "$G" sim start "$S/bad.yaml" --name "b$T_NODE"
spec "name: b" "devices:" "  - name: X" "    memory: 8 parsecs"
expect 1 "bad.yaml:4: bad value '8 parsecs' for 'memory'" "$G" sim start "$S/bad.yaml" --name "b$T_NODE"
spec "name: b" "devices:" "  - name: X" "    memory: 8GiB" "    count: 17"
expect 1 "bad.yaml:5: bad value '17' for 'count'" "$G" sim start "$S/bad.yaml" --name "b$T_NODE"
spec "name: b" "devices: [ {name: X, memory: 8GiB" ""
expect 1 "bad.yaml:[0-9]+:[0-9]+: YAML error" "$G" sim start "$S/bad.yaml" --name "b$T_NODE"
spec "name: b"
expect 1 "no 'devices'" "$G" sim start "$S/bad.yaml" --name "b$T_NODE"
spec "name: b" "devices:" "  - memory: 8GiB"
expect 1 "bad.yaml:3: device without 'name'" "$G" sim start "$S/bad.yaml" --name "b$T_NODE"
spec "name: b" "devices:" "  - {name: X, memory: 8GiB, unsupported: [warp_drive]}"
expect 1 "bad.yaml:3: bad value 'warp_drive'" "$G" sim start "$S/bad.yaml" --name "b$T_NODE"
spec "name: b" "devices:" "  - {name: X, memory: 8GiB}" "faults:" "  - {device: 3, at: 1s, xid: 79}"
expect 1 "names device 3" "$G" sim start "$S/bad.yaml" --name "b$T_NODE"
spec "nmae: b" "devices:" "  - {name: X, memory: 8GiB}"
expect 1 "bad.yaml:1: unknown key nmae" "$G" sim start "$S/bad.yaml" --name "b$T_NODE"
"$G" sim list | grep -q "^b$T_NODE\$" && t_fail "a bad spec left a node behind"
t_ok "malformed specs are refused with line numbers"

# A scheduled fault fires by itself.
spec "name: s" "devices:" "  - {name: X, memory: 8GiB}" "faults:" "  - {device: 0, at: 100ms, xid: 79}"
t_sim_start "$S/bad.yaml" "s$T_NODE"
t_until 20 "$C" nvml-init nvml-handle-expect 0 GPU_IS_LOST || t_fail "scheduled XID 79"
t_ok "scheduled faults"

# Usage errors (2) and failures (1), each changing nothing.
N="h100x2-$T_NODE"
expect 2 "usage: gpum sim" "$G" sim
expect 2 "unknown command 'bogus'" "$G" sim bogus
expect 2 "missing argument" "$G" sim start
expect 2 "unknown option '--nmae'" "$G" sim start "$EX/h100x2.yaml" --nmae x
expect 2 "give exactly one of" "$G" sim inject "$N" --device 0
expect 2 "give exactly one of" "$G" sim inject "$N" --device 0 --xid 79 --temp 80
expect 2 "bad value '0' for --xid" "$G" sim inject "$N" --device 0 --xid 0
expect 2 "bad value 'triple' for --ecc" "$G" sim inject "$N" --device 0 --ecc triple
expect 2 "bad value '1.5' for --error-rate" "$G" sim inject "$N" --device 0 --error-rate 1.5
expect 2 "bad value '-3' for --fail-after" "$G" sim inject "$N" --device 0 --fail-after -3
expect 2 "bad value '0' for --ckpt-fail" "$G" sim inject "$N" --device 0 --ckpt-fail 0
expect 2 "bad value '1001' for --restore-fail" "$G" sim inject "$N" --device 0 --restore-fail 1001
expect 2 "give exactly one of" "$G" sim inject "$N" --device 0 --ckpt-fail 1 --restore-fail 1
expect 2 "--device I is required" "$G" sim inject "$N" --xid 79
expect 2 "bad value 'x' for --device" "$G" sim inject "$N" --device x --xid 79
expect 1 "has no device 5" "$G" sim inject "$N" --device 5 --xid 79
expect 1 "no simulated node 'nope$T_NODE'" "$G" sim inject "nope$T_NODE" --device 0 --xid 79
expect 2 "bad value '101' for --util" "$G" sim set "$N" --device 0 --util 101
expect 2 "--util PCT is required" "$G" sim set "$N" --device 0
expect 2 "bad value '0' for --bytes" "$G" sim hold "$N" --device 0 --bytes 0
expect 2 "bad value 'soon' for --for" "$G" sim hold "$N" --device 0 --bytes 1GiB --for soon
expect 1 "has no device 9" "$G" sim hold "$N" --device 9 --bytes 1GiB
expect 1 "no simulated node" "$G" sim stop "nope$T_NODE"
expect 1 "no simulated node" "$G" sim status "nope$T_NODE"
"$G" sim status "$N" --json | grep -q '"state": "ok"' || t_fail "bad input changed the node"
"$G" sim status "$N" --json | grep -q '"last_xid": null' || t_fail "bad input injected a fault"
for sub in start stop status list inject clear set hold; do
  grep -q "usage: gpum sim $sub" <<<"$("$G" sim "$sub" --help)" || t_fail "gpum sim $sub --help"
done
grep -q "commands:" <<<"$("$G" sim --help)" || t_fail "gpum sim --help"
t_ok "usage errors and failures"

# Stopping a node while a process is attached: the process sees the driver go away.
GPUM_SIM_NODE=$N t_bg "$C" cu-init cu-ctx 0 ready "$S/att" wait-file "$S/stopped" cu-expect-lost DEINITIALIZED \
  nvml-init-expect DRIVER_NOT_LOADED
W=$T_LAST_PID
t_wait_file "$S/att"
"$G" sim stop "$N" || t_fail "stop with a process attached"
touch "$S/stopped"
wait "$W" || t_fail "an attached process after stop"
t_ok "stop with attached processes"
