#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpumd's alert engine as /metrics shows it, configured from the configuration file and
# reloaded on SIGHUP: with alerts.defaults false and no rules nothing fires over several
# monitor rounds; after the file gains "temperature > 0 INFO" and a SIGHUP, each of the two
# devices raises an INFO alert (gpum_alerts_total and gpum_alerts_active); a rule that does not
# parse is logged on SIGHUP and the old rules stay (gpumd keeps running, the alerts stay
# active); an unparsable rule at start stops gpumd with the rule's column named.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
export GPUM_HTTP_LISTEN=127.0.0.1:0 GPUM_MONITOR_INTERVAL=100ms GPUM_LOG_LEVEL=info
CFG=$T_SCRATCH/gpum.yaml
printf 'alerts.defaults: false\nalerts.rules: ""\n' >"$CFG"

# A rule that does not parse: gpumd refuses to start and names it.
rc=0
"$GPUMD" --config "$CFG" --alerts-rules "temperature > 0 LOUD" >"$T_OUT" 2>"$T_ERR" || rc=$?
[ "$rc" -ne 0 ] && grep -q "LOUD" "$T_ERR" || t_fail "bad rule at start: rc $rc: $(cat "$T_ERR")"
t_ok "an unparsable rule stops gpumd at start, naming it"

gd_start --config "$CFG"
t_wait_file "$GPUM_STATE_DIR/http.addr"
URL="http://$(cat "$GPUM_STATE_DIR/http.addr")/metrics"
M=$T_SCRATCH/metrics.txt
val() { awk -v k="$1" '$1 == k { print $2 }' "$M"; }
sample_time() { curl -sS -f -o "$M" "$URL" && awk '/^gpum_device_last_sample_timestamp_seconds\{gpu="0"/ { print $2 }' "$M"; }

# Several monitor rounds with no rule: nothing fires.
have_sample() { first=$(sample_time) && [ -n "$first" ]; }
t_until 20 have_sample || t_fail "no sample: $(cat "$M")"
advanced() { t=$(sample_time) && awk -v a="$first" -v b="$t" 'BEGIN { exit !(b >= a + 0.5) }'; }
t_until 20 advanced || t_fail "samples do not advance: $(cat "$M")"
[ "$(val 'gpum_alerts_total{level="INFO"}')" = 0 ] || t_fail "an alert without rules: $(cat "$M")"
t_ok "no rules, no alerts"

printf 'alerts.defaults: false\nalerts.rules: "temperature > 0 INFO"\n' >"$CFG"
kill -HUP "$GD_PID"
two_info() {
  curl -sS -f -o "$M" "$URL" && [ "$(val 'gpum_alerts_total{level="INFO"}')" = 2 ] &&
    [ "$(val 'gpum_alerts_active{level="INFO"}')" = 2 ]
}
t_until 20 two_info || t_fail "the reloaded rule did not fire on both devices: $(cat "$M")"
grep -q "alert rules reloaded: 1 rules" "$GD_ERR" || t_fail "no reload log line: $(cat "$GD_ERR")"
t_ok "SIGHUP reloads the rules; the new rule fires on each device"

printf 'alerts.defaults: false\nalerts.rules: "temperature > 0 LOUD"\n' >"$CFG"
kill -HUP "$GD_PID"
t_until 20 grep -q "alert rules not reloaded, keeping the old ones:.*LOUD" "$GD_ERR" ||
  t_fail "no log line for the bad rule: $(cat "$GD_ERR")"
curl -sS -f -o "$M" "$URL" || t_fail "gpumd stopped serving after a bad reload"
[ "$(val 'gpum_alerts_active{level="INFO"}')" = 2 ] || t_fail "the old rules were lost: $(cat "$M")"
t_ok "a bad rule on SIGHUP is logged and the old rules stay"

gd_stop TERM
[ "$GD_RC" -eq 0 ] || t_fail "gpumd exited $GD_RC: $(cat "$GD_ERR")"
