#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `gpum status` on a simulated 8x A100 node: eight devices in text and JSON, a process holding
# memory on device 3 shown with its pid, user, command and memory, --devices filtering (and a
# device that does not exist: exit 1), and colour only when asked for.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
unset GPUM_CONFIG GPUM_BACKEND GPUM_DEVICES GPUM_NVML_LIBRARY GPUM_COLOR NO_COLOR
G=$GPUM_BIN
out=$T_OUT err=$T_ERR
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/a100x8.yaml"


# t_pyjson FILE SCRIPT [ARGS...]: runs SCRIPT with d = the JSON document in FILE.

# Eight devices, in order, each AVAILABLE with its name, in text and in JSON.
t_expect 0 "$G" status
[ "$(grep -c '^\[[0-9]\] ' "$out")" -eq 8 ] || t_fail "expected 8 device lines: $(cat "$out")"
for i in 0 1 2 3 4 5 6 7; do
  grep -Eq "^\[$i\] .*A100.*AVAILABLE" "$out" || t_fail "device $i line: $(cat "$out")"
done
grep -q 'simulated' "$out" || t_fail "the header does not say the node is simulated"
if grep -q $'\033' "$out"; then t_fail "colour escapes written to a pipe"; fi
t_expect 0 "$G" status --json
t_pyjson "$out" '
assert d["backend"] == "nvml" and d["simulated"] is True, d
assert d["sim_node"] == args[0], d["sim_node"]
assert isinstance(d["hostname"], str) and d["time"].endswith("Z")
devs = d["devices"]
assert [x["index"] for x in devs] == list(range(8)), devs
for x in devs:
    assert x["state"] == "AVAILABLE" and x["reason"] is None, x
    assert "A100" in x["name"] and x["uuid"].startswith("GPU-"), x
    assert x["is_host"] is False
    m = x["memory"]
    assert m["total"] > 39 * 2**30 and m["used"] + m["free"] <= m["total"], m
    for k in ("gpu", "memory"):
        assert 0 <= x["utilization"][k] <= 100, x
    assert isinstance(x["temperature_c"], int) and isinstance(x["power_w"], (int, float)), x
    assert isinstance(x["processes"], list), x
assert len({x["uuid"] for x in devs}) == 8
' "$GPUM_SIM_NODE" || t_fail "status --json on 8x A100: $(cat "$out")"
t_ok "8 devices in text and JSON"

# A process holding 4 GiB on device 3 appears under device 3 with pid, user, command, memory.
# `gpum sim hold` starts a detached holder and prints its pid once the memory is accounted.
holder=$("$G" sim hold "$GPUM_SIM_NODE" --device 3 --bytes 4GiB) || t_fail "sim hold"
[[ "$holder" =~ ^[0-9]+$ ]] || t_fail "sim hold printed '$holder', not a pid"
T_PIDS+=("$holder")
me=$(id -un)
holder_visible() {
  "$G" status --json >"$T_SCRATCH/poll.json" 2>/dev/null &&
    t_pyjson "$T_SCRATCH/poll.json" '
p = [p for p in d["devices"][3]["processes"] if p["pid"] == int(args[0])]
assert p and p[0]["memory"] >= 4 * 2**30' "$holder"
}
t_until 20 holder_visible || t_fail "holder pid $holder never appeared on device 3"
t_expect 0 "$G" status --json
t_pyjson "$out" '
pid, user = int(args[0]), args[1]
for x in d["devices"]:
    mine = [p for p in x["processes"] if p["pid"] == pid]
    assert bool(mine) == (x["index"] == 3), (x["index"], x["processes"])
