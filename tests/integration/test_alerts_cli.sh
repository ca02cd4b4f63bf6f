#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `gpum alerts` flags and listings: --list-rules shows the default rules (in their documented
# order) plus those of --rules FILE, --no-defaults drops the defaults, the example rules of
# docs/monitoring.md are accepted; --xids lists the Xid
# table (text and JSON); a quiet node gives no alerts (exit 0); bad flags, a missing rules file
# and a bad rule exit 2 with a message naming the problem (file and line for a bad rule); a
# device that does not exist exits 1.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
unset GPUM_CONFIG GPUM_BACKEND GPUM_DEVICES GPUM_NVML_LIBRARY GPUM_COLOR NO_COLOR
G=$GPUM_BIN
out=$T_OUT err=$T_ERR
t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"

# Rules in effect.
t_expect 0 "$G" alerts --list-rules
cat >"$T_SCRATCH/defaults" <<'RULES'
memory_used_pct > 90 for 10s WARNING clear 85
temperature > slowdown-5 for 10s WARNING clear slowdown-8
temperature > shutdown-5 for 5s CRITICAL clear shutdown-8
xid any auto
health == ERROR CRITICAL
RULES
diff "$T_SCRATCH/defaults" "$out" >&2 || t_fail "the default rules differ from the documented ones"
R=$T_SCRATCH/rules
printf '# comment\n\npower > 600W for 1m INFO devices 1\n' >"$R"
t_expect 0 "$G" alerts --list-rules --rules "$R"
[ "$(wc -l <"$out")" -eq 6 ] && tail -1 "$out" | grep -q '^power > ' || t_fail "--rules: $(cat "$out")"
t_expect 0 "$G" alerts --list-rules --no-defaults --rules "$R"
[ "$(wc -l <"$out")" -eq 1 ] || t_fail "--no-defaults: $(cat "$out")"
t_expect 0 "$G" alerts --list-rules --no-defaults
[ ! -s "$out" ] || t_fail "--no-defaults without rules: $(cat "$out")"
# Every example rule of docs/monitoring.md (the block after "Examples:") is accepted.
awk '/^Examples:$/ { f = 1; next } f && /^```$/ { if (++c == 2) exit; next } f && c == 1' \
  "$GPUM_SOURCE_DIR/docs/monitoring.md" >"$T_SCRATCH/doc.rules"
want=$(grep -cv '^#' "$T_SCRATCH/doc.rules")
[ "$want" -ge 5 ] || t_fail "no examples found in docs/monitoring.md"
t_expect 0 "$G" alerts --list-rules --no-defaults --rules "$T_SCRATCH/doc.rules"
[ "$(wc -l <"$out")" -eq "$want" ] || t_fail "documented examples: $(cat "$out")"
t_ok "--list-rules, --rules and --no-defaults; the documented examples parse"

# The Xid table.
t_expect 0 "$G" alerts --xids
grep -Eq '^ *79  CRITICAL  GPU has fallen off the bus$' "$out" || t_fail "--xids: $(cat "$out")"
grep -Eq '^ *13  ERROR ' "$out" || t_fail "--xids 13: $(cat "$out")"
t_expect 0 "$G" alerts --xids --json
t_pyjson "$out" '
x = {e["xid"]: e for e in d}
assert x[79]["critical"] is True and "fallen off the bus" in x[79]["name"], x[79]
assert x[13]["critical"] is False and x[13]["action"], x[13]
assert [e["xid"] for e in d] == sorted(x), d
' || t_fail "--xids --json: $(cat "$out")"
t_ok "--xids lists the table"

# A quiet node: no alerts, exit 0, in JSON and text.
t_expect 0 "$G" alerts --json --interval 20
t_pyjson "$out" '
assert d["active"] == [] and d["history"] == [], d
assert len(d["rules"]) == 5 and d["devices"] == 2 and d["window_ms"] >= 60, d
' || t_fail "quiet node: $(cat "$out")"
t_expect 0 "$G" alerts --interval 20 --devices 1
grep -q '^evaluated 5 rules on 1 device for ' "$out" && grep -q '^active alerts: 0$' "$out" &&
  grep -q '^history: 0$' "$out" || t_fail "quiet node text: $(cat "$out")"
t_ok "a quiet node has no alerts"

# Bad input.
t_expect 2 "$G" alerts --for 0
grep -q "invalid duration '0'" "$err" || t_fail "--for 0: $(cat "$err")"
t_expect 2 "$G" alerts --for soon
t_expect 2 "$G" alerts --for
t_expect 2 "$G" alerts --interval 0
t_expect 2 "$G" alerts --interval=-5
t_expect 2 "$G" alerts --rules
t_expect 2 "$G" alerts --frobnicate
grep -q "unknown option '--frobnicate'" "$err" || t_fail "unknown option: $(cat "$err")"
t_expect 2 "$G" alerts now
t_expect 2 "$G" alerts --rules "$T_SCRATCH/missing.rules"
grep -q "missing.rules" "$err" || t_fail "missing file not named: $(cat "$err")"
printf 'temperature > 80 for 1s WARNING\ntemperature >> 3 WARNING\n' >"$T_SCRATCH/bad.rules"
t_expect 2 "$G" alerts --rules "$T_SCRATCH/bad.rules"
grep -q "bad.rules:2:" "$err" || t_fail "bad rule not located: $(cat "$err")"
printf 'temperature > 80 for 1s LOUD\n' >"$T_SCRATCH/bad2.rules"
t_expect 2 "$G" alerts --list-rules --rules "$T_SCRATCH/bad2.rules"
grep -qi "LOUD" "$err" || t_fail "bad level not named: $(cat "$err")"
[ ! -s "$out" ] || t_fail "bad rules printed something: $(cat "$out")"
t_expect 2 "$G" alerts --watch --devices 0,,1
t_expect 1 "$G" alerts --devices 7
grep -q 'no device 7' "$err" || t_fail "--devices 7: $(cat "$err")"
t_expect 0 "$G" alerts --help
grep -q 'usage: gpum alerts' "$out" || t_fail "--help"
t_ok "bad flags and rules exit 2, a missing device exits 1"
