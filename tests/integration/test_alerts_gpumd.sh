#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# gpum alerts with gpumd running shows gpumd's alerts (active and history since it started),
# says so, and filters by --devices; --local (or --for, --watch, ...) evaluates here instead;
# with gpumd stopped it falls back to the local evaluation and says why.
source "$GPUM_SOURCE_DIR/tests/integration/lib.sh"
source "$GPUM_SOURCE_DIR/tests/integration/gpumd_lib.sh"

t_sim_start "$GPUM_SOURCE_DIR/examples/sim/h100x2.yaml"
gd_start --monitor-interval 100ms
G="$GPUM_BIN"

"$G" sim inject "$GPUM_SIM_NODE" --device 1 --xid 13 >/dev/null || t_fail "inject --xid 13"
xid_seen() {
  "$G" alerts --json >"$T_SCRATCH/a.json" &&
    t_pyjson "$T_SCRATCH/a.json" '
assert d["source"] == "gpumd", d
sys.exit(0 if any(a["metric"] == "xid" and a["device"] == 1 and a["xid"] == 13
                  for a in d["active"] + d["history"]) else 1)'
}
t_until 15 xid_seen || t_fail "gpumd's Xid 13 alert not shown: $(cat "$T_SCRATCH/a.json")"
t_ok "gpum alerts --json shows gpumd's Xid alert (source gpumd)"

t_expect 0 "$G" alerts
head -1 "$T_OUT" | grep -q "^source: gpumd at $GPUM_SOCKET" || t_fail "text source: $(cat "$T_OUT")"
grep -Eq '^  .*GPU 1 .*Xid 13' "$T_OUT" || t_fail "text: $(cat "$T_OUT")"
t_expect 0 "$G" alerts --json --devices 0
t_pyjson "$T_OUT" 'sys.exit(0 if d["active"] == [] and all(a["device"] == 0 for a in d["history"]) else 1)' ||
  t_fail "--devices 0 kept device 1's alerts: $(cat "$T_OUT")"
t_expect 0 "$G" alerts --json --limit 0
t_pyjson "$T_OUT" 'sys.exit(0 if d["history"] == [] else 1)' || t_fail "--limit 0: $(cat "$T_OUT")"
t_ok "text output, --devices and --limit"

# --local: a fresh window here, which has not seen the Xid injected before it started.
t_expect 0 "$G" alerts --local --json --for 300ms --interval 50
t_pyjson "$T_OUT" 'sys.exit(0 if d["source"] == "local" and not any(a["metric"] == "xid" for a in d["history"]) else 1)' ||
  t_fail "--local: $(cat "$T_OUT")"
t_expect 0 "$G" alerts --for 300ms --interval 50
head -1 "$T_OUT" | grep -q '^source: local evaluation$' || t_fail "--for implies local: $(cat "$T_OUT")"
t_ok "--local and --for evaluate here"

gd_stop TERM
GPUM_MONITOR_INTERVAL=50ms t_expect 0 "$G" alerts
grep -q "cannot connect to gpumd" "$T_ERR" && grep -q "evaluating the rules here" "$T_ERR" ||
  t_fail "fallback message: $(cat "$T_ERR")"
head -1 "$T_OUT" | grep -q '^source: local evaluation$' || t_fail "fallback: $(cat "$T_OUT")"
t_ok "without gpumd: local evaluation, and why"