p = [p for p in d["devices"][3]["processes"] if p["pid"] == pid][0]
assert p["user"] == user, p
assert isinstance(p["command"], str) and p["command"], p
assert 4 * 2**30 <= p["memory"] <= 5 * 2**30, p
assert d["devices"][3]["memory"]["used"] >= p["memory"], d["devices"][3]
' "$holder" "$me" || t_fail "holder in JSON: $(cat "$out")"
t_expect 0 "$G" status
# The process line sits below device 3's line and before device 4's.
awk -v pid="$holder" -v me="$me" '
  /^\[[0-9]+\] / { dev = substr($1, 2, length($1) - 2) }
  $1 == pid { found = 1; if (dev != 3 || $2 != me || $0 !~ / 4\.00 GiB /) bad = 1 }
  END { exit !(found && !bad) }' "$out" || t_fail "holder in text: $(cat "$out")"
t_expect 0 "$G" status --no-processes
if grep -q "^ *$holder " "$out"; then t_fail "--no-processes still lists processes"; fi
t_ok "a holder's pid, user, command and memory under device 3"

# The holder's memory comes back when it dies.
kill -9 "$holder"
holder_gone() {
  "$G" status --json >"$T_SCRATCH/poll.json" 2>/dev/null &&
    t_pyjson "$T_SCRATCH/poll.json" 'assert not d["devices"][3]["processes"]'
}
t_until 20 holder_gone || t_fail "the killed holder still shows"
t_ok "a killed holder disappears"

# --devices filters, as flag (two spellings), range, environment and configuration file.
t_expect 0 "$G" status --devices 0,2
[ "$(grep -c '^\[[0-9]\] ' "$out")" -eq 2 ] && grep -q '^\[0\] ' "$out" && grep -q '^\[2\] ' "$out" ||
  t_fail "--devices 0,2: $(cat "$out")"
t_expect 0 "$G" status --json --devices=5-7
t_pyjson "$out" 'assert [x["index"] for x in d["devices"]] == [5, 6, 7], d["devices"]' ||
  t_fail "--devices=5-7"
GPUM_DEVICES=4 t_expect 0 "$G" status --json
t_pyjson "$out" 'assert [x["index"] for x in d["devices"]] == [4]' || t_fail "GPUM_DEVICES=4"
printf 'devices: "1"\n' >"$T_SCRATCH/dev.yaml"
GPUM_DEVICES=6 t_expect 0 "$G" --config "$T_SCRATCH/dev.yaml" status --json --devices 2,1,2
t_pyjson "$out" 'assert [x["index"] for x in d["devices"]] == [1, 2]' || t_fail "flag over env"
GPUM_DEVICES=6 t_expect 0 "$G" --config "$T_SCRATCH/dev.yaml" status --json
t_pyjson "$out" 'assert [x["index"] for x in d["devices"]] == [6]' || t_fail "env over file"
t_expect 0 "$G" --config "$T_SCRATCH/dev.yaml" status --json
t_pyjson "$out" 'assert [x["index"] for x in d["devices"]] == [1]' || t_fail "file"
t_ok "--devices filters (flag > env > file)"

t_expect 1 "$G" status --devices 0,9
grep -q 'device 9 does not exist' "$err" && grep -q '8 devices' "$err" ||
  t_fail "--devices 0,9: $(cat "$err")"
[ ! -s "$out" ] || t_fail "--devices 0,9 printed a status anyway"
t_expect 1 "$G" status --json --devices 8
t_ok "a device that does not exist exits 1 with the reason"

# Colour: never on a pipe by default; --color always forces it; --no-color and NO_COLOR win
# over auto.
t_expect 0 "$G" status --color always
grep -q $'\033\[' "$out" || t_fail "--color always wrote no escapes"
t_expect 0 "$G" status --color always --no-color
if grep -q $'\033' "$out"; then t_fail "--no-color after --color always still colours"; fi
NO_COLOR=1 t_expect 0 "$G" status
if grep -q $'\033' "$out"; then t_fail "NO_COLOR colours"; fi
GPUM_COLOR=always t_expect 0 "$G" status --json
if grep -q $'\033' "$out"; then t_fail "JSON output has colour escapes"; fi
t_ok "colour only when asked for"
